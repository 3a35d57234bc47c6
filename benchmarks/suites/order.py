"""A shuffled epoch plan at face scale: ``shuffle="block"`` over 17.1M records (Glint360K).

Times ``recpipe.decode.order.epoch_order(n, shuffle="block")`` (64-record runs, windows of 8
runs) against the previous algorithm (one array per run, kept here as the baseline), and checks
that both give the same order. Target: <= 0.5 s for 17.1M records.
"""

import numpy as np

from ..format import figure, fmt, fmt_ratio, ratio
from ..harness import Ratio, Suite, Table, suite

TARGET_S = 0.5


def old_block_shuffle(n, rng, *, block_records, window_blocks):
    """The baseline: one ``np.arange`` per run, one concatenation per window."""
    bounds = list(range(0, n, block_records)) + [n]
    blocks = [np.arange(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]
    order = rng.permutation(len(blocks))
    result = []
    for w in range(0, len(order), window_blocks):
        window = np.concatenate([blocks[b] for b in order[w:w + window_blocks]])
        result.append(rng.permutation(window))
    return np.concatenate(result) if result else np.arange(0)


def _rng(seed, epoch):
    return np.random.Generator(np.random.Philox(key=[seed, epoch << 8]))


@suite
class Order(Suite):
    name = "order"
    title = "Planning a block-shuffled epoch at face scale"
    grid = {"records": (17_100_000,)}
    quick = {"records": (200_000,)}
    repeats = 3
    warmup = 0

    def prepare(self):
        return {"description": "no file: the positions 0..N-1 of a face-scale .rec "
                               "(N = records)"}

    def contenders(self, point):
        from recpipe.decode.order import epoch_order

        n = point["records"]
        return {"previous algorithm": lambda: old_block_shuffle(
                    n, _rng(1, 0), block_records=64, window_blocks=8) is None,
                "epoch_order": lambda: epoch_order(n, shuffle="block", seed=1,
                                                   epoch=0) is None}

    def facts(self, point):
        from recpipe.decode.order import epoch_order

        n = min(point["records"], 2_000_000)
        same = all(np.array_equal(old_block_shuffle(n, _rng(1, e), block_records=64,
                                                    window_blocks=8),
                                  epoch_order(n, shuffle="block", seed=1, epoch=e))
                   for e in range(2))
        return {"same_order_checked_records": n, "same_order": bool(same)}

    def ratios(self, point):
        return [Ratio("speedup", "epoch_order", "previous algorithm", metric="wall_s",
                      invert=True)]

    @classmethod
    def tables(cls, result):
        rows = []
        for p in result["points"]:
            rows.append([f"{p['params']['records']:,}",
                         fmt(figure(p, "previous algorithm", "wall_s"), 3),
                         fmt(figure(p, "epoch_order", "wall_s"), 3),
                         fmt_ratio(ratio(p, "speedup")), f"<= {TARGET_S} s",
                         "yes" if p["facts"].get("same_order") else "NO"])
        return [Table("Seconds to plan one block-shuffled epoch (64-record runs, windows of 8)",
                      ["records", "previous s", "epoch_order s", "speedup", "target",
                       "same order"], rows)]
