#!/usr/bin/env python
"""Benchmark ``recpipe pack`` against MXNet's ``im2rec.py`` as whole commands.

Two contests on the same folder of JPEGs, each timed end to end (process start, imports,
listing, reading, coding, writing):

* re-encode:     ``recpipe pack --resize 256 --quality 95``  vs  ``im2rec.py --num-thread 2
                 --resize 256 --quality 95``
* pass-through:  ``recpipe pack --pass-through``             vs  ``im2rec.py --num-thread 2
                 --pass-through``

im2rec runs with the mxnet venv's python (``--mxnet-python``) from a ``.lst`` made beforehand
(not timed). Each round runs every contender once, alternating which of a pair goes first; the
table gives medians of wall time and the ratio im2rec / recpipe (higher is better for recpipe),
and the same for CPU time (user + system of the command and the processes it waited for), which
says more than wall time when other jobs load the machine: under contention a command with
more processes gets a bigger share of the cores.

    python tools/bench_pack.py [--data /work/shared/data/photos] [--rounds 5] [--json]
"""

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

DEFAULT_DATA = "/work/shared/data/photos"
MXNET_PYTHONS = (".venv-mxnet/bin/python", "/tmp/mxvenv/bin/python")
TARGETS = {"re-encode": 1.5, "pass-through": 3.0}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=DEFAULT_DATA, help="folder of class subfolders of images")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--mxnet-python", default=None,
                   help="python of a venv with mxnet (default: .venv-mxnet/bin/python, "
                        "else /tmp/mxvenv/bin/python)")
    p.add_argument("--num-thread", type=int, default=2, help="im2rec --num-thread")
    p.add_argument("--workers", type=int, default=None, help="recpipe pack --workers")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    return p.parse_args(argv)


def find_mxnet_python(choice):
    candidates = [choice] if choice else list(MXNET_PYTHONS)
    for python in candidates:
        python = os.path.abspath(python)
        if os.path.exists(python) and subprocess.run(
                [python, "-c", "import mxnet"], capture_output=True).returncode == 0:
            return python
    sys.exit(f"no mxnet python found (tried {', '.join(candidates)}); "
             f"build one with tools/setup_mxnet_venv.sh or pass --mxnet-python")


def find_im2rec(mxnet_python):
    code = "import mxnet, os; print(os.path.join(os.path.dirname(mxnet.__file__), 'tools', 'im2rec.py'))"
    path = subprocess.run([mxnet_python, "-c", code], check=True, capture_output=True,
                          text=True).stdout.strip()
    if not os.path.exists(path):
        sys.exit(f"im2rec.py not found at {path}")
    return path


def machine():
    model = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
            "cpu": model, "python": platform.python_version(),
            "loadavg": os.getloadavg()}


def data_summary(folder):
    files = [os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs]
    sizes = [os.path.getsize(f) for f in files]
    return {"path": folder, "files": len(files), "bytes": sum(sizes),
            "mean_kb": round(sum(sizes) / max(1, len(sizes)) / 1024, 1)}


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_timed(cmd, cwd):
    """``(wall seconds, CPU seconds)`` of a command and every process it waited for."""
    cpu_before = _children_cpu()
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return elapsed, _children_cpu() - cpu_before


def count_records(idx_path):
    with open(idx_path) as f:
        return sum(1 for line in f if line.strip())


def contenders(args, work, mxpy, im2rec):
    recpipe = [sys.executable, "-m", "recpipe", "pack", args.data]
    if args.workers is not None:
        recpipe += ["--workers", str(args.workers)]
    im = [mxpy, im2rec, "--num-thread", str(args.num_thread)]
    prefix = os.path.join(work, "photos")
    return {
        "re-encode": [
            ("recpipe", recpipe + [os.path.join(work, "rp_re"), "--resize", "256",
                                   "--quality", "95", "--no-progress"],
             os.path.join(work, "rp_re.idx")),
            ("im2rec", im + ["--resize", "256", "--quality", "95", prefix, args.data],
             prefix + ".idx"),
        ],
        "pass-through": [
            ("recpipe", recpipe + [os.path.join(work, "rp_pt"), "--pass-through",
                                   "--no-progress"], os.path.join(work, "rp_pt.idx")),
            ("im2rec", im + ["--pass-through", prefix, args.data], prefix + ".idx"),
        ],
    }


def main(argv=None):
    args = parse_args(argv)
    mxpy = find_mxnet_python(args.mxnet_python)
    im2rec = find_im2rec(mxpy)
    work = tempfile.mkdtemp(prefix="bench_pack_")
    try:
        subprocess.run([mxpy, im2rec, "--list", "--recursive", os.path.join(work, "photos"),
                        args.data], check=True, capture_output=True)
        contests = contenders(args, work, mxpy, im2rec)
        times = {contest: {name: [] for name, _, _ in pairs} for contest, pairs in contests.items()}
        cpu = {contest: {name: [] for name, _, _ in pairs} for contest, pairs in contests.items()}
        records = {}
        for contest, pairs in contests.items():  # warm-up: page cache, pyc files
            for name, cmd, idx in pairs:
                run_timed(cmd, work)
                records.setdefault(contest, {})[name] = count_records(idx)
        load_before = os.getloadavg()
        for round_no in range(args.rounds):
            for contest, pairs in contests.items():
                order = pairs if round_no % 2 == 0 else pairs[::-1]
                for name, cmd, _ in order:
                    wall, cpu_s = run_timed(cmd, work)
                    times[contest][name].append(wall)
                    cpu[contest][name].append(cpu_s)
        result = {"machine": machine(), "data": data_summary(args.data), "rounds": args.rounds,
                  "load_before": load_before, "load_after": os.getloadavg(),
                  "commands": {c: {n: " ".join(cmd) for n, cmd, _ in p} for c, p in contests.items()},
                  "records": records, "contests": {}}
        for contest, by_name in times.items():
            ours = statistics.median(by_name["recpipe"])
            theirs = statistics.median(by_name["im2rec"])
            ours_cpu = statistics.median(cpu[contest]["recpipe"])
            theirs_cpu = statistics.median(cpu[contest]["im2rec"])
            result["contests"][contest] = {
                "recpipe_median_s": round(ours, 3), "im2rec_median_s": round(theirs, 3),
                "recpipe_s": [round(t, 3) for t in by_name["recpipe"]],
                "im2rec_s": [round(t, 3) for t in by_name["im2rec"]],
                "recpipe_cpu_median_s": round(ours_cpu, 3),
                "im2rec_cpu_median_s": round(theirs_cpu, 3),
                "speedup": round(theirs / ours, 2), "cpu_ratio": round(theirs_cpu / ours_cpu, 2),
                "target": TARGETS[contest], "met": theirs / ours >= TARGETS[contest]}
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)
    return 0


def print_table(result):
    m = result["machine"]
    print(f"machine: {m['nproc']} CPUs ({m['usable_cores']} usable), {m['cpu']}, "
          f"load {result['load_before'][0]:.2f} -> {result['load_after'][0]:.2f}")
    d = result["data"]
    print(f"data: {d['path']}: {d['files']} files, {d['bytes'] / 1e6:.1f} MB; "
          f"{result['rounds']} rounds, medians of whole-command wall time")
    print(f"{'contest':<14}{'recpipe s':>10}{'im2rec s':>10}{'speedup':>9}{'target':>8}  met"
          f"{'recpipe cpu':>13}{'im2rec cpu':>12}{'cpu ratio':>11}")
    for contest, r in result["contests"].items():
        print(f"{contest:<14}{r['recpipe_median_s']:>10.3f}{r['im2rec_median_s']:>10.3f}"
              f"{r['speedup']:>8.2f}x{r['target']:>7.1f}x  {'yes' if r['met'] else 'NO ':<3}"
              f"{r['recpipe_cpu_median_s']:>13.3f}{r['im2rec_cpu_median_s']:>12.3f}"
              f"{r['cpu_ratio']:>10.2f}x")
    for contest, names in result["records"].items():
        print(f"records written ({contest}): " + ", ".join(f"{n} {c}" for n, c in names.items()))


if __name__ == "__main__":
    sys.exit(main())
