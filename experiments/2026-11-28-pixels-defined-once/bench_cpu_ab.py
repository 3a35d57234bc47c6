"""Process CPU time per image of the native run (``RecordDecoder.fill``, one thread, runs of 64)
for each recipe, in source trees alternated ABBA (each point a fresh child process with
``PYTHONPATH`` = the tree): a per-image cost that a loaded machine moves much less than images/s.

    python experiments/2026-11-28-pixels-defined-once/bench_cpu_ab.py \\
        --trees before=/tmp/before,after=. \\
        --recipes faces,train,val,aug3,train_f32 --rounds 4 --faces FACES.rec --photos PHOTOS.rec

FACES.rec / PHOTOS.rec: ``experiments/2026-11-25-gil-probes/gil_table.py`` makes them (112 px
faces cut from the shared photos, and the photos themselves). Prints, per recipe, each tree's
median CPU us per image and its ratio to the first tree's (below 1: less CPU an image).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

NORM = dict(mean_r=123.68, mean_g=116.78, mean_b=103.94, std_r=58.4, std_g=57.12, std_b=57.38)
FACE_NORM = dict(mean_r=127.5, mean_g=127.5, mean_b=127.5, std_r=127.5, std_g=127.5, std_b=127.5)
TRAIN = dict(data_shape=(3, 224, 224), random_resized_crop=True, min_random_area=0.08,
             min_aspect_ratio=0.75, max_aspect_ratio=4 / 3, rand_mirror=True)
# name -> (data, loader keywords)
RECIPES = {
    "faces": ("faces", dict(data_shape=(3, 112, 112), rand_mirror=True, dtype="float32",
                            **FACE_NORM)),
    "train": ("photos", TRAIN),
    "val": ("photos", dict(data_shape=(3, 224, 224), resize=256)),
    "aug3": ("photos", dict(data_shape=(3, 224, 224), rand_crop=True, rand_mirror=True,
                            max_aspect_ratio=0.25, max_rotate_angle=10, max_shear_ratio=0.1,
                            random_h=36, random_s=50, random_l=50)),
    "train_f32": ("photos", dict(TRAIN, dtype="float32", **NORM)),
}
BATCH = 64


def child(recipe, rec, repeats):
    """CPU us per image of ``repeats`` epochs over (up to) the first records of ``rec``."""
    import numpy as np

    from recpipe.decode.augment import AugmentConfig, Augmenter
    from recpipe.decode.decoders import get_decoder
    from recpipe.decode.records import RecordDecoder
    from recpipe.io.reader import RecordReader

    augmenter = Augmenter(AugmentConfig.from_kwargs(**RECIPES[recipe][1]))
    with RecordReader(rec) as reader:
        records = RecordDecoder(reader, get_decoder("auto"), augmenter, seed=3)
        count = min(len(reader), 1000 if recipe == "faces" else 300) // BATCH * BATCH
        images = np.zeros((BATCH,) + augmenter.out_shape, augmenter.dtype)
        labels = np.zeros(BATCH, np.float32)
        slots = np.arange(BATCH)

        def epoch(number):
            for start in range(0, count, BATCH):
                positions = np.arange(start, start + BATCH)
                records.fill(images, labels, slots, positions, positions + number * 7919,
                             number)

        epoch(99)  # warm
        started = time.process_time()
        for number in range(repeats):
            epoch(number)
        return (time.process_time() - started) / (repeats * count) * 1e6


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", required=True, help="comma list of NAME=PATH source trees")
    parser.add_argument("--recipes", default=",".join(RECIPES))
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--faces", default="/tmp/fastpath-data/faces/faces.rec")
    parser.add_argument("--photos", default="/tmp/fastpath-data/photos.rec")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        recipe, rec, repeats = args.child
        print(json.dumps(child(recipe, rec, int(repeats))))
        return
    trees = dict(item.split("=", 1) for item in args.trees.split(","))
    recipes = args.recipes.split(",")
    data = {"faces": args.faces, "photos": args.photos}
    results = {}
    for number in range(args.rounds):
        order = list(trees.items())
        for recipe in recipes:
            for name, tree in (order if number % 2 == 0 else order[::-1]):  # ABBA
                repeats = 6 if recipe == "faces" else 2
                run = subprocess.run(
                    [sys.executable, os.path.abspath(__file__), "--trees", args.trees,
                     "--child", recipe, os.path.abspath(data[RECIPES[recipe][0]]),
                     str(repeats)],
                    env=dict(os.environ, PYTHONPATH=os.path.abspath(tree)), cwd=tree,
                    capture_output=True, text=True, timeout=1200)
                if run.returncode != 0:
                    raise SystemExit(f"{recipe} in {name}: {run.stderr[-800:]}")
                results.setdefault((recipe, name), []).append(
                    float(run.stdout.strip().splitlines()[-1]))
    first = next(iter(trees))
    print(f"CPU us per image, medians of {args.rounds} alternated rounds")
    print("| recipe | " + " | ".join(f"{name} us (ratio)" for name in trees) + " |")
    print("|---|" + "---:|" * len(trees))
    for recipe in recipes:
        base = statistics.median(results[(recipe, first)])
        cells = []
        for name in trees:
            median = statistics.median(results[(recipe, name)])
            cells.append(f"{median:.1f} ({median / base:.3f})")
        print(f"| {recipe} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
