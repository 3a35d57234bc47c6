"""Small training sets for the adapter tests: real photos when the project's are at hand, else
synthetic ones whose class shows in their colour (so a few epochs of a tiny CNN can learn it)."""

import os
from pathlib import Path

import cv2
import numpy as np

import recpipe
from recpipe.io import IRHeader, pack

REPO_ROOT = Path(__file__).resolve().parents[1]


def photos_dir():
    """$RECPIPE_PHOTOS (only it, when set), else shared/data/photos beside the repository."""
    configured = os.environ.get("RECPIPE_PHOTOS")
    candidates = [Path(configured)] if configured else [
        REPO_ROOT.parent / "shared" / "data" / "photos", Path("/work/shared/data/photos")]
    return next((c for c in candidates if c.is_dir()), None)


def _synthetic_jpegs(classes, per_class, seed=0):
    rng = np.random.default_rng(seed)
    for label in range(classes):
        tint = np.array([(label * 97) % 256, (label * 57 + 80) % 256, (200 - label * 45) % 256])
        for _ in range(per_class):
            h, w = rng.integers(90, 140, 2)
            noise = rng.normal(0, 40, (h // 8 + 1, w // 8 + 1, 3))
            img = cv2.resize(noise, (int(w), int(h))) + tint * 0.6 + 50
            ok, buf = cv2.imencode(".jpg", np.clip(img, 0, 255).astype(np.uint8))
            assert ok
            yield label, buf.tobytes()


def _photo_jpegs(source, classes, per_class):
    names = sorted(p.name for p in source.iterdir() if p.is_dir())[:classes]
    for label, name in enumerate(names):
        for path in sorted((source / name).glob("*.jpg"))[:per_class]:
            yield label, path.read_bytes()


def pack_training_set(rec_path, classes, per_class):
    """Write ``rec_path`` (+ .idx) with ``per_class`` images of each of ``classes`` classes,
    ids ``0..N-1`` and labels in class order; return the number of images."""
    source = photos_dir()
    items = (_photo_jpegs(source, classes, per_class) if source is not None
             else _synthetic_jpegs(classes, per_class))
    count = 0
    with recpipe.RecordWriter(str(rec_path)) as writer:
        for label, jpeg in items:
            writer.write(pack(IRHeader(0, float(label), count, 0), jpeg))
            count += 1
    return count
