"""Check ``recpipe plan``'s prediction against measurements at 1 and 2 cores on this machine.

Measures the workload once (``recpipe.capacity.measure_workload``: one thread, a sample of the
file), predicts the rate of one process at 1 and 2 cores (``recpipe.capacity.predict``), then runs
the loader pinned with ``os.sched_setaffinity`` to 1 core with 1 thread and to 2 cores with 2
threads, alternating the order over ``--rounds``, and prints the prediction error per core count
(median measured / predicted - 1). On a machine whose cores other jobs use, the measurement
falls below the prediction by about their share; so the script also measures the share of the
pinned cores this process got (its CPU seconds / (wall seconds x cores), ``getrusage``) and
reports the error of the prediction scaled by that share ("contention-adjusted").

    python tools/check_capacity.py --rounds 3 --config train --json out/check_capacity.json
"""

import argparse
import json
import os
import resource
import statistics
import time
import sys
import tempfile

from recpipe.decode.bench import CONFIGS, pipeline_rate
from recpipe.capacity import measure_workload, predict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_autotune import build_rec  # noqa: E402

PHOTOS = "/work/shared/data/photos"


def pinned_rate(rec, config, cores, allowed, args):
    """``(images/s, share)`` of one loader of ``cores`` threads pinned to ``cores`` of the
    allowed cores; ``share``: the fraction of those cores' time this process got."""
    os.sched_setaffinity(0, sorted(allowed)[:cores])
    try:
        before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        rate = pipeline_rate(rec, config, cores, batch_size=args.batch_size,
                             seconds=args.seconds)["images_per_s"]
        after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - start
    finally:
        os.sched_setaffinity(0, allowed)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return rate, min(1.0, cpu / (wall * cores))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rec", default=None, help="a .rec (default: the photos, packed)")
    parser.add_argument("--config", default="train", choices=sorted(CONFIGS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        sys.exit("needs at least 2 usable cores")
    config = CONFIGS[args.config]
    with tempfile.TemporaryDirectory() as folder:
        rec = args.rec or build_rec(PHOTOS, os.path.join(folder, "photos.rec"))
        workload = measure_workload(rec, config, images=args.images, batch_size=args.batch_size)
        predicted = {n: predict(workload, n, 1) for n in (1, 2)}
        measured, shares = {1: [], 2: []}, {1: [], 2: []}
        for round_ in range(args.rounds):
            for cores in ((1, 2) if round_ % 2 == 0 else (2, 1)):
                rate, share = pinned_rate(rec, config, cores, allowed, args)
                measured[cores].append(rate)
                shares[cores].append(share)
                print(f"round {round_}: {cores} core(s): {rate:.0f} img/s with {share:.0%} of "
                      f"them (predicted {predicted[cores].images_per_s:.0f} with all)",
                      file=sys.stderr)
    result = {"rec": args.rec or "photos (10 classes, 1000 JPEGs)", "config": args.config,
              "rounds": args.rounds, "seconds": args.seconds,
              "workload": {"cpu_ms_per_image": workload.cpu_seconds * 1e3,
                           "gil_us_per_image": workload.gil_seconds * 1e6,
                           "bytes_per_image": workload.bytes_per_image},
              "cores": {}}
    for cores in (1, 2):
        median = statistics.median(measured[cores])
        result["cores"][cores] = {
            "predicted_images_per_s": predicted[cores].images_per_s,
            "limit": predicted[cores].limit, "measured_images_per_s": measured[cores],
            "median_measured": median,
            "error": median / predicted[cores].images_per_s - 1,
            "core_share": shares[cores],
            "adjusted_errors": [rate / (predicted[cores].images_per_s * share) - 1
                                for rate, share in zip(measured[cores], shares[cores])]}
        result["cores"][cores]["median_adjusted_error"] = statistics.median(
            result["cores"][cores]["adjusted_errors"])
    result["measured_scaling_2_over_1"] = (result["cores"][2]["median_measured"]
                                           / result["cores"][1]["median_measured"])
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
