"""A shuffled epoch plan at face scale: ``shuffle="block"`` over 17.1M records (Glint360K's size).

Times ``recpipe.decode.order.epoch_order(n, shuffle="block")`` (64-record runs, windows of 8 runs)
against the previous algorithm (one array per run, kept here as the baseline), alternated in one
process, and checks that both give the same order. Target (issue 21): <= 0.5 s.

    python tools/bench_order.py --rounds 3
    python tools/bench_order.py --records 1000000 --rounds 5 --json
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=17_100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from recpipe.decode.order import epoch_order

    times = {"old": [], "new": []}
    for epoch in range(args.rounds):
        started = time.perf_counter()
        old = old_block_shuffle(args.records, _rng(1, epoch), block_records=64, window_blocks=8)
        times["old"].append(time.perf_counter() - started)
        started = time.perf_counter()
        new = epoch_order(args.records, shuffle="block", seed=1, epoch=epoch)
        times["new"].append(time.perf_counter() - started)
        if not np.array_equal(old, new):
            raise SystemExit(f"epoch {epoch}: the orders differ")
        del old, new
    result = {name: statistics.median(values) for name, values in times.items()}
    result["speedup"] = result["old"] / result["new"]
    result["records"] = args.records
    result["target_s"] = TARGET_S
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{args.records} records, block shuffle, median of {args.rounds} alternated rounds: "
              f"old {result['old']:.3f} s, new {result['new']:.3f} s ({result['speedup']:.1f}x), "
              f"target <= {TARGET_S} s")


if __name__ == "__main__":
    main()
