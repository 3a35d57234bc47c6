#!/usr/bin/env python
"""Decode and augment micro-benchmarks for recpipe/decode (results go to BENCHMARKS.md, "decoders").

Measures, on in-memory JPEG bytes (default: /work/shared/data/photos):
  1. decode images/s per backend at full scale and at each DCT scale;
  2. fast_dct / fast_upsample on and off;
  3. 1 vs 2 threads (does the decode release the GIL?);
  4. per-stage cost (plan / decode / crop-resize / mirror+normalise write) of the train config
     (random_resized_crop to 224, rand_mirror) and the val config (resize 256, center crop 224),
     uint8 vs float32 (and float16) output, NCHW and NHWC, with and without DCT scaling;
  5. end-to-end single-thread rate of each config relative to the bare full-size decode rate,
     with region-of-interest decoding (recpipe._batch.decode_region) on and off;
  6. bare region decode vs whole-image decode for the train/val crops, baseline and progressive.

Every figure is the median of --repeats runs; ratios are taken within this one run.
Usage: python tools/bench_decoders.py [--data DIR] [--count N] [--repeats R] [--quick]
"""

import argparse
import os
import platform
import statistics
import sys
import threading
import time

import cv2
import numpy as np

from recpipe.decode.augment import AugmentConfig, Augmenter, sample_rng
from recpipe.decode.decoders import available_decoders, get_decoder

TRAIN = dict(data_shape=(3, 224, 224), random_resized_crop=True, min_random_area=0.08,
             max_random_area=1.0, min_aspect_ratio=3 / 4, max_aspect_ratio=4 / 3,
             rand_mirror=True)
VAL = dict(data_shape=(3, 224, 224), resize=256)
NORM = dict(mean_r=123.68, mean_g=116.28, mean_b=103.53, std_r=58.395, std_g=57.12, std_b=57.375)


def load_jpegs(root, count):
    paths = []
    for folder, _, names in sorted(os.walk(root)):
        paths += [os.path.join(folder, n) for n in sorted(names)
                  if n.lower().endswith((".jpg", ".jpeg"))]
    paths = paths[:count]
    if not paths:
        sys.exit(f"no JPEGs under {root}")
    blobs = []
    for path in paths:
        with open(path, "rb") as f:
            blobs.append(f.read())
    return blobs


def median_rate(fn, n_items, repeats, clock=time.thread_time):
    """Median items/s over ``repeats`` runs of ``fn`` (which processes n_items).

    Single-thread figures use this thread's CPU time (``time.thread_time``): on a machine shared
    with other jobs, wall time mostly measures the neighbours. Multi-thread ones pass
    ``clock=time.perf_counter``.
    """
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        times.append(clock() - start)
    return n_items / statistics.median(times)


def bench_backends(blobs, repeats, scales_wanted):
    rows = []
    for name in available_decoders():
        dec = get_decoder(name)
        for scale in dec.scales:
            if scale not in scales_wanted:
                continue
            rate = median_rate(lambda: [dec.decode(b, scale=scale) for b in blobs], len(blobs),
                               repeats)
            rows.append((name, f"{scale[0]}/{scale[1]}", rate))
    return rows


def bench_flags(blobs, repeats):
    rows = []
    for name in available_decoders():
        if name == "opencv":
            continue
        for fast_dct, fast_up in ((False, False), (True, False), (False, True), (True, True)):
            dec = get_decoder(name, fast_dct=fast_dct, fast_upsample=fast_up)
            rate = median_rate(lambda: [dec.decode(b) for b in blobs], len(blobs), repeats)
            rows.append((name, fast_dct, fast_up, rate))
    return rows


def bench_threads(blobs, repeats):
    rows = []
    for name in available_decoders():
        dec = get_decoder(name)
        one = median_rate(lambda: [dec.decode(b) for b in blobs], len(blobs), repeats,
                          clock=time.perf_counter)

        def two():
            halves = (blobs[0::2], blobs[1::2])
            threads = [threading.Thread(target=lambda h=h: [dec.decode(b) for b in h])
                       for h in halves]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        rows.append((name, one, median_rate(two, len(blobs), repeats, clock=time.perf_counter),
                     gil_progress(dec)))
    return rows


def gil_progress(dec, size=3000):
    """Iterations/s of a pure-Python counter thread while another thread decodes one big JPEG,
    relative to the same counter running alone: ~1 (or ~0.5 on a busy machine) when the decode
    releases the GIL, ~0 when it holds it for the whole decode."""
    rng = np.random.default_rng(0)
    big = cv2.resize(rng.integers(0, 255, (size // 8, size // 8, 3), dtype=np.uint8),
                     (size, size), interpolation=cv2.INTER_CUBIC)
    blob = cv2.imencode(".jpg", big)[1].tobytes()
    stop = threading.Event()
    count = [0]

    def spin():
        while not stop.is_set():
            count[0] += 1

    def counted(work):
        count[0] = 0
        stop.clear()
        spinner = threading.Thread(target=spin)
        spinner.start()
        start = time.perf_counter()
        work()
        elapsed = time.perf_counter() - start
        stop.set()
        spinner.join()
        return count[0] / elapsed

    during = counted(lambda: dec.decode(blob))
    alone = counted(lambda: time.sleep(0.1))
    return during / alone


def stage_times(blobs, dec, config, repeats, roi=True):
    """Median per-image microseconds of plan, decode, region (crop-resize), write, total.

    ``roi``: decode through ``Augmenter.decode`` (DCT scale + region when the decoder has
    ``roi``), as the loader does; False: the whole image at ``decode_scale`` (the old path).
    """
    aug = Augmenter(config)
    out = np.empty(aug.out_shape, aug.dtype)
    sizes = [dec.size(b) for b in blobs]
    results = {k: [] for k in ("rng+plan", "decode", "crop-resize", "write", "total")}
    clock = time.thread_time_ns
    for epoch in range(repeats):
        acc = dict.fromkeys(results, 0.0)
        for index, (blob, (h, w)) in enumerate(zip(blobs, sizes)):
            t0 = clock()
            plan = aug.plan(h, w, aug.sample_rng(0, epoch, index))
            t1 = clock()
            if roi:
                img, window = aug.decode(dec, blob, plan)
            else:
                img = dec.decode(blob, scale=aug.decode_scale(plan, dec.scales),
                                 channels=config.channels)
                window = None
            t2 = clock()
            aug.apply(img, plan, out, window=window)  # crop, resize and write: one C call
            t3 = t4 = clock()
            for key, dt in zip(("rng+plan", "decode", "crop-resize", "write"),
                               (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                acc[key] += dt
            acc["total"] += t4 - t0
        for key in results:
            results[key].append(acc[key] / len(blobs) / 1e3)
    return {k: statistics.median(v) for k, v in results.items()}


PIPELINE_ROWS = (
    # (dtype, layout, dct_scaling, roi)
    ("uint8", "NCHW", True, True),
    ("uint8", "NCHW", True, False),
    ("uint8", "NCHW", False, True),
    ("float32", "NCHW", True, True),
    ("float32", "NCHW", True, False),
    ("float16", "NCHW", True, True),
    ("uint8", "NHWC", True, True),
    ("float32", "NHWC", True, True),
)


def bench_pipeline(blobs, dec, repeats, quick=False):
    full = median_rate(lambda: [dec.decode(b) for b in blobs], len(blobs), repeats)
    rows = []
    for label, base in (("train", TRAIN), ("val", VAL)):
        for dtype, layout, dct, roi in PIPELINE_ROWS[:5] if quick else PIPELINE_ROWS:
            extra = NORM if dtype != "uint8" else {}
            cfg = AugmentConfig(**base, **extra, dtype=dtype, layout=layout, dct_scaling=dct)
            st = stage_times(blobs, dec, cfg, repeats, roi=roi)
            rows.append((label, dtype, layout, dct, roi, st, 1e6 / st["total"] / full))
    return full, rows


def bench_roi_decode(blobs, dec, repeats):
    """Bare decode images/s: whole image vs the train/val crop only (region decode), 1 thread,
    baseline and progressive copies of the same images."""
    progressive = [cv2.imencode(".jpg", cv2.imdecode(np.frombuffer(b, np.uint8), 1),
                                [cv2.IMWRITE_JPEG_QUALITY, 90, cv2.IMWRITE_JPEG_PROGRESSIVE, 1])[1]
                   .tobytes() for b in blobs]
    rows = []
    for kind, data in (("baseline", blobs), ("progressive", progressive)):
        full = median_rate(lambda: [dec.decode(b) for b in data], len(data), repeats)
        rows.append((kind, "whole image", full, 1.0))
        for label, base in (("train", TRAIN), ("val", VAL)):
            aug = Augmenter(AugmentConfig(**base, dtype="uint8"))
            jobs = []
            for index, b in enumerate(data):
                plan = aug.plan(*dec.size(b), aug.sample_rng(0, 0, index))
                scale = aug.decode_scale(plan, dec.scales)
                jobs.append((b, aug.decode_box(plan, scale), scale))
            rate = median_rate(lambda: [dec.decode_region(b, box, scale=s) for b, box, s in jobs],
                               len(jobs), repeats)
            rows.append((kind, f"{label} crop region", rate, rate / full))
    return rows


def bench_rng(repeats):
    n = 20000

    def philox():
        for i in range(n):
            sample_rng(7, 1, i).random(64)

    def reused():
        for i in range(n):
            Augmenter.sample_rng(7, 1, i).random(64)

    def seedseq():
        for i in range(n):
            np.random.default_rng([7, 1, i]).random(64)

    return tuple(1e6 / median_rate(fn, n, repeats) for fn in (philox, reused, seedseq))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="/work/shared/data/photos")
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="fewer scales and configs")
    args = parser.parse_args()
    cv2.setNumThreads(1)
    blobs = load_jpegs(args.data, args.count)
    dec = get_decoder("auto")
    h, w = zip(*(dec.size(b) for b in blobs))
    print(f"# machine: {platform.machine()} {os.cpu_count()} cpus, {platform.processor() or ''} "
          f"python {platform.python_version()} numpy {np.__version__} opencv {cv2.__version__}")
    print(f"# data: {len(blobs)} JPEGs from {args.data}, mean {np.mean(w):.0f}x{np.mean(h):.0f}, "
          f"{np.mean([len(b) for b in blobs]) / 1024:.0f} KiB; median of {args.repeats} runs; "
          f"cv2.setNumThreads(1)")
    print(f"# auto decoder: {dec.name}")

    print("\n## decode images/s per backend and DCT scale (1 thread)")
    wanted = ({(1, 1), (7, 8), (3, 4), (5, 8), (1, 2), (1, 4)} if not args.quick
              else {(1, 1), (1, 2)})
    for name, scale, rate in bench_backends(blobs, args.repeats, wanted):
        print(f"{name:11s} scale {scale:4s} {rate:8.0f} img/s")

    print("\n## fast_dct / fast_upsample at full scale (1 thread)")
    for name, fdct, fup, rate in bench_flags(blobs, args.repeats):
        print(f"{name:11s} fast_dct={fdct!s:5s} fast_upsample={fup!s:5s} {rate:8.0f} img/s")

    print("\n## GIL release: 1 vs 2 threads, full scale")
    for name, one, two, gil in bench_threads(blobs, args.repeats):
        print(f"{name:11s} 1 thread {one:7.0f} img/s  2 threads {two:7.0f} img/s  x{two / one:.2f}"
              f"  Python-thread progress during a 3000x3000 decode: {gil:.2f}")

    philox, reused, seedseq = bench_rng(args.repeats)
    print(f"\n## per-sample RNG incl. 64 uniforms: Philox key/counter {philox:.1f} us, "
          f"re-keyed per-thread Philox (Augmenter.sample_rng) {reused:.1f} us, "
          f"default_rng(SeedSequence) {seedseq:.1f} us")

    if dec.roi:
        print(f"\n## region decode ({dec.name} + recpipe._batch), images/s, 1 thread")
        for kind, what, rate, ratio in bench_roi_decode(blobs, dec, args.repeats):
            print(f"{kind:11s} {what:18s} {rate:8.0f} img/s  x{ratio:.2f}")
    else:
        print("\n## region decode: recpipe._batch is not built, skipped")

    full, rows = bench_pipeline(blobs, dec, args.repeats, quick=args.quick)
    print(f"\n## per-stage us/image with {dec.name} (1 thread); bare full decode {full:.0f} img/s")
    print("config dtype   layout dct   roi    plan  decode crop-resize write  total  img/s  "
          "x full-decode")
    for label, dtype, layout, dct, roi, st, ratio in rows:
        print(f"{label:6s} {dtype:7s} {layout:6s} {dct!s:5s} {roi!s:5s} {st['rng+plan']:5.1f} "
              f"{st['decode']:7.0f} {st['crop-resize']:7.0f} {st['write']:7.0f} "
              f"{st['total']:6.0f} {1e6 / st['total']:6.0f}  {ratio:.2f}")


if __name__ == "__main__":
    main()
