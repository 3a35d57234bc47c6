#!/usr/bin/env python
"""``recpipe bench`` and ``import recpipe`` of two source trees, alternated: a change that only
moves code (issue 24: rooms, names, import paths) must leave both where they were.

``--base`` is the other tree (for example ``git archive <commit> | tar -x -C /tmp/base`` then
``python setup.py build_ext --inplace`` there); this script's own tree is the other side. Each
round runs both sides once, in alternating order, each as fresh processes: ``recpipe bench FILE
--json`` (bare decode and the train/val pipelines) and ``python -c "import recpipe"`` (import
time, best of ``--imports``). The table gives per-side medians and the median (and range) of the
rounds' ratios this tree / base, paired by round.

    python tools/bench_layers.py --base /tmp/base --rec data.rec [--rounds 3] [--seconds 2]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bench(tree, rec, seconds, threads):
    """``{measure: images/s}`` of one ``recpipe bench`` run with ``tree``'s recpipe."""
    done = subprocess.run([sys.executable, "-m", "recpipe", "bench", rec, "--json",
                           "--seconds", str(seconds), "--threads", str(threads)],
                          check=True, capture_output=True, text=True, cwd=tree,
                          env=dict(os.environ, PYTHONPATH=tree))
    result = json.loads(done.stdout)
    rates = {"bare decode": result["bare_decode_images_per_s"]}
    rates.update({f"{name} pipeline": config["images_per_s"]
                  for name, config in result["configs"].items()})
    return rates


def import_ms(tree, repeats):
    """Best wall time of ``python -c "import recpipe"`` with ``tree``'s recpipe, in ms."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import recpipe"], check=True, cwd=tree,
                       env=dict(os.environ, PYTHONPATH=tree))
        best = min(best, time.perf_counter() - start)
    return best * 1000


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", required=True, help="the other source tree (built in place)")
    p.add_argument("--rec", required=True, help=".rec file to bench")
    p.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    p.add_argument("--seconds", type=float, default=2.0, help="seconds per measurement")
    p.add_argument("--threads", type=int, default=2, help="decode threads (default 2)")
    p.add_argument("--imports", type=int, default=5, help="import runs per round (best taken)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    args = p.parse_args(argv)
    sides = {"base": os.path.abspath(args.base), "this tree": HERE}
    samples = {side: [] for side in sides}
    for r in range(args.rounds):
        order = list(sides) if r % 2 == 0 else list(sides)[::-1]
        for side in order:
            rates = bench(sides[side], args.rec, args.seconds, args.threads)
            rates["import recpipe (ms)"] = import_ms(sides[side], args.imports)
            samples[side].append(rates)
    measures = list(samples["base"][0])
    rows = {}
    for measure in measures:
        base = statistics.median(s[measure] for s in samples["base"])
        this = statistics.median(s[measure] for s in samples["this tree"])
        ratios = sorted(t[measure] / b[measure]
                        for b, t in zip(samples["base"], samples["this tree"]))
        rows[measure] = {"base": base, "this tree": this, "ratio": statistics.median(ratios),
                         "ratio_range": [ratios[0], ratios[-1]]}
    if args.json:
        print(json.dumps({"rounds": args.rounds, "rows": rows}, indent=2))
        return 0
    print(f"{'measure':24} {'base':>10} {'this tree':>10} {'ratio':>7}  {'range':>13}   (medians"
          f" of {args.rounds} alternated rounds; ratio: median of the rounds' this/base)")
    for measure, row in rows.items():
        low, high = row["ratio_range"]
        print(f"{measure:24} {row['base']:10.1f} {row['this tree']:10.1f} {row['ratio']:7.3f}  "
              f"{low:6.3f}-{high:<6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
