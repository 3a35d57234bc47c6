import numpy as np
import pytest

from recpipe.decode.order import block_shuffle, epoch_order, split_batches


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
