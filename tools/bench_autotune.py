"""Benchmark ``threads="auto"`` against a fixed-thread sweep, with a sleeping consumer.

The consumer sleeps ``T`` seconds per batch (a simulated accelerator: sleeping releases the GIL
as a CUDA sync does). ``T`` is set from a calibration run (``c``: decode-thread CPU seconds per
batch, from ``time.thread_time``, which other processes' load does not inflate) so that each
scenario asks for a given number of cores (docs/autotune.md, section 6):

- ``s1`` consumer-bound: ``T = 2 * c`` (needs ~0.5 core)
- ``s2`` needs ~1.6 cores: ``T = c / 1.6``
- ``s3`` CPU-saturated: ``T = c / 4``
- ``s4`` workload change: ``s1`` for the first half of the run, then ``s2``

For each scenario every configuration (fixed 1..4 threads and auto) runs ``--reps`` times, in
an order that alternates configurations; the medians are compared. Pass criteria: auto
throughput >= 0.95 x the best fixed setting; settled within 10 decision windows; final threads
<= n95 + 1 (n95: the fewest fixed threads within 95% of the best). The overhead check runs fixed
2 threads with no consumer delay, with and without the autotuner measuring (frozen at 2 threads),
alternating, and also times ``time.thread_time()`` (called twice per decoded sample).

    python tools/bench_autotune.py --json out/bench_autotune.json
"""

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time

import recpipe
from recpipe.decode.bench import TRAIN
from recpipe.system.host import node_share
from recpipe.io import IRHeader, pack

BATCH = 128
FIXED = (1, 2, 3, 4)
RATIOS = {"s1": 0.5, "s2": 1.6, "s3": 4.0}


def build_rec(photos, rec):
    """Pack the class folders of ``photos`` into ``rec`` (label = folder index)."""
    if os.path.exists(rec):
        return rec
    os.makedirs(os.path.dirname(rec) or ".", exist_ok=True)
    position = 0
    with recpipe.RecordWriter(rec) as writer:
        for label, folder in enumerate(sorted(os.listdir(photos))):
            for name in sorted(os.listdir(os.path.join(photos, folder))):
                with open(os.path.join(photos, folder, name), "rb") as f:
                    writer.write(pack(IRHeader(0, float(label), position, 0), f.read()))
                position += 1
    return rec


def make_loader(rec, threads, tuner_options=None):
    settings = dict(TRAIN)
    shape = settings.pop("data_shape")
    loader = recpipe.ImageLoader(rec, BATCH, shape, threads=1 if threads == "auto" else threads,
                                 shuffle=True, **settings)
    if threads == "auto" or tuner_options:
        loader.enable_autotune(**(tuner_options or {}))
    return loader


def consume(loader, steps, seconds):
    """Take batches for ``seconds``; ``steps(elapsed)`` is the sleep per batch. Returns images/s
    over the whole run and over its last half (the steady state), and the change time."""
    start = time.perf_counter()
    images, half_images, half_start = 0, 0, None
    while True:
        for batch, _ in loader:
            elapsed = time.perf_counter() - start
            step = steps(elapsed)
            if step:
                time.sleep(step)
            images += len(batch)
            elapsed = time.perf_counter() - start
            if elapsed >= seconds / 2:
                if half_start is None:
                    half_start = time.perf_counter()
                else:
                    half_images += len(batch)
            if elapsed >= seconds:
                end = time.perf_counter()
                return images / (end - start), half_images / max(end - half_start, 1e-9)


def calibrate(rec, seconds):
    """``(cpu, wall)``: decode CPU seconds per batch, and wall seconds per batch of one thread
    with an instant consumer."""
    with make_loader(rec, 1) as loader:
        before = loader.stats()
        rate, _ = consume(loader, lambda _: 0.0, seconds)
        after = loader.stats()
    cpu = (after["cpu_seconds"] - before["cpu_seconds"]) / (after["samples"] - before["samples"])
    return cpu * BATCH, BATCH / rate


def run_one(rec, threads, steps, seconds):
    decisions = []
    with make_loader(rec, threads) as loader:
        started = time.perf_counter()
        if loader.autotuner is not None:
            loader.autotuner.add_listener(
                lambda d: decisions.append((time.perf_counter() - started, d)))
        rate, steady = consume(loader, steps, seconds)
        report = loader.autotune_report()
    result = {"threads": threads, "images_per_s": rate, "steady_images_per_s": steady}
    if report is not None:
        result.update(final_threads=report["threads"], prefetch=report["prefetch"],
                      reason=report["reason"], windows=report["windows"],
                      settled_window=report["settled_window"],
                      max_threads_seen=max([d.threads for _, d in decisions] or [0]),
                      wait_before=report["wait_fraction"]["before"],
                      wait_after=report["wait_fraction"]["after"],
                      decisions=[(round(t, 2), d.describe()) for t, d in decisions
                                 if d.action not in ("stay", "hold")])
        result["windows_after_change"] = _windows_to_settle_after(decisions, seconds / 2)
    return result


def _windows_to_settle_after(decisions, change_time):
    """Windows from the workload change to the last kept thread change after it."""
    after = [d for t, d in decisions if t >= change_time]
    settled = 0
    for i, d in enumerate(after, 1):
        if d.action in ("keep threads", "keep jump"):
            settled = i
    return settled


def scenario_steps(name, cpu, seconds):
    if name == "s4":
        first, second = 2 * cpu, cpu / 1.6
        return lambda elapsed: first if elapsed < seconds / 2 else second
    step = cpu / RATIOS[name]
    return lambda elapsed: step


def run_scenario(rec, name, cpu, seconds, reps, rng):
    configs = list(FIXED) + ["auto"]
    runs = {c: [] for c in configs}
    for rep in range(reps):
        order = configs[:]
        rng.shuffle(order)
        for config in order:
            result = run_one(rec, config, scenario_steps(name, cpu, seconds), seconds)
            runs[config].append(result)
            print(f"  {name} rep {rep + 1} {config!s:>4}: {result['images_per_s']:7.1f} img/s"
                  + (f"  -> {result['final_threads']} threads, {result['reason']}, settled at "
                     f"window {result['settled_window']}/{result['windows']}"
                     if config == "auto" else ""), file=sys.stderr, flush=True)
    return summarize(name, runs)


def summarize(name, runs):
    med = {c: statistics.median(r["images_per_s"] for r in rs) for c, rs in runs.items()}
    fixed = {c: v for c, v in med.items() if c != "auto"}
    best_n = max(fixed, key=fixed.get)
    n95 = min(n for n, v in fixed.items() if v >= 0.95 * fixed[best_n])
    autos = runs["auto"]
    final = statistics.median(r["final_threads"] for r in autos)
    settled = statistics.median(r["settled_window"] for r in autos)
    summary = {
        "scenario": name,
        "median_images_per_s": {str(c): v for c, v in med.items()},
        "best_fixed": best_n,
        "n95": n95,
        "auto_vs_best": med["auto"] / fixed[best_n],
        "auto_final_threads": [r["final_threads"] for r in autos],
        "auto_reasons": [r["reason"] for r in autos],
        "auto_settled_window": [r["settled_window"] for r in autos],
        "auto_max_threads_seen": [r["max_threads_seen"] for r in autos],
        "auto_wait": [(r["wait_before"], r["wait_after"]) for r in autos],
        "pass_throughput": med["auto"] >= 0.95 * fixed[best_n],
        "pass_settled": settled <= 10,
        "pass_not_overprovisioned": final <= n95 + 1,
        "runs": {str(c): rs for c, rs in runs.items()},
    }
    if name == "s4":
        summary["auto_windows_after_change"] = [r["windows_after_change"] for r in autos]
        summary["pass_settled"] = summary["pass_settled"] and statistics.median(
            summary["auto_windows_after_change"]) <= 10
    return summary


def overhead(rec, seconds, reps):
    """Fixed 2 threads, instant consumer: plain vs measured by a frozen autotuner."""
    frozen = dict(threads=2, min_threads=2, max_threads=2, max_prefetch=2)
    plain, measured = [], []
    for _ in range(reps):
        for options, sink in ((None, plain), (frozen, measured)):
            with make_loader(rec, 2, options) as loader:
                sink.append(consume(loader, lambda _: 0.0, seconds)[0])
    calls = 200_000
    t0 = time.perf_counter()
    for _ in range(calls):
        time.thread_time()
    per_call = (time.perf_counter() - t0) / calls
    per_sample = 2 / statistics.median(plain)  # 2 threads: CPU-ish seconds per sample
    return {
        "plain_images_per_s": plain, "measured_images_per_s": measured,
        "ratio_of_medians": statistics.median(measured) / statistics.median(plain),
        "thread_time_call_us": per_call * 1e6,
        "thread_time_share_of_sample": 2 * per_call / per_sample,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--photos", default="/work/shared/data/photos")
    parser.add_argument("--rec", default=".bench/autotune/photos.rec")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds per run")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--scenarios", default="s1,s2,s3,s4")
    parser.add_argument("--overhead-reps", type=int, default=5)
    parser.add_argument("--overhead-seconds", type=float, default=6.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the full results here")
    args = parser.parse_args(argv)

    rec = build_rec(args.photos, args.rec)
    rng = random.Random(args.seed)
    cpu, wall1 = calibrate(rec, 4.0)
    results = {
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "machine": {"cores": node_share()[0], "cpu": platform.processor() or platform.machine(),
                    "python": platform.python_version(), "load_before": os.getloadavg()},
        "data": {"rec": rec, "records": len(recpipe.RecordReader(rec)), "batch": BATCH,
                 "config": "train"},
        "cpu_seconds_per_batch": cpu,
        "one_thread_wall_seconds_per_batch": wall1,
        "scenarios": [],
    }
    print(f"calibration: {cpu * 1e3:.0f} CPU-ms per batch of {BATCH}; one thread takes "
          f"{wall1 * 1e3:.0f} ms a batch now", file=sys.stderr)
    for name in [s for s in args.scenarios.split(",") if s]:
        seconds = args.seconds * (1.5 if name == "s4" else 1)
        results["scenarios"].append(run_scenario(rec, name, cpu, seconds, args.reps, rng))
    if args.overhead_reps:
        results["overhead"] = overhead(rec, args.overhead_seconds, args.overhead_reps)
    results["machine"]["load_after"] = os.getloadavg()
    print_table(results)
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2, default=str)
    return 0


def print_table(results):
    print(f"c = {results['cpu_seconds_per_batch'] * 1e3:.0f} CPU-ms/batch, one thread "
          f"{results['one_thread_wall_seconds_per_batch'] * 1e3:.0f} ms/batch, "
          f"load {results['machine']['load_before']} -> {results['machine']['load_after']}")
    print("| scenario | fixed 1 | fixed 2 | fixed 3 | fixed 4 | auto | auto/best | n95 | "
          "auto final threads | reasons | settled window | pass |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in results["scenarios"]:
        m = s["median_images_per_s"]
        ok = s["pass_throughput"] and s["pass_settled"] and s["pass_not_overprovisioned"]
        settled = s["auto_settled_window"]
        if "auto_windows_after_change" in s:
            settled = f"{settled}; after change {s['auto_windows_after_change']}"
        print(f"| {s['scenario']} | {m['1']:.0f} | {m['2']:.0f} | {m['3']:.0f} | {m['4']:.0f} | "
              f"{m['auto']:.0f} | {s['auto_vs_best']:.2f} | {s['n95']} | "
              f"{s['auto_final_threads']} | {sorted(set(s['auto_reasons']))} | {settled} | "
              f"{'yes' if ok else 'NO'} |")
    if "overhead" in results:
        o = results["overhead"]
        print(f"overhead (2 fixed threads, no consumer delay): measured/plain = "
              f"{o['ratio_of_medians']:.3f}; thread_time() {o['thread_time_call_us']:.2f} us a "
              f"call = {o['thread_time_share_of_sample']:.2%} of a sample")


if __name__ == "__main__":
    sys.exit(main())
