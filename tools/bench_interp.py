"""recpipe/_interp.h's resizes (``recpipe._batch.interp``) against cv2.resize on one OpenCV
thread, on the same random 3-channel images, alternated and repeated; prints the median
milliseconds of each and their ratio (the pixels are equal: tests/decode/test_native_interp.py).

    python tools/bench_interp.py --rounds 5
"""

import argparse
import statistics
import time

import cv2
import numpy as np

from recpipe._optional import extension

CASES = [  # (source h, w), (output h, w), method: the recipes' typical sizes
    ((400, 400), (256, 256), 3, "area, val's resize step (1.56x)"),
    ((512, 683), (256, 341), 3, "area, ~2x (general path)"),
    ((512, 682), (256, 341), 3, "area, exactly 2x (fast path)"),
    ((300, 400), (224, 224), 4, "Lanczos-4, a crop to 224"),
    ((300, 400), (224, 224), 0, "nearest, a crop to 224"),
    ((150, 150), (224, 224), 3, "area upscaled (bilinear emulation)"),
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
    batch = extension("_batch")
    if batch is None:
        raise SystemExit("recpipe._batch is not built")
    cv2.setNumThreads(1)
    rng = np.random.default_rng(0)
    print(f"medians of {args.rounds} alternated rounds of {args.repeat} calls, ms per resize")
    print(f"{'case':40} {'_interp.h':>10} {'cv2 (1 thread)':>15} {'ratio':>6}")
    for (h, w), (out_h, out_w), method, name in CASES:
        img = cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (5, 5), 0)
        out = np.zeros((out_h, out_w, 3), np.uint8)
        ours, theirs = [], []
        for _ in range(args.rounds):
            ours.append(_time(lambda: batch.interp((h, w, 3), img, (out_h, out_w), out,
                                                   out_w / w, out_h / h, method), args.repeat))
            theirs.append(_time(lambda: cv2.resize(img, (out_w, out_h), interpolation=method),
                                args.repeat))
        assert np.array_equal(out, cv2.resize(img, (out_w, out_h), interpolation=method))
        a, b = statistics.median(ours) * 1e3, statistics.median(theirs) * 1e3
        print(f"{name:40} {a:10.2f} {b:15.2f} {a / b:6.2f}")


if __name__ == "__main__":
    main()
