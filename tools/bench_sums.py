"""Checksums on vs off on the native path: ``integrity='off'`` against ``'auto'`` (a CRC32C of
every record, checked in C without the GIL) on the same pack, alternated in one run.

Two packs: faces (112x112 crops of ``../shared/data/photos``, as ``bench_faces.py`` makes them;
float32 NCHW batches, random mirror, normalised) and photos (the shared photos packed
pass-through; ImageNet train: random-resized crop to 224, mirror). Each round runs both
settings on both packs (the order flips every round); each run reads the whole pack ``--epochs``
times on ``--threads`` decode threads. Reported: images/s and CPU microseconds per image
(process time, less sensitive to other jobs on a shared machine) with their medians, the
ratio of the medians and the median of the per-round ratios auto/off (> 1: checksums cost).
Because a shared machine's noise is larger than the effect, it also measures the work the sums
add directly: the CRC32C of every record of the pack (in memory, best of 5) plus the sidecar
lookup of a run of 8 records, per image, as a fraction of the measured CPU time per image.

    python tools/bench_sums.py --rounds 5
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
sys.path.insert(0, HERE)

PHOTOS = next((p for p in (os.path.join(HERE, "..", "..", "shared", "data", "photos"),
                            "/work/shared/data/photos") if os.path.isdir(p)), None)
NORM = dict(mean_r=127.5, mean_g=127.5, mean_b=127.5, std_r=127.5, std_g=127.5, std_b=127.5)
CONFIGS = {
    "faces": dict(batch_size=128, data_shape=(3, 112, 112), rand_mirror=True, **NORM),
    "photos": dict(batch_size=64, data_shape=(3, 224, 224), random_resized_crop=True,
                   rand_mirror=True),
}


def make_photos(folder, photos):
    from recpipe.packing.packer import pack_dataset

    out = os.path.join(folder, "photos")
    if not os.path.exists(out + ".rec"):
        pack_dataset(photos, out, pass_through=True, workers=0)
    return out + ".rec"


def run_once(rec, config, integrity, threads, epochs):
    """``(images/s, CPU microseconds per image)`` of ``epochs`` epochs."""
    from recpipe.decode.loader import ImageLoader

    with ImageLoader(rec, threads=threads, shuffle=True, integrity=integrity,
                     last_batch="partial", lookahead=False, **config) as loader:
        assert loader.records.native, "the native path is not in use"
        assert (loader.reader.sums is not None) == (integrity != "off")
        next(iter(loader))  # warm up: threads, buffers, page cache
        count, wall, cpu = 0, time.perf_counter(), time.process_time()
        for _ in range(epochs):
            for images, _ in loader:
                count += len(images)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return count / wall, 1e6 * cpu / count


def _best(function, repeats=5):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def _hot_crc_seconds(payloads):
    """CRC32C time of each payload while it is in the cache (as the loader sums a record right
    after reading it), summed."""
    from recpipe.io.sidecars.crc32c import crc32c

    total = 0.0
    for payload in payloads:
        crc32c(payload)
        total += _best(lambda: crc32c(payload), 3)
    return total


def added_work(rec):
    """``(us of CRC32C per record, us of sidecar lookup per record, GB/s)`` on ``rec``."""
    import recpipe
    from recpipe.decode.records import RecordDecoder

    with recpipe.RecordReader(rec) as reader:
        payloads = [reader[i] for i in range(len(reader))]
        records = RecordDecoder(reader, None)
        runs = [np.arange(i, min(i + 8, len(reader))) for i in range(0, len(reader), 8)]
        spans = [reader.spans(run) for run in runs]
        lookup = _best(lambda: [records._expected_sums(run, *span)
                                for run, span in zip(runs, spans)])
    crc = _hot_crc_seconds(payloads)
    n = len(payloads)
    return 1e6 * crc / n, 1e6 * lookup / n, sum(len(p) for p in payloads) / crc / 1e9


def main():
    import bench_faces

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--faces", type=int, default=3000)
    parser.add_argument("--dir", default="/tmp/recpipe-bench-sums")
    parser.add_argument("--photos", default=PHOTOS, help="folder of class folders of JPEGs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    bench_faces.PHOTOS = args.photos
    recs = {"faces": bench_faces.make_faces(args.dir, args.faces),
            "photos": make_photos(args.dir, args.photos)}
    results = {(name, setting): [] for name in recs for setting in ("off", "auto")}
    for round_ in range(args.rounds):
        order = ("off", "auto") if round_ % 2 == 0 else ("auto", "off")
        for name, rec in recs.items():
            for setting in order:
                results[(name, setting)].append(
                    run_once(rec, CONFIGS[name], setting, args.threads, args.epochs))
    from recpipe.io.sidecars.crc32c import implementation

    report = {"rounds": args.rounds, "epochs": args.epochs, "threads": args.threads,
              "crc32c": implementation(), "packs": {}}
    for name in recs:
        summary = {}
        for setting in ("off", "auto"):
            rates, cpus = zip(*results[(name, setting)])
            summary[setting] = {"images/s": round(statistics.median(rates), 1),
                                "cpu_us_per_image": round(statistics.median(cpus), 1)}
        paired = [(a[0] / o[0], a[1] / o[1])
                  for a, o in zip(results[(name, "auto")], results[(name, "off")])]
        summary["paired_rate_ratio_median"] = round(statistics.median(r for r, _ in paired), 4)
        summary["paired_cpu_ratio_median"] = round(statistics.median(c for _, c in paired), 4)
        crc_us, lookup_us, speed = added_work(recs[name])
        summary["added_us_per_image"] = {"crc32c": round(crc_us, 2), "lookup": round(lookup_us, 2),
                                         "crc32c_GB/s": round(speed, 1)}
        summary["added_fraction_of_cpu"] = round(
            (crc_us + lookup_us) / summary["off"]["cpu_us_per_image"], 4)
        summary["rate_ratio_auto_off"] = round(
            summary["auto"]["images/s"] / summary["off"]["images/s"], 4)
        summary["cpu_ratio_auto_off"] = round(
            summary["auto"]["cpu_us_per_image"] / summary["off"]["cpu_us_per_image"], 4)
        report["packs"][name] = summary
    print(json.dumps(report, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
