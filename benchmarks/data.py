"""The data sets the suites share, made once under the work folder and reused while up to date.

- ``photos()``: the ImageNet-like photos (``RECPIPE_PHOTOS``, else ``shared/data/photos`` beside
  the repository, else ``/work/shared/data/photos``): class folders of ~440x440 JPEGs;
- ``photos_rec``: the first ``count`` photos packed pass-through into a ``.rec`` + ``.idx``,
  labels by sorted class folder, records in sorted order;
- ``faces_rec``: ``count`` 112x112 face-like crops of the photos (a square around a jittered
  centre, resized, JPEG quality 95), InsightFace's shape;
- ``index_files``: a face-scale ``.idx`` of N records (7 KiB apart, keys 0..N-1) beside a
  sparse ``.rec`` whose first 256 records are real;
- ``jpeg_blobs``: the photos' bytes, in memory.
"""

import glob
import os
import shutil
from pathlib import Path
from typing import List, Optional

import numpy as np

from .harness import REPO

__all__ = ["photos", "photo_paths", "photos_tree", "photos_rec", "faces_rec", "index_files",
           "jpeg_blobs", "describe_rec", "SPACING", "REAL_RECORDS"]

SPACING = 7168
REAL_RECORDS = 256


def photos() -> str:
    """The photos folder (class folders of JPEGs); SystemExit naming where it looked."""
    candidates = [os.environ.get("RECPIPE_PHOTOS"), str(REPO.parent / "shared" / "data" / "photos"),
                  "/work/shared/data/photos"]
    for candidate in candidates:
        if candidate and os.path.isdir(candidate):
            return candidate
    raise SystemExit(f"no photos folder: set RECPIPE_PHOTOS (looked in "
                     f"{[c for c in candidates if c]})")


def photo_paths(folder: Optional[str] = None, count: Optional[int] = None) -> List[str]:
    folder = folder or photos()
    paths = sorted(p for p in glob.glob(os.path.join(folder, "*", "*"))
                   if p.lower().endswith((".jpg", ".jpeg")))
    if not paths:
        raise SystemExit(f"no JPEGs under {folder}/<class>/")
    return paths if count is None else paths[:count]


def photos_tree(work: Path, count: Optional[int] = None) -> str:
    """The photos folder, or (``count`` fewer than it holds) a class-folder tree of its first
    ``count`` photos (what ``photos_rec(work, count)`` packs), hard links or copies."""
    paths = photo_paths()
    if count is None or count >= len(paths):
        return photos()
    folder = Path(work) / f"photos-{count}"
    if not folder.exists():
        tmp = Path(str(folder) + ".tmp")
        for path in paths[:count]:
            target = tmp / os.path.basename(os.path.dirname(path))
            target.mkdir(parents=True, exist_ok=True)
            try:  # a link would point outside the tree (pack refuses that): the bytes
                os.link(path, target / os.path.basename(path))
            except OSError:
                shutil.copyfile(path, target / os.path.basename(path))
        os.replace(tmp, folder)
    return str(folder)


def jpeg_blobs(count: Optional[int] = None, folder: Optional[str] = None) -> List[bytes]:
    out = []
    for path in photo_paths(folder, count):
        with open(path, "rb") as f:
            out.append(f.read())
    return out


def _fresh(path: str, sources: List[str]) -> bool:
    if not os.path.exists(path):
        return False
    newest = max((os.path.getmtime(s) for s in sources), default=0)
    return os.path.getmtime(path) >= newest


def photos_rec(work: Path, count: Optional[int] = None, folder: Optional[str] = None) -> str:
    """``work/photos-<count>.rec`` (+ ``.idx``): the photos packed pass-through."""
    import recpipe

    paths = photo_paths(folder, count)
    classes = sorted({os.path.basename(os.path.dirname(p)) for p in paths})
    label_of = {name: float(i) for i, name in enumerate(classes)}
    rec = os.path.join(str(work), f"photos-{len(paths)}.rec")
    if _fresh(rec, paths) and os.path.exists(rec[:-4] + ".idx"):
        return rec
    os.makedirs(str(work), exist_ok=True)
    with recpipe.RecordWriter(rec, rec[:-4] + ".idx") as writer:
        for record_id, path in enumerate(paths):
            header = recpipe.IRHeader(0, label_of[os.path.basename(os.path.dirname(path))],
                                      record_id, 0)
            with open(path, "rb") as f:
                writer.write(recpipe.pack(header, f.read()), key=record_id)
    return rec


def faces_rec(work: Path, count: int, folder: Optional[str] = None) -> str:
    """``work/faces-<count>.rec``: ``count`` 112x112 crops of the photos, labelled by class."""
    import cv2

    import recpipe

    rec = os.path.join(str(work), f"faces-{count}.rec")
    if os.path.exists(rec) and os.path.exists(rec[:-4] + ".idx"):
        return rec
    os.makedirs(str(work), exist_ok=True)
    paths = photo_paths(folder)
    classes = sorted({os.path.basename(os.path.dirname(p)) for p in paths})
    rng = np.random.default_rng(0)
    with recpipe.RecordWriter(rec, rec[:-4] + ".idx") as writer:  # published whole
        for i in range(count):
            path = paths[i % len(paths)]
            img = cv2.imread(path)
            h, w = img.shape[:2]
            side = int(min(h, w) * rng.uniform(0.5, 0.8))
            y = int(rng.integers(0, h - side + 1))
            x = int(rng.integers(0, w - side + 1))
            face = cv2.resize(img[y:y + side, x:x + side], (112, 112),
                              interpolation=cv2.INTER_AREA)
            jpeg = cv2.imencode(".jpg", face, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()
            label = float(classes.index(os.path.basename(os.path.dirname(path))))
            writer.write(recpipe.pack(recpipe.IRHeader(0, label, i, 0), jpeg), key=i)
    return rec


def index_files(work: Path, records: int) -> str:
    """``work/index-<records>/faces.rec`` (sparse) + ``faces.idx``: a face-scale index."""
    import cv2

    import recpipe
    from recpipe.io.format import frame

    folder = os.path.join(str(work), f"index-{records}")
    rec, idx = os.path.join(folder, "faces.rec"), os.path.join(folder, "faces.idx")
    if os.path.exists(idx) and os.path.exists(rec) and os.path.getsize(rec) == records * SPACING:
        return rec
    os.makedirs(folder, exist_ok=True)
    with open(idx + ".tmp", "w") as f:
        for start in range(0, records, 1 << 20):
            keys = range(start, min(records, start + (1 << 20)))
            f.write("".join(f"{k}\t{k * SPACING}\n" for k in keys))
    jpeg = cv2.imencode(".jpg", np.full((112, 112, 3), 128, np.uint8))[1].tobytes()
    with open(rec, "wb") as f:
        f.truncate(records * SPACING)
        for i in range(min(REAL_RECORDS, records)):
            payload = recpipe.pack(recpipe.IRHeader(0, float(i % 100), i, 0), jpeg)
            framed = frame(payload + b"\0" * (SPACING - 8 - len(payload)))
            assert len(framed) == SPACING  # records back to back, as in a real file
            f.seek(i * SPACING)
            f.write(framed)
    os.replace(idx + ".tmp", idx)
    return rec


def describe_rec(rec: str, what: str) -> dict:
    """A dataset record: what it is, the file's name, records and size."""
    import recpipe

    with recpipe.RecordReader(rec) as reader:
        records = len(reader)
    return {"description": f"{what}: {records} records, {os.path.getsize(rec) / 1e6:.1f} MB",
            "file": os.path.basename(rec), "records": records,
            "bytes": os.path.getsize(rec)}
