"""What ``integrity="strict"`` costs against the default ``"auto"``, alternated in one run.

Strict region decodes entropy-decode the rest of each scan below the region (Huffman decoding,
no IDCT), so the cost depends on how much of the image a sample leaves undecoded:

- ``photos-val``: 300+ photos of ``../shared/data/photos`` packed pass-through, ``resize=256``,
  centre crop 224 (the crop stops ~6% above the bottom of the decoded image);
- ``photos-train``: the same pack, ``random_resized_crop`` + ``rand_mirror`` (a random window);
- ``faces``: 112x112 crops of the photos into 112x112 slots (``tools/bench_faces.py``'s): the
  whole image is decoded, strict has nothing more to read.

Each round reads one epoch per mode (order alternated between rounds) on one decode thread,
and reports the CPU seconds per image of the process (less sensitive than wall time to other
jobs on a shared machine) and the wall rate; the ratio strict/auto is taken per round.

    python tools/bench_integrity.py --rounds 5 [--json]

``--bomb`` times instead one decode of issue 20's scan bomb (a valid 9000x9000 progressive JPEG
of 2080 scans, built by ``tests/decode/jpeg_samples.scan_bomb``) per backend, with the default
``max_scans`` and without a limit.
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

CONFIGS = {
    "photos-val": ("photos", dict(data_shape=(3, 224, 224), resize=256)),
    "photos-train": ("photos", dict(data_shape=(3, 224, 224), random_resized_crop=True,
                                    rand_mirror=True)),
    "faces": ("faces", dict(data_shape=(3, 112, 112), rand_mirror=True)),
}


def make_photos(folder, count):
    from integrity_experiment import PHOTOS, pack

    prefix = os.path.join(folder, "clean")
    if not os.path.exists(prefix + ".rec"):
        pack(PHOTOS, count, folder)
    return prefix + ".rec"


def epoch_cost(rec, mode, augment):
    """(CPU seconds per image, images per wall second) of one epoch on one thread."""
    from recpipe import ImageLoader

    with ImageLoader(rec, 50, threads=1, integrity=mode, dtype="uint8", seed=1,
                     **augment) as loader:
        next(iter(loader))  # warm: threads, buffers, file cache
        count, cpu, wall = 0, time.process_time(), time.perf_counter()
        for images, _ in loader:
            count += len(images)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu / count, count / wall


def bomb_times(unlimited):
    """{backend: {"limited": s, "unlimited": s}} for one region decode of the scan bomb."""
    from recpipe.decode.decoders import available_decoders, get_decoder
    from recpipe.errors import DecodeError
    from tests.decode.jpeg_samples import scan_bomb

    bomb = scan_bomb(9000, 9000, 2080, components=3)
    out = {"bytes": len(bomb)}
    for name in available_decoders():
        times = {}
        for label, limit in (("limited", "default"), ("unlimited", None)):
            if label == "unlimited" and name not in unlimited:
                continue
            decoder = get_decoder(name) if limit == "default" else get_decoder(name, max_scans=None)
            start = time.perf_counter()
            try:
                decoder.decode_region(bomb, (0, 0, 224, 224))
                times[label + "_error"] = None
            except DecodeError as exc:
                times[label + "_error"] = str(exc)
            times[label] = time.perf_counter() - start
        out[name] = times
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--photos", type=int, default=500)
    parser.add_argument("--faces", type=int, default=3000)
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--dir", default="/tmp/recpipe-bench-integrity")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--bomb", action="store_true", help="time the scan bomb instead")
    parser.add_argument("--unlimited", nargs="*", default=["libjpeg"],
                        help="backends to time without a scan limit too (slow)")
    args = parser.parse_args()
    if args.bomb:
        print(json.dumps(bomb_times(args.unlimited), indent=2))
        return
    os.makedirs(args.dir, exist_ok=True)
    import bench_faces
    from integrity_experiment import PHOTOS

    bench_faces.PHOTOS = PHOTOS  # its default is relative to /work/main's layout
    make_faces = bench_faces.make_faces
    recs = {"photos": lambda: make_photos(os.path.join(args.dir, "photos"), args.photos),
            "faces": lambda: make_faces(os.path.join(args.dir, "faces"), args.faces)}
    results = {}
    for name in args.configs:
        source, augment = CONFIGS[name]
        rec = recs[source]()
        ratios, cost = [], {"auto": [], "strict": []}
        for r in range(args.rounds):
            order = ("auto", "strict") if r % 2 == 0 else ("strict", "auto")
            got = {mode: epoch_cost(rec, mode, augment) for mode in order}
            for mode in order:
                cost[mode].append(got[mode])
            ratios.append(got["strict"][0] / got["auto"][0])
        results[name] = {
            "cpu_us_per_image": {m: statistics.median(c[0] for c in v) * 1e6
                                 for m, v in cost.items()},
            "images_per_s": {m: statistics.median(c[1] for c in v) for m, v in cost.items()},
            "strict_over_auto_cpu": statistics.median(ratios),
            "ratios": ratios}
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'config':13} {'auto us/img':>11} {'strict us/img':>13} {'strict/auto':>11} "
          f"{'auto img/s':>10} {'strict img/s':>12}")
    for name, r in results.items():
        print(f"{name:13} {r['cpu_us_per_image']['auto']:>11.0f} "
              f"{r['cpu_us_per_image']['strict']:>13.0f} {r['strict_over_auto_cpu']:>11.3f} "
              f"{r['images_per_s']['auto']:>10.0f} {r['images_per_s']['strict']:>12.0f}")


if __name__ == "__main__":
    main()
