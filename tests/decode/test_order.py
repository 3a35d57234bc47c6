import numpy as np
import pytest

from recpipe.decode.order import block_shuffle, byte_runs, epoch_order, split_batches


@pytest.mark.parametrize("n,parts", [(10, 3), (1000, 7), (5, 5), (3, 4), (128, 2)])
def test_every_part_gets_the_same_count_and_all_records_are_covered(n, parts):
    orders = [epoch_order(n, shuffle="full", seed=3, epoch=1, part_index=p, num_parts=parts)
              for p in range(parts)]
    assert len({len(o) for o in orders}) == 1
    assert set(np.concatenate(orders)) == set(range(n))


def test_shuffle_is_a_permutation_that_depends_on_seed_and_epoch():
    a = epoch_order(100, shuffle="full", seed=1, epoch=0)
    assert sorted(a) == list(range(100))
    assert list(a) == list(epoch_order(100, shuffle="full", seed=1, epoch=0))
    assert list(a) != list(epoch_order(100, shuffle="full", seed=1, epoch=1))
    assert list(a) != list(epoch_order(100, shuffle="full", seed=2, epoch=0))
    assert list(epoch_order(100)) == list(range(100))


def test_ranks_agree_on_the_permutation():
    whole = epoch_order(12, shuffle="full", seed=9, epoch=4)
    parts = [epoch_order(12, shuffle="full", seed=9, epoch=4, part_index=p, num_parts=3)
             for p in range(3)]
    assert list(np.concatenate(parts)) == list(whole)


def test_block_shuffle_keeps_runs_local_and_is_a_permutation():
    rng = np.random.default_rng(0)
    order = block_shuffle(1000, rng, block_records=50, window_blocks=2)
    assert sorted(order) == list(range(1000))
    # each window of 100 records draws from exactly two runs of 50
    for w in range(0, 1000, 100):
        assert len({int(p) // 50 for p in order[w:w + 100]}) == 2
    assert list(order) != list(range(1000))


def test_split_batches_policies():
    order = list(range(10))
    padded = split_batches(order, 4, "pad")
    # positions are int64 arrays: no Python object per record
    assert [b.positions.tolist() for b in padded] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]
    assert padded.flat(1).tolist() == [4, 5, 6, 7, 8, 9, 0, 1]
    assert [b.pad for b in padded] == [0, 0, 2]
    assert [b.positions.tolist() for b in split_batches(order, 4, "drop")] == [[0, 1, 2, 3],
                                                                               [4, 5, 6, 7]]
    assert split_batches(order, 4, "partial")[-1].positions.tolist() == [8, 9]
    assert [b.pad for b in split_batches(order, 5, "pad")] == [0, 0]


def test_pad_wraps_more_than_once_for_tiny_parts():
    batches = split_batches([7, 8], 5, "pad")
    assert batches[0].positions.tolist() == [7, 8, 7, 8, 7] and batches[0].pad == 3


@pytest.mark.parametrize("kwargs", [dict(part_index=3, num_parts=3), dict(shuffle="bogus")])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        epoch_order(10, **kwargs)
    with pytest.raises(ValueError):
        split_batches([1], 0)
    with pytest.raises(ValueError):
        split_batches([1], 2, "wrap")


def _block_shuffle_reference(n, rng, *, block_records, window_blocks, run_starts=None):
    """The original one-array-per-run algorithm, kept to pin the vectorised one's order."""
    if run_starts is None:
        run_starts = range(0, n, block_records)
    bounds = list(run_starts) + [n]
    blocks = [np.arange(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]
    order = rng.permutation(len(blocks))
    result = []
    for w in range(0, len(order), window_blocks):
        window = np.concatenate([blocks[b] for b in order[w:w + window_blocks]])
        result.append(rng.permutation(window))
    return np.concatenate(result) if result else np.arange(0)


@pytest.mark.parametrize("seed", range(4))
def test_block_shuffle_order_equals_the_reference_algorithm(seed):
    sizes = np.random.default_rng(100 + seed)
    cases = [(0, 64, 8), (1, 64, 8), (63, 64, 8), (64, 64, 8), (65, 64, 8), (1000, 50, 2),
             (1000, 7, 1), (513, 64, 8), (4097, 64, 8), (10_000, 64, 3), (999, 1, 5)]
    cases += [(int(sizes.integers(1, 5000)), int(sizes.integers(1, 130)), int(sizes.integers(1,
                                                                                             12)))
              for _ in range(40)]
    for n, block, window in cases:
        got = block_shuffle(n, np.random.default_rng([seed, n]), block_records=block,
                            window_blocks=window)
        want = _block_shuffle_reference(n, np.random.default_rng([seed, n]), block_records=block,
                                        window_blocks=window)
        assert got.dtype == want.dtype and got.tolist() == want.tolist(), (n, block, window)


@pytest.mark.parametrize("seed", range(3))
def test_block_shuffle_with_byte_runs_equals_the_reference_algorithm(seed):
    rng = np.random.default_rng(seed)
    for _ in range(30):
        n = int(rng.integers(1, 3000))
        runs = byte_runs(rng.integers(1, 5000, n).tolist(), int(rng.integers(1, 40_000)))
        window = int(rng.integers(1, 10))
        got = block_shuffle(n, np.random.default_rng(seed), block_records=0, window_blocks=window,
                            run_starts=runs)
        want = _block_shuffle_reference(n, np.random.default_rng(seed), block_records=0,
                                        window_blocks=window, run_starts=runs)
        assert got.tolist() == want.tolist()


@pytest.mark.parametrize("parts", [1, 2, 3, 7])
def test_block_epoch_order_parts_equal_the_reference_algorithm(parts):
    n = 64 * 37 + 19  # a partial last block
    reference = _block_shuffle_reference(n, np.random.Generator(np.random.Philox(key=[5,
                                                                                      (2 << 8)])),
                                         block_records=64, window_blocks=8)
    per_part = -(-n // parts)
    for p in range(parts):
        got = epoch_order(n, shuffle="block", seed=5, epoch=2, part_index=p, num_parts=parts)
        want = np.take(reference, np.arange(p * per_part, (p + 1) * per_part), mode="wrap")
        assert got.tolist() == want.tolist()


def _byte_runs_reference(sizes, run_bytes):
    """The original one-step-per-record loop, kept to pin the vectorised one."""
    starts = []
    filled = run_bytes
    for position, size in enumerate(sizes):
        if filled + size > run_bytes and (filled or not starts):
            starts.append(position)
            filled = 0
        filled += size
    return starts


def test_byte_runs_equal_the_reference_loop():
    rng = np.random.default_rng(21)
    for _ in range(2000):
        n = int(rng.integers(0, 80))
        sizes = rng.integers(0, 60, n) * (rng.random(n) < rng.random())  # some empty records
        run_bytes = int(rng.integers(0, 150))
        want = _byte_runs_reference(sizes.tolist(), run_bytes)
        assert byte_runs(sizes.tolist(), run_bytes) == want
        assert byte_runs(sizes, run_bytes) == want  # an int64 array as the loader passes
