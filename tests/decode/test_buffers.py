import gc

import numpy as np

from recpipe.decode.buffers import BufferPool


def test_memory_is_reused_only_after_every_derived_array_is_gone():
    pool = BufferPool(keep=2)
    first = pool.array((4, 3), np.float32)
    first[:] = 1
    view = first[1:]
    del first
    gc.collect()
    second = pool.array((4, 3), np.float32)
    assert pool.allocated == 2 and pool.reused == 0  # the view still holds the first buffer
    second[:] = 2
    assert (view == 1).all()
    del view
    gc.collect()
    third = pool.array((12,), np.float32)
    assert pool.reused == 1
    assert third.shape == (12,) and third.flags.writeable


def test_pool_keeps_a_bounded_number_of_free_buffers():
    pool = BufferPool(keep=1)
    arrays = [pool.array((8,), np.uint8) for _ in range(3)]
    del arrays
    gc.collect()
    assert sum(len(v) for v in pool._free.values()) == 1


def test_empty_arrays():
    assert BufferPool().array((0, 3), np.float32).shape == (0, 3)


def test_fewer_kept_frees_the_extra_arrays():
    pool = BufferPool(keep=4)
    arrays = [pool.array((1000,), np.uint8) for _ in range(4)]
    del arrays
    assert len(pool._free[1000]) == 4
    pool.set_keep(1)
    assert len(pool._free[1000]) == 1 and pool.keep == 1
