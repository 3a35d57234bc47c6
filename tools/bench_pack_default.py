#!/usr/bin/env python
"""``recpipe pack``'s default (JPEG pixels kept, restart markers added losslessly) against
``--restart off`` (JPEG bytes kept, the default before restart markers), ``--reencode`` (every
image decoded and encoded at quality 95, the first default) and ``--pass-through``, as whole
commands.

Each round runs the four once, in a rotated order; one untimed warm-up run of each first (page
cache). The table gives medians of wall and CPU time (user + system of the command and its
workers), the output size, and each mode's time as a ratio to the default's in the same run.

    python tools/bench_pack_default.py [--data /work/shared/data/photos] [--rounds 5] [--json]
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

DEFAULT_DATA = "/work/shared/data/photos"
MODES = {"default (restart markers)": [], "--restart off (bytes)": ["--restart", "off"],
         "--reencode": ["--reencode"], "--pass-through": ["--pass-through"]}


def run(data, out, flags):
    """``(wall s, CPU s, output bytes)`` of one ``recpipe pack`` command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "recpipe", "pack", data, out, "--no-progress", *flags],
                   check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, os.path.getsize(out + ".rec")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=DEFAULT_DATA, help=f"image folder (default {DEFAULT_DATA})")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds (default 5)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    args = p.parse_args(argv)
    names = list(MODES)
    samples = {name: [] for name in names}
    work = tempfile.mkdtemp(prefix="bench_pack_default-")
    try:
        for name in names:  # warm-up, untimed
            run(args.data, os.path.join(work, "warm"), MODES[name])
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                samples[name].append(run(args.data, os.path.join(work, f"o{r}"), MODES[name]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = statistics.median(s[0] for s in samples[names[0]])
    rows = {name: {"wall_s": statistics.median(s[0] for s in runs),
                   "cpu_s": statistics.median(s[1] for s in runs),
                   "output_mb": runs[0][2] / 1e6,
                   "wall_vs_default": statistics.median(s[0] for s in runs) / base}
            for name, runs in samples.items()}
    if args.json:
        print(json.dumps({"data": args.data, "rounds": args.rounds, "modes": rows}, indent=2))
        return
    print(f"{args.data}, {args.rounds} rounds, medians")
    print(f"{'mode':28} {'wall s':>7} {'CPU s':>7} {'out MB':>7} {'wall / default':>15}")
    for name, row in rows.items():
        print(f"{name:28} {row['wall_s']:7.2f} {row['cpu_s']:7.2f} {row['output_mb']:7.1f} "
              f"{row['wall_vs_default']:15.2f}")


if __name__ == "__main__":
    main()
