"""csrc/kernels/interp.h's resizes (``recpipe._kernels.interp``, with its SIMD loops and its scalar
ones alone) against cv2.resize on one OpenCV thread (with Intel IPP as the wheel has it, and
with IPP off: for bicubic that is the Python path's resize), on the same random 3-channel
images, alternated and repeated; prints the median milliseconds of each and the ratio of
csrc/kernels/interp.h to cv2's default (the pixels equal cv2's with IPP off:
tests/decode/test_native_interp.py).

    python tools/bench_interp.py --rounds 5
"""

import argparse
import statistics
import time

import cv2
import numpy as np

from recpipe._optional import extension
from recpipe.image.opencv import ipp_off

CASES = [  # (source h, w), (output h, w), method: the recipes' typical sizes
    ((400, 400), (256, 256), 3, "area, val's resize step (1.56x)"),
    ((512, 683), (256, 341), 3, "area, ~2x (general path)"),
    ((512, 682), (256, 341), 3, "area, exactly 2x (fast path)"),
    ((300, 400), (224, 224), 4, "Lanczos-4, a crop to 224"),
    ((300, 400), (224, 224), 0, "nearest, a crop to 224"),
    ((150, 150), (224, 224), 3, "area upscaled (bilinear emulation)"),
    ((375, 500), (256, 341), 2, "bicubic, val's resize step"),
    ((300, 400), (256, 341), 2, "bicubic, down 1.17x"),
    ((200, 150), (341, 256), 2, "bicubic, up 1.7x (9's pick)"),
]


def _time(call, repeat):
    start = time.perf_counter()
    for _ in range(repeat):
        call()
    return (time.perf_counter() - start) / repeat


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args(argv)
    batch = extension("_kernels")
    if batch is None:
        raise SystemExit("recpipe._kernels is not built")
    cv2.setNumThreads(1)
    rng = np.random.default_rng(0)
    print(f"medians of {args.rounds} alternated rounds of {args.repeat} calls, ms per resize")
    print(f"{'case':34} {'csrc/kernels/interp.h':>10} {'scalar':>7} {'cv2 (1 thread)':>15} "
          f"{'cv2 IPP off':>12} {'ratio':>6}")
    for (h, w), (out_h, out_w), method, name in CASES:
        img = cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (5, 5), 0)
        out = np.zeros((out_h, out_w, 3), np.uint8)
        times = {"ours": [], "scalar": [], "cv2": [], "off": []}

        def ours(simd=True):
            return batch.interp((h, w, 3), img, (out_h, out_w), out, out_w / w, out_h / h,
                                method, simd)

        def without_ipp():
            with ipp_off():
                return cv2.resize(img, (out_w, out_h), interpolation=method)

        for _ in range(args.rounds):
            times["ours"].append(_time(ours, args.repeat))
            times["scalar"].append(_time(lambda: ours(False), args.repeat))
            times["cv2"].append(_time(lambda: cv2.resize(img, (out_w, out_h),
                                                         interpolation=method), args.repeat))
            times["off"].append(_time(without_ipp, args.repeat))
        ours()
        assert np.array_equal(out, without_ipp())
        a, s, b, o = (statistics.median(times[k]) * 1e3 for k in ("ours", "scalar", "cv2", "off"))
        print(f"{name:34} {a:10.2f} {s:7.2f} {b:15.2f} {o:12.2f} {a / b:6.2f}")


if __name__ == "__main__":
    main()
