"""Which records an epoch visits, in which order, split into batches and parts.

Every rank computes the same permutation for a given ``(seed, epoch)``, takes its own contiguous
part of it, and wraps around so that every part has the same number of records, and therefore the
same number of batches (MXNet's byte-based split does not, which hangs distributed jobs).
"""

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

__all__ = ["BatchPositions", "EpochBatches", "SHUFFLE_MODES", "block_shuffle", "byte_runs",
           "check_batching", "check_parts", "epoch_order", "shuffle_mode", "split_batches"]

SHUFFLE_MODES = ("none", "full", "block")


def shuffle_mode(shuffle, indexed):
    """The mode a ``shuffle`` setting means for a file with an index or without one
    (``indexed``): True is 'full' with an index, 'block' without; False and None are 'none'."""
    if shuffle is True:
        return "full" if indexed else "block"
    if shuffle is False or shuffle is None:
        return "none"
    return shuffle


class BatchPositions(NamedTuple):
    """Record positions of one batch (an int64 array); the last ``pad`` of them are fillers
    wrapped from the start."""

    positions: np.ndarray
    pad: int


def _rng(seed, epoch, stream):
    return np.random.Generator(np.random.Philox(key=[seed & 0xFFFFFFFFFFFFFFFF,
                                                     (epoch << 8) | stream]))


def byte_runs(sizes, run_bytes):
    """First positions of runs of consecutive records holding about ``run_bytes`` bytes each
    (a run ends before the record that would take it past ``run_bytes``; every run has at
    least one record). ``sizes`` are the records' stored sizes in position order.

    One ``searchsorted`` per run over the cumulative sizes, not a Python step per record."""
    sizes = np.fromiter(sizes, dtype=np.int64) if not isinstance(sizes, np.ndarray) else \
        np.asarray(sizes, dtype=np.int64)
    before = np.concatenate(([0], np.cumsum(sizes)))  # bytes before each position
    nonempty = np.flatnonzero(sizes)
    if len(nonempty) == 0:
        return []
    n = len(sizes)
    starts = [int(nonempty[0])]
    while True:
        start = starts[-1]
        # the first record that would take the run past run_bytes...
        over = int(np.searchsorted(before, before[start] + run_bytes, side="right")) - 1
        if over >= n:
            return starts
        # ...starts the next run, unless the run holds no byte yet (then the record after it)
        starts.append(over if before[over] > before[start] else over + 1)
        if starts[-1] >= n:
            starts.pop()
            return starts


def block_shuffle(n, rng, *, block_records, window_blocks, run_starts=None):
    """Shuffle the order of runs of ``block_records`` consecutive records (or the runs beginning
    at ``run_starts``, e.g. from ``byte_runs``), then shuffle records within windows of
    ``window_blocks`` runs (a shuffle buffer spanning several runs).

    Reads stay sequential within a run, which suits object stores: with runs of a few MiB each
    run is fetched by one range request. Randomness is weaker than a full permutation (records
    from far-apart runs never meet in one window, and neighbours tend to share a batch).
    """
    starts = _run_starts(n, block_records, run_starts)
    lengths = np.diff(np.append(starts, n))
    order = rng.permutation(len(starts))
    permuted_lengths = lengths[order]
    ends = np.cumsum(permuted_lengths)
    result = _expand_runs(starts[order], permuted_lengths, ends)
    total = len(result)
    window_ends = ends[window_blocks - 1::window_blocks].tolist()
    if not window_ends or window_ends[-1] != total:
        window_ends.append(total)
    begin = 0
    for end in window_ends:  # one call per window: same draws as permuting each window's array
        rng.shuffle(result[begin:end])
        begin = end
    return result


def _expand_runs(first_positions, lengths, ends):
    """The positions of runs laid end to end (run ``j`` holds ``first_positions[j] +
    range(lengths[j])``), built as a cumulative sum of steps: 1 inside a run, a jump where a
    run begins. No Python object per run."""
    total = int(ends[-1]) if len(ends) else 0
    steps = np.ones(total, dtype=np.int64)
    if total == 0:
        return steps
    nonempty = lengths > 0
    begins = (ends - lengths)[nonempty]
    shifts = first_positions[nonempty] - begins  # position minus its place in the result
    steps[begins] = 1 + np.diff(shifts, prepend=0)
    steps[0] -= 1
    return np.cumsum(steps, out=steps)


def _run_starts(n, block_records, run_starts):
    """First positions of the runs as an int64 array (``block_records`` apart unless given)."""
    if run_starts is None:
        return np.arange(0, n, block_records, dtype=np.int64)
    return np.asarray(run_starts, dtype=np.int64).reshape(-1)


def epoch_order(n, *, shuffle="none", seed=0, epoch=0, part_index=0, num_parts=1,
                block_records=64, window_blocks=8, run_starts=None):
    """Record positions this part visits in ``epoch``: equal length on every part."""
    check_parts(part_index, num_parts)
    if shuffle not in SHUFFLE_MODES:
        raise ValueError(f"shuffle={shuffle!r}: expected one of {SHUFFLE_MODES}")
    if n == 0:
        return np.arange(0)
    if shuffle == "full":
        order = _rng(seed, epoch, 0).permutation(n)
    elif shuffle == "block":
        order = block_shuffle(n, _rng(seed, epoch, 0), block_records=block_records,
                              window_blocks=window_blocks, run_starts=run_starts)
    else:
        order = np.arange(n)
    per_part = math.ceil(n / num_parts)
    start = part_index * per_part
    if start + per_part <= n:
        return order[start:start + per_part]  # a view: no copy of a 17M-record order
    return np.take(order, np.arange(start, start + per_part), mode="wrap")


class EpochBatches(Sequence):
    """The batches of an epoch, cut from its order array on demand: constant Python objects
    per batch, none per record. ``batches[i]`` is a ``BatchPositions`` whose ``positions`` is an
    int64 array; ``flat(i)`` gives the positions of batches ``i..`` as one array."""

    def __init__(self, order, batch_size, last_batch="pad"):
        check_batching(batch_size, last_batch)
        self.order = np.asarray(order, dtype=np.int64)
        self.batch_size = batch_size
        self.last_batch = last_batch
        full, tail = divmod(len(self.order), batch_size)
        self._full = full
        self._count = full + (1 if tail and last_batch in ("pad", "partial") else 0)

    def __len__(self):
        return self._count

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError(f"batch {index} out of range for {self._count} batches")
        size = self.batch_size
        positions = self.order[index * size:(index + 1) * size]
        if index < self._full or self.last_batch == "partial":
            return BatchPositions(positions, 0)
        pad = size - len(positions)  # 'pad': filled from the start of the order, wrapping
        fill = np.take(self.order, np.arange(pad), mode="wrap")
        return BatchPositions(np.concatenate([positions, fill]), pad)

    def flat(self, start=0, stop=None):
        """Positions of batches ``start..stop`` (``stop`` excluded; None: to the end; padding
        included), in order, as one array."""
        stop = self._count if stop is None else min(stop, self._count)
        if start >= stop:
            return np.zeros(0, np.int64)
        full = min(stop, self._full)
        head = self.order[start * self.batch_size:full * self.batch_size]
        if stop <= self._full:
            return head
        return np.concatenate([head, self[self._count - 1].positions])


def check_batching(batch_size, last_batch):
    """Validate ``batch_size`` and ``last_batch`` without building anything."""
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be at least 1")
    if last_batch not in ("pad", "drop", "partial"):
        raise ValueError(f"last_batch={last_batch!r}: expected 'pad', 'drop' or 'partial'")


def check_parts(part_index, num_parts):
    """Validate ``part_index``/``num_parts`` without building anything."""
    if num_parts < 1 or not 0 <= part_index < num_parts:
        raise ValueError(f"part_index={part_index} must be in [0, num_parts={num_parts})")


def split_batches(order, batch_size, last_batch="pad"):
    """Cut ``order`` into batches (``EpochBatches``). ``last_batch``: 'pad' fills the last batch
    with records from the start of ``order`` (and counts them in ``pad``), 'drop' drops it,
    'partial' keeps it short."""
    return EpochBatches(order, batch_size, last_batch)
