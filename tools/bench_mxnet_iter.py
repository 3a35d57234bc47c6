"""mx.io.ImageRecordIter against recpipe.mx.record_iter.ImageRecordIter on the same .rec, in one
run.

Run with the mxnet venv's python (tools/setup_mxnet_venv.sh builds it and installs recpipe):

    .venv-mxnet/bin/python tools/bench_mxnet_iter.py                  # 1000 photos, train + val
    .venv-mxnet/bin/python tools/bench_mxnet_iter.py --images 200 --rounds 1 --batches 3  # smoke

The photos are packed pass-through into a temporary .rec/.idx. Each configuration builds each
iterator afresh per round (rounds alternate MXNet / recpipe so that background load hits both),
takes one warm-up batch, then times ``--batches`` batches (``wait_to_read`` on every NDArray).
Reported: median images/s over the rounds and recpipe/MXNet ratios. MXNet picks its own decode
thread count from ``preprocess_threads`` and the machine (its log line says how many it used);
recpipe runs at ``--threads`` and at 1 thread for a same-thread comparison.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

warnings.simplefilter("ignore")

import mxnet as mx  # noqa: E402

import recpipe  # noqa: E402
import recpipe.mx.record_iter as rm  # noqa: E402
from recpipe.io import IRHeader, pack  # noqa: E402

DEFAULT_PHOTOS = Path(__file__).resolve().parents[2] / "shared" / "data" / "photos"
NORMALIZE = dict(mean_r=123.68, mean_g=116.28, mean_b=103.53, std_r=58.395, std_g=57.12,
                 std_b=57.375)
CONFIGS = {
    # ImageNet-style training: random-resized crop, flip, colour jitter, full shuffle
    "train": dict(shuffle=True, random_resized_crop=True, min_random_area=0.08,
                  max_aspect_ratio=4 / 3, min_aspect_ratio=3 / 4, rand_mirror=True,
                  brightness=0.4, contrast=0.4, saturation=0.4, **NORMALIZE),
    # validation: shorter side to 256, center crop 224
    "val": dict(resize=256, **NORMALIZE),
}


def pack_photos(photos, count, rec):
    classes = sorted(p for p in Path(photos).iterdir() if p.is_dir())
    files = [(label, path) for label, folder in enumerate(classes)
             for path in sorted(folder.glob("*.jpg"))]
    files = files[:count]
    with recpipe.RecordWriter(rec) as writer:
        for i, (label, path) in enumerate(files):
            writer.write(pack(IRHeader(0, float(label), i, 0), path.read_bytes()))
    return len(files)


def time_iterator(make, batches):
    it = make()
    try:
        first = next(it)
        first.data[0].wait_to_read()
        started = time.perf_counter()
        images = 0
        for _ in range(batches):
            try:
                batch = next(it)
            except StopIteration:
                it.reset()
                batch = next(it)
            batch.data[0].wait_to_read()
            images += batch.data[0].shape[0] - batch.pad
        return images / (time.perf_counter() - started)
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()
        del it


def makers(args, rec, idx, config):
    base = dict(path_imgrec=rec, path_imgidx=idx, data_shape=(3, 224, 224),
                batch_size=args.batch_size, **CONFIGS[config])
    out = {"mxnet": lambda: mx.io.ImageRecordIter(preprocess_threads=args.threads, **base)}
    out[f"recpipe {args.threads}t"] = lambda: rm.ImageRecordIter(
        preprocess_threads=args.threads, **base)
    if args.threads != 1:
        out["recpipe 1t"] = lambda: rm.ImageRecordIter(preprocess_threads=1, **base)
    return out


def run(args, rec, idx):
    results = {}
    for config in args.configs:
        candidates = makers(args, rec, idx, config)
        rates = {name: [] for name in candidates}
        for _ in range(args.rounds):
            for name, make in candidates.items():
                rates[name].append(time_iterator(make, args.batches))
        results[config] = {name: statistics.median(values) for name, values in rates.items()}
    return results


def report(args, results, images):
    lines = [f"{images} photos, batch {args.batch_size}, data_shape (3, 224, 224), "
             f"{args.batches} timed batches x {args.rounds} rounds, preprocess_threads="
             f"{args.threads}, {os.cpu_count()} CPUs", "",
             "| config | iterator | images/s | vs MXNet |", "|---|---|---:|---:|"]
    for config, rates in results.items():
        for name, rate in rates.items():
            lines.append(f"| {config} | {name} | {rate:.0f} | {rate / rates['mxnet']:.2f}x |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photos", default=str(DEFAULT_PHOTOS))
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        rec, idx = os.path.join(tmp, "photos.rec"), os.path.join(tmp, "photos.idx")
        images = pack_photos(args.photos, args.images, rec)
        results = run(args, rec, idx)
    print(report(args, results, images))
    return 0


if __name__ == "__main__":
    sys.exit(main())
