"""Reference batches: the pixels and labels ImageLoader gave before the decode rebuild.

The same deterministic records and loader configurations are run by whatever ``recpipe`` is
importable, and every sample is reduced to a SHA-256 of its bytes (with shape and dtype) and its
labels. ``data/reference_batches.json`` holds what the tree before the rebuild (commit 4875140,
the last one before ``decode/`` changed for the small-images issue) produced::

    git worktree add /tmp/before 4875140
    (cd /tmp/before && python setup.py -q build_ext --inplace)
    PYTHONPATH=/tmp/before python tests/decode/reference_batches.py \\
        --write tests/decode/data/reference_batches.json

``test_reference_batches.py`` runs the same function on the current tree and compares.
The JPEGs are decoded by the system libjpeg-turbo (the turbojpeg backend then, the libjpeg one
now): the references hold for that library only.
"""

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np

import recpipe

NORM = dict(mean_r=123.68, mean_g=116.78, mean_b=103.94, std_r=58.4, std_g=57.12, std_b=57.38)
FACE_NORM = dict(mean_r=127.5, mean_g=127.5, mean_b=127.5, std_r=127.5, std_g=127.5,
                 std_b=127.5)
RRC = dict(random_resized_crop=True, min_random_area=0.08, max_random_area=1.0,
           min_aspect_ratio=0.75, max_aspect_ratio=4 / 3)

# (name, records file, loader keywords); each runs one shuffled epoch in batches of 4
CONFIGS = [
    ("faces", "faces", dict(data_shape=(3, 36, 36), rand_mirror=True, dtype="float32",
                            **FACE_NORM)),
    ("faces_uint8_nhwc", "faces", dict(data_shape=(3, 36, 36), mirror=True, layout="NHWC")),
    ("val", "photos", dict(data_shape=(3, 40, 40), resize=48)),
    ("val_float32", "photos", dict(data_shape=(3, 40, 40), resize=48, dtype="float32", **NORM)),
    ("train", "photos", dict(data_shape=(3, 40, 40), rand_mirror=True, **RRC)),
    ("train_float32", "photos", dict(data_shape=(3, 40, 40), rand_mirror=True,
                                     dtype="float32", **RRC, **NORM)),
    ("train_jitter", "photos", dict(data_shape=(3, 40, 40), rand_mirror=True, brightness=0.4,
                                    contrast=0.4, saturation=0.4, dtype="float32", **RRC,
                                    **NORM)),
    ("rand_crop_nhwc", "photos", dict(data_shape=(3, 44, 44), resize=56, rand_crop=True,
                                      rand_mirror=True, layout="NHWC")),
    ("saturation_uint8", "photos", dict(data_shape=(3, 40, 40), resize=48, saturation=0.5)),
    ("pca_lighting", "photos", dict(data_shape=(3, 40, 40), resize=48, pca_noise=0.1,
                                    dtype="float32")),
    ("hls", "photos", dict(data_shape=(3, 40, 40), resize=48, random_h=10, random_s=20,
                           random_l=15)),
    ("affine_pad", "photos", dict(data_shape=(3, 40, 40), resize=48, max_rotate_angle=10,
                                  max_shear_ratio=0.1, pad=2, fill_value=17)),
    ("contrast_illumination", "photos", dict(data_shape=(3, 40, 40), resize=48,
                                             max_random_contrast=0.2,
                                             max_random_illumination=10, dtype="float32")),
    ("area_interpolation", "photos", dict(data_shape=(3, 40, 40), resize=48, inter_method=3)),
    ("float16", "photos", dict(data_shape=(3, 40, 40), resize=48, dtype="float16", **NORM)),
    ("gray", "photos", dict(data_shape=(1, 32, 32), resize=40, rand_mirror=True)),
    ("random_size", "photos", dict(data_shape=(3, 40, 40), resize=64, rand_crop=True,
                                   min_crop_size=30, max_crop_size=60)),
    ("label_width_3", "multilabel", dict(data_shape=(3, 36, 36), rand_mirror=True,
                                         label_width=3)),
]


def _image(height, width, seed):
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    return cv2.GaussianBlur(img, (7, 7), 0)


def _jpeg(img, quality=90):
    return cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, quality])[1].tobytes()


def write_records(folder, transform=None):
    """The three record files the configurations read; returns ``{name: path}``.
    ``transform(jpeg) -> jpeg``: what to store instead of each image (same pixels expected)."""
    sizes = [(72, 96), (120, 90), (64, 64), (131, 77), (90, 140), (57, 61), (100, 100),
             (81, 120)]
    sets = {
        "faces": [(_jpeg(_image(36, 36, 100 + i), 95), float(i % 3)) for i in range(8)],
        "photos": [(_jpeg(_image(h, w, i)), float(i)) for i, (h, w) in enumerate(sizes)],
        "multilabel": [(_jpeg(_image(40, 44, 200 + i)), [float(i), i + 0.5, -1.0])
                       for i in range(8)],
    }
    paths = {}
    for name, items in sets.items():
        path = str(Path(folder) / f"{name}.rec")
        with recpipe.RecordWriter(path) as writer:
            for key, (image, label) in enumerate(items):
                image = image if transform is None else transform(image)
                writer.write(recpipe.pack(recpipe.IRHeader(0, label, key, 0), image), key)
        paths[name] = path
    return paths


def sample_digest(image):
    """``dtype shape sha256`` of one output sample."""
    array = np.ascontiguousarray(image)
    digest = hashlib.sha256(array.tobytes()).hexdigest()[:32]
    return f"{array.dtype} {'x'.join(map(str, array.shape))} {digest}"


def run_configs(folder, threads=1, names=None, transform=None):
    """``{config name: [{"image": digest, "label": [...]}, ...]}`` in epoch order (images
    stored through ``transform``: ``write_records``)."""
    paths = write_records(folder, transform)
    results = {}
    for name, records, kwargs in CONFIGS:
        if names is not None and name not in names:
            continue
        kwargs = dict(kwargs)
        data_shape = kwargs.pop("data_shape")
        samples = []
        with recpipe.ImageLoader(paths[records], 4, data_shape, threads=threads, shuffle=True,
                                 seed=11, **kwargs) as loader:
            for images, labels in loader:
                for image, label in zip(images, labels):
                    samples.append({"image": sample_digest(image),
                                    "label": np.atleast_1d(label).astype(float).tolist()})
        results[name] = samples
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", required=True, help="JSON file to write")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        results = run_configs(folder)
    document = {"made_by": str(Path(recpipe.__file__).parent),
                "opencv": cv2.__version__, "numpy": np.__version__, "configs": results}
    Path(args.write).parent.mkdir(parents=True, exist_ok=True)
    Path(args.write).write_text(json.dumps(document, indent=1) + "\n")
    print(f"{len(results)} configurations -> {args.write}", file=sys.stderr)


if __name__ == "__main__":
    main()
