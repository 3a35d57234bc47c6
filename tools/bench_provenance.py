"""Benchmark the provenance log (``ImageLoader(provenance=PATH)``): loader throughput with the
log on vs off, alternated and repeated in one run, plus the log's bytes per batch and the cost of
one ``ProvenanceLog.record`` call.

Each round runs the same loader (shuffle, train augmentation, fixed threads) for ``--batches``
batches with the log off and on, in an order that alternates between rounds; the ratio of the
medians is the overhead. The log size is measured for shuffled batches of ``--batch-size`` and of
128 (the ImageNet default), whose positions do not form runs (the worst case for its size).

    python tools/bench_provenance.py --rounds 5 --json out/bench_provenance.json
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

import recpipe
from recpipe.decode.provenance import ProvenanceLog

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_autotune import build_rec  # noqa: E402

PHOTOS = "/work/shared/data/photos"
LOADER = dict(random_resized_crop=True, min_random_area=0.08, max_aspect_ratio=0.25,
              rand_mirror=True, shuffle=True, seed=1)


def run_once(rec, args, log):
    with recpipe.ImageLoader(rec, args.batch_size, (3, args.size, args.size),
                             threads=args.threads, provenance=log, **LOADER) as loader:
        stream = iter(loader)
        next(stream)  # warm-up, outside the timing
        start = time.perf_counter()
        for _ in range(args.batches):
            try:
                next(stream)
            except StopIteration:
                stream = iter(loader)
                next(stream)
        return args.batches * args.batch_size / (time.perf_counter() - start)


def bytes_per_batch(rec, batch_size, folder):
    log = os.path.join(folder, f"size{batch_size}.jsonl")
    with recpipe.ImageLoader(rec, batch_size, (3, 32, 32), threads=2, provenance=log,
                             **LOADER) as loader:
        batches = sum(1 for _ in loader)
    with open(log) as f:
        lines = f.read().splitlines()
    return {"batch_size": batch_size, "batches": batches,
            "loader_line_bytes": len(lines[0]) + 1,
            "bytes_per_batch": statistics.mean(len(line) + 1 for line in lines[1:])}


def record_cost_us(rec, folder, batch_size=128, calls=2000):
    options = recpipe.LoaderOptions.from_kwargs(batch_size, (3, 32, 32), **LOADER)
    with recpipe.RecordReader(rec) as reader:
        log = ProvenanceLog(os.path.join(folder, "cost.jsonl"), options, reader)
        rng = np.random.default_rng(0)
        positions = [rng.permutation(len(reader))[:batch_size] for _ in range(16)]
        log.record(0, 0, positions[0], positions[0], 0)  # the loader line
        start = time.perf_counter()
        for i in range(calls):
            log.record(0, i, positions[i % 16], positions[i % 16], 0)
        elapsed = time.perf_counter() - start
        log.close()
    return elapsed / calls * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rec", default=None, help="a .rec (default: the photos, packed)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--size", type=int, default=64, help="output side (small: more batches/s)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        rec = args.rec or build_rec(PHOTOS, os.path.join(folder, "photos.rec"))
        rates = {"off": [], "on": []}
        for round_ in range(args.rounds):
            order = ("off", "on") if round_ % 2 == 0 else ("on", "off")
            for mode in order:
                log = os.path.join(folder, f"run{round_}.jsonl") if mode == "on" else None
                rates[mode].append(run_once(rec, args, log))
            print(f"round {round_}: off {rates['off'][-1]:.0f} img/s, on {rates['on'][-1]:.0f} "
                  "img/s", file=sys.stderr)
        result = {
            "rec": args.rec or "photos (10 classes, 1000 JPEGs)", "rounds": args.rounds,
            "batches": args.batches, "batch_size": args.batch_size, "size": args.size,
            "threads": args.threads, "rates": rates,
            "median_off": statistics.median(rates["off"]),
            "median_on": statistics.median(rates["on"]),
            "sizes": [bytes_per_batch(rec, b, folder) for b in (args.batch_size, 128)],
            "record_call_us": record_cost_us(rec, folder),
        }
        result["on_vs_off"] = result["median_on"] / result["median_off"]
        ratios = [on / off for on, off in zip(rates["on"], rates["off"])]
        result["per_round_ratios"] = ratios
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
