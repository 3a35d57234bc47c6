"""The fused C resize (recpipe._resize) versus the OpenCV path, per sample, in one process.

For the first --count photos (decoded once, in RAM) and each configuration (train / val x uint8
/ float32 normalised, NCHW), times ``Augmenter.apply`` (resize, crop, mirror, layout,
normalisation; no decode) with the fused path and with the OpenCV path (``Kernels.none()``),
alternating them --repeats times, and reports the medians and their ratio. The train+jitter
row adds colour jitter (brightness/contrast/saturation 0.4), where the "OpenCV path" also runs
the jitter in NumPy instead of ``recpipe._colour``. For val it also
times the region decode each path asks for (the fused path decodes only the pixels its crop
samples; the OpenCV path starts its part where the resize grid meets a source pixel), and it
compares each path's pixels with MXNet's exact whole-image path (``dct_scaling=False``).

    python tools/bench_resize.py [--count 200] [--repeats 5]
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from recpipe.decode.augment import AugmentConfig, Augmenter, Kernels, sample_rng  # noqa: E402
from recpipe.decode.bench import TRAIN, VAL  # noqa: E402
from recpipe.decode.decoders import get_decoder  # noqa: E402

JITTER = dict(brightness=0.4, contrast=0.4, saturation=0.4)  # the usual ImageNet colour jitter
NORMALISE = dict(mean_r=123.68, mean_g=116.28, mean_b=103.53, std_r=58.395, std_g=57.12,
                 std_b=57.375)


def read_photos(root, count):
    paths = sorted(os.path.join(d, f) for d, _, files in os.walk(root) for f in files
                   if f.lower().endswith((".jpg", ".jpeg")))[:count]
    out = []
    for path in paths:
        with open(path, "rb") as f:
            out.append(f.read())
    return out


def augmenters(config, dtype):
    kwargs = dict(config, dtype=dtype, **(NORMALISE if dtype == "float32" else {}))
    fused = Augmenter(AugmentConfig(**kwargs))
    opencv = Augmenter(AugmentConfig(**kwargs), kernels=Kernels.none())
    exact = Augmenter(AugmentConfig(**dict(kwargs, dct_scaling=False)))
    return {"fused": fused, "opencv": opencv, "exact": exact}


def prepare(aug, dec, photos):
    """(pixels, plan, window) per photo, decoded the way ``aug`` asks."""
    return [aug.decode_planned(dec, data, sample_rng(0, 0, i)) for i, data in enumerate(photos)]


def time_apply(aug, samples):
    out = np.empty(aug.out_shape, aug.dtype)
    start = time.perf_counter()
    for img, plan, window in samples:
        aug.apply(img, plan, out, window=window)
    return (time.perf_counter() - start) / len(samples) * 1e6


def time_decode(aug, dec, photos):
    start = time.perf_counter()
    prepare(aug, dec, photos)
    return (time.perf_counter() - start) / len(photos) * 1e6


def outputs(aug, samples):
    result = []
    for img, plan, window in samples:
        out = np.empty(aug.out_shape, aug.dtype)
        aug.apply(img, plan, out, window=window)
        result.append(out.astype(np.float64))
    return np.stack(result)


def measure(name, config, dtype, dec, photos, repeats):
    augs = augmenters(config, dtype)
    samples = {k: prepare(a, dec, photos) for k, a in augs.items()}
    times = {"fused": [], "opencv": []}
    decode = {"fused": [], "opencv": []}
    for _ in range(repeats):
        for key in times:
            times[key].append(time_apply(augs[key], samples[key]))
            if name == "val":
                decode[key].append(time_decode(augs[key], dec, photos))
    exact = outputs(augs["exact"], samples["exact"])
    row = {"config": name, "dtype": dtype}
    for key in times:
        row[f"{key} apply us"] = statistics.median(times[key])
        if decode[key]:
            row[f"{key} decode us"] = statistics.median(decode[key])
        diff = np.abs(outputs(augs[key], samples[key]) - exact)
        gain = 1.0 if dtype == "uint8" else 1.0 / min(NORMALISE["std_r"], NORMALISE["std_g"],
                                                      NORMALISE["std_b"])
        row[f"{key} max diff"] = float(diff.max()) / gain
        row[f"{key} mean diff"] = float(diff.mean()) / gain
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--photos", default=os.path.join(ROOT, "..", "shared", "data", "photos"))
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    photos = read_photos(args.photos, args.count)
    dec = get_decoder("auto")
    print(f"{len(photos)} photos, decoder {dec.name}, {args.repeats} alternating repeats, "
          f"medians; diffs in pixel levels vs dct_scaling=False (MXNet's exact path)")
    print("| config | dtype | OpenCV path apply us | fused apply us | x faster | OpenCV path "
          "region decode us | fused region decode us | max / mean diff OpenCV path | max / mean "
          "diff fused |")
    print("|---|---|---:|---:|---:|---:|---:|---|---|")
    runs = [(name, config, dtype) for name, config in (("train", TRAIN), ("val", VAL))
            for dtype in ("uint8", "float32")]
    runs.append(("train+jitter", dict(TRAIN, **JITTER), "float32"))
    for name, config, dtype in runs:
        r = measure(name, config, dtype, dec, photos, args.repeats)
        dec_cv = f"{r['opencv decode us']:.0f}" if "opencv decode us" in r else "-"
        dec_fu = f"{r['fused decode us']:.0f}" if "fused decode us" in r else "-"
        print(f"| {name} | {dtype} | {r['opencv apply us']:.0f} | {r['fused apply us']:.0f} | "
              f"{r['opencv apply us'] / r['fused apply us']:.2f} | {dec_cv} | {dec_fu} | "
              f"{r['opencv max diff']:.0f} / {r['opencv mean diff']:.3f} | "
              f"{r['fused max diff']:.0f} / {r['fused mean diff']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
