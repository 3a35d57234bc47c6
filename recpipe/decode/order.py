"""Which records an epoch visits, in which order, split into batches and parts.

Every rank computes the same permutation for a given ``(seed, epoch)``, takes its own contiguous
part of it, and wraps around so that every part has the same number of records, and therefore the
same number of batches (MXNet's byte-based split does not, which hangs distributed jobs).
"""

import math
from typing import List, NamedTuple

import numpy as np

__all__ = ["BatchPlan", "epoch_order", "block_shuffle", "byte_runs", "split_batches", "SHUFFLE_MODES"]

SHUFFLE_MODES = ("none", "full", "block")


class BatchPlan(NamedTuple):
    """Record positions of one batch; the last ``pad`` of them are fillers wrapped from the start."""

    positions: List[int]
    pad: int


def _rng(seed, epoch, stream):
    return np.random.Generator(np.random.Philox(key=[seed & 0xFFFFFFFFFFFFFFFF, (epoch << 8) | stream]))


def byte_runs(sizes, run_bytes):
    """First positions of runs of consecutive records holding about ``run_bytes`` bytes each
    (a run ends before the record that would take it past ``run_bytes``; every run has at
    least one record). ``sizes`` are the records' stored sizes in position order."""
    starts = []
    filled = run_bytes
    for position, size in enumerate(sizes):
        if filled + size > run_bytes and (filled or not starts):
            starts.append(position)
            filled = 0
        filled += size
    return starts


def block_shuffle(n, rng, *, block_records, window_blocks, run_starts=None):
    """Shuffle the order of runs of ``block_records`` consecutive records (or the runs beginning
    at ``run_starts``, e.g. from ``byte_runs``), then shuffle records within windows of
    ``window_blocks`` runs (a shuffle buffer spanning several runs).

    Reads stay sequential within a run, which suits object stores: with runs of a few MiB each
    run is fetched by one range request. Randomness is weaker than a full permutation (records
    from far-apart runs never meet in one window, and neighbours tend to share a batch).
    """
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


def epoch_order(n, *, shuffle="none", seed=0, epoch=0, part_index=0, num_parts=1,
                block_records=64, window_blocks=8, run_starts=None):
    """Record positions this part visits in ``epoch``: equal length on every part."""
    if not 0 <= part_index < num_parts:
        raise ValueError(f"part_index={part_index} must be in [0, num_parts={num_parts})")
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
    return np.take(order, np.arange(start, start + per_part), mode="wrap")


def split_batches(order, batch_size, last_batch="pad"):
    """Cut ``order`` into batches. ``last_batch``: 'pad' fills the last batch with records from
    the start of ``order`` (and counts them in ``pad``), 'drop' drops it, 'partial' keeps it short."""
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be at least 1")
    if last_batch not in ("pad", "drop", "partial"):
        raise ValueError(f"last_batch={last_batch!r}: expected 'pad', 'drop' or 'partial'")
    order = [int(p) for p in order]
    batches = [BatchPlan(order[i:i + batch_size], 0)
               for i in range(0, len(order) - len(order) % batch_size, batch_size)]
    tail = order[len(batches) * batch_size:]
    if tail and last_batch == "partial":
        batches.append(BatchPlan(tail, 0))
    elif tail and last_batch == "pad":
        pad = batch_size - len(tail)
        fill = [order[i % len(order)] for i in range(pad)]
        batches.append(BatchPlan(tail + fill, pad))
    return batches
