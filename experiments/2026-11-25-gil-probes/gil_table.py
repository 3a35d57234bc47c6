"""GIL-held time per image for every ImageRecordIter recipe users run, as one table.

Each recipe runs in a fresh child process (``PYTHONPATH`` = the tree) that builds a shuffled
``ImageLoader`` (batch 128, ``--threads`` decode threads), warms it up, then consumes batches
for ``--seconds`` while ``gil_probe.py``'s measures run:

- ``library us``: the loader's own counter (worker CPU outside GIL-releasing C calls) per image;
- ``probe us``: a pure-Python thread that always wants the GIL; its wall time that is neither
  its own CPU nor run-queue delay is time some other thread held the GIL (an upper bound: it
  includes the GIL hand-off latency), per delivered image;
- ``consumer us``: CPU of the consuming thread per image;
- ``native``: whether the recipe's runs go to ``recpipe._batch`` (``RecordDecoder.native``).

Recipes (``RECIPES``): faces (InsightFace), train (random-resized crop), val (resize + centre
crop), MXNet's ``example/image-classification`` augmentation level 3, CIFAR's pad 4 (on 32 px
images), PCA lighting + colour jitter (GluonCV's classic), float16, gray, HLS, MXNet's
contrast/illumination, and the non-bilinear ``inter_method`` values. Data: ``--photos REC``
(ImageNet-like photos), ``--faces REC`` (112 px crops) and ``--cifar REC`` (32 px images; made
from the photos when the file does not exist).

    python experiments/2026-11-25-gil-probes/gil_table.py --photos /tmp/photos.rec \\
        --faces /tmp/faces.rec \\
        --cifar /tmp/cifar.rec --threads 1 --rounds 2 --seconds 3 [--trees before=A,after=B]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))  # experiments/<note>/ -> the repository
sys.path.insert(0, HERE)
if "PYTHONPATH" not in os.environ:  # the parent: this tree's recpipe (children get theirs)
    sys.path.insert(1, REPO)

NORM = dict(mean_r=123.68, mean_g=116.78, mean_b=103.94, std_r=58.4, std_g=57.12, std_b=57.38)
FACE_NORM = dict(mean_r=127.5, mean_g=127.5, mean_b=127.5, std_r=127.5, std_g=127.5,
                 std_b=127.5)
TRAIN = dict(data_shape=(3, 224, 224), random_resized_crop=True, min_random_area=0.08,
             max_random_area=1.0, min_aspect_ratio=3 / 4, max_aspect_ratio=4 / 3,
             rand_mirror=True)
VAL = dict(data_shape=(3, 224, 224), resize=256)
# MXNet's example/image-classification/common/data.py, --aug-level 3 (ImageRecordIter names)
AUG_LEVEL_3 = dict(data_shape=(3, 224, 224), rand_crop=True, rand_mirror=True,
                   max_aspect_ratio=0.25, max_rotate_angle=10, max_shear_ratio=0.1,
                   random_h=36, random_s=50, random_l=50)

# name -> (data, loader keywords)
RECIPES = {
    "faces": ("faces", dict(data_shape=(3, 112, 112), rand_mirror=True, dtype="float32",
                            **FACE_NORM)),
    "train": ("photos", dict(TRAIN, dtype="uint8")),
    "val": ("photos", dict(VAL, dtype="uint8")),
    "aug level 3": ("photos", dict(AUG_LEVEL_3, dtype="uint8")),
    "aug level 3 without HLS": ("photos", dict(
        {k: v for k, v in AUG_LEVEL_3.items() if not k.startswith("random_")}, dtype="uint8")),
    "CIFAR pad 4": ("cifar", dict(data_shape=(3, 28, 28), pad=4, rand_crop=True,
                                  rand_mirror=True, dtype="float32", **NORM)),
    "PCA + colour jitter": ("photos", dict(TRAIN, brightness=0.4, contrast=0.4, saturation=0.4,
                                           pca_noise=0.1, dtype="float32", **NORM)),
    "float16": ("photos", dict(TRAIN, dtype="float16", **NORM)),
    "gray": ("photos", dict(data_shape=(1, 224, 224), resize=256, dtype="uint8")),
    "HLS": ("photos", dict(VAL, random_h=36, random_s=50, random_l=50, dtype="uint8")),
    "contrast/illumination": ("photos", dict(VAL, max_random_contrast=0.3,
                                             max_random_illumination=20, dtype="float32",
                                             **NORM)),
    "area (inter_method=3)": ("photos", dict(VAL, inter_method=3, dtype="uint8")),
    "cubic (inter_method=2)": ("photos", dict(VAL, inter_method=2, dtype="uint8")),
    "random (inter_method=10)": ("photos", dict(TRAIN, inter_method=10, dtype="uint8")),
}


def make_cifar(rec, photos_rec, count=5000):
    """``rec``: ``count`` 32x32 JPEGs (CIFAR-sized) cut from the photos of ``photos_rec``."""
    import cv2
    import numpy as np

    import recpipe

    rng = np.random.default_rng(0)
    with recpipe.RecordReader(photos_rec) as reader, recpipe.RecordWriter(rec) as writer:
        for i in range(count):
            header, jpeg = recpipe.unpack(reader[i % len(reader)])
            img = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
            h, w = img.shape[:2]
            side = int(min(h, w) * rng.uniform(0.5, 1.0))
            y, x = int(rng.integers(0, h - side + 1)), int(rng.integers(0, w - side + 1))
            small = cv2.resize(img[y:y + side, x:x + side], (32, 32),
                               interpolation=cv2.INTER_AREA)
            data = cv2.imencode(".jpg", small, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(header.label), i, 0), data))


def make_photos(rec, folder, count=1000):
    """``rec``: the JPEGs of ``folder`` (the shared photos, one folder a class), labelled by
    class."""
    import recpipe

    classes = sorted(os.listdir(folder))
    with recpipe.RecordWriter(rec) as writer:
        index = 0
        for label, name in enumerate(classes):
            for file in sorted(os.listdir(os.path.join(folder, name))):
                with open(os.path.join(folder, name, file), "rb") as f:
                    data = f.read()
                writer.write(recpipe.pack(recpipe.IRHeader(0, float(label), index, 0), data))
                index += 1
                if index >= count:
                    return


def make_faces(rec, photos_rec, count=4000):
    """``rec``: ``count`` 112x112 JPEGs (face-sized) cut from the photos of ``photos_rec``."""
    import cv2
    import numpy as np

    import recpipe

    rng = np.random.default_rng(1)
    with recpipe.RecordReader(photos_rec) as reader, recpipe.RecordWriter(rec) as writer:
        for i in range(count):
            header, jpeg = recpipe.unpack(reader[i % len(reader)])
            img = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
            h, w = img.shape[:2]
            side = int(min(h, w) * rng.uniform(0.4, 0.9))
            y, x = int(rng.integers(0, h - side + 1)), int(rng.integers(0, w - side + 1))
            face = cv2.resize(img[y:y + side, x:x + side], (112, 112),
                              interpolation=cv2.INTER_AREA)
            data = cv2.imencode(".jpg", face, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(header.label), i, 0), data))


def make_mixed(rec, source_rec, fraction=0.05, seed=5):
    """``rec``: ``source_rec``'s records with ``fraction`` of them replaced, half by the same
    image as a PNG and half by a tiny JPEG (a quarter of the shorter side or less: smaller than
    most crops, so it is upscaled), the images recpipe's native runs used to leave to Python."""
    import cv2
    import numpy as np

    import recpipe

    rng = np.random.default_rng(seed)
    with recpipe.RecordReader(source_rec) as reader, recpipe.RecordWriter(rec) as writer:
        for i in range(len(reader)):
            header, data = recpipe.unpack(reader[i])
            if rng.random() < fraction:
                img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
                if rng.random() < 0.5:
                    data = cv2.imencode(".png", img)[1].tobytes()
                else:
                    side = max(8, min(img.shape[:2]) // 4)
                    small = cv2.resize(img, (side, side), interpolation=cv2.INTER_AREA)
                    data = cv2.imencode(".jpg", small, [cv2.IMWRITE_JPEG_QUALITY, 90])[1]
                    data = data.tobytes()
            writer.write(recpipe.pack(header, data))


def child(args):
    """One recipe in this process (``gil_probe.measure``); prints a JSON line."""
    from gil_probe import measure

    from recpipe.decode.loader import ImageLoader

    settings = dict(RECIPES[args.recipe][1])
    shape = settings.pop("data_shape")
    with ImageLoader(args.rec, 128, shape, threads=args.child_threads, shuffle=True,
                     **settings) as loader:
        result = measure(loader, args.seconds)
        result["native"] = bool(loader.records.native)
    print(json.dumps(result), flush=True)


def point(tree, args, recipe, rec):
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    command = [sys.executable, os.path.abspath(__file__), "--child-recipe", recipe,
               "--child-rec", rec, "--child-threads", str(args.threads),
               "--seconds", str(args.seconds)]
    out = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True,
                         timeout=args.seconds * 10 + 120)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr else "failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photos", default="/tmp/fastpath-data/photos.rec")
    parser.add_argument("--faces", default="/tmp/fastpath-data/faces/faces.rec")
    parser.add_argument("--cifar", default="/tmp/fastpath-data/cifar.rec")
    parser.add_argument("--recipes", default=",".join(RECIPES),
                        help="comma list of recipe names (default: all)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--trees", default=f"this={REPO}",
                        help="comma list of NAME=PATH source trees (alternated)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--shared-photos", default="/work/shared/data/photos",
                        help="where the photos and faces files are made from when missing")
    parser.add_argument("--mixed", type=float, default=0.0,
                        help="replace this fraction of every file's records by PNGs and tiny "
                             "JPEGs (half each; files made once beside the originals)")
    parser.add_argument("--child-recipe", help=argparse.SUPPRESS)
    parser.add_argument("--child-rec", help=argparse.SUPPRESS)
    parser.add_argument("--child-threads", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_recipe:
        args.recipe, args.rec = args.child_recipe, args.child_rec
        return child(args)
    recipes = args.recipes.split(",")
    unknown = [r for r in recipes if r not in RECIPES]
    if unknown:
        parser.error(f"unknown recipes {unknown}: choose from {list(RECIPES)}")
    data = {"photos": args.photos, "faces": args.faces, "cifar": args.cifar}
    if not os.path.exists(args.photos):
        os.makedirs(os.path.dirname(os.path.abspath(args.photos)), exist_ok=True)
        make_photos(args.photos, args.shared_photos)
    if not os.path.exists(args.faces) and any(RECIPES[r][0] == "faces" for r in recipes):
        os.makedirs(os.path.dirname(os.path.abspath(args.faces)), exist_ok=True)
        make_faces(args.faces, args.photos)
    if not os.path.exists(args.cifar) and any(RECIPES[r][0] == "cifar" for r in recipes):
        make_cifar(args.cifar, args.photos)
    if args.mixed:
        for kind, path in list(data.items()):
            mixed = f"{path[:-4]}.mixed{args.mixed:g}.rec"
            if os.path.exists(path) and not os.path.exists(mixed):
                make_mixed(mixed, path, args.mixed)
            data[kind] = mixed
    trees = dict(item.split("=", 1) for item in args.trees.split(","))
    results = {}
    for _ in range(args.rounds):
        for recipe in recipes:
            for name, tree in trees.items():  # alternated
                rec = data[RECIPES[recipe][0]]
                results.setdefault((recipe, name), []).append(point(tree, args, recipe, rec))
    rows = []
    for (recipe, name), runs in results.items():
        good = [r for r in runs if "error" not in r]
        row = {"recipe": recipe, "tree": name, "rounds": len(good)}
        if not good:
            row["error"] = runs[0]["error"]
        for key in ("images_per_s", "library_gil_us", "probe_gil_us", "consumer_cpu_us"):
            if good:
                row[key] = statistics.median(r[key] for r in good)
        row["native"] = all(r.get("native") for r in good) if good else None
        rows.append(row)
    if args.json:
        print(json.dumps(rows))
        return
    print(f"threads={args.threads}, medians of {args.rounds} alternated rounds, "
          f"{args.seconds} s each\n")
    print("| recipe | tree | native | images/s | library us | probe us | consumer us |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        if "error" in row:
            print(f"| {row['recipe']} | {row['tree']} | error: {row['error']} | | | | |")
            continue
        print(f"| {row['recipe']} | {row['tree']} | {'yes' if row['native'] else 'no'} | "
              f"{row['images_per_s']:.0f} | {row['library_gil_us']:.1f} | "
              f"{row['probe_gil_us']:.1f} | {row['consumer_cpu_us']:.1f} |")


if __name__ == "__main__":
    main()
