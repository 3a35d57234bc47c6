"""The small files the documentation's examples name, made in a working folder:

- ``photos/<class>/*.jpg``: a folder of class subfolders (4 classes of 24 photo-like JPEGs,
  160x120 to 240x180), what ``recpipe pack`` takes;
- ``cat.jpg``: one JPEG;
- ``train.rec`` + ``.idx``, ``.sums``, ``.labels.json``, ``.sources.jsonl``: ``photos`` packed
  by ``recpipe pack`` (``pack_dataset``), as the getting-started page makes it;
- ``faces_emore/``: InsightFace's layout, as its ``faces_emore`` download has it
  (``train.rec`` + ``train.idx`` with the header record, 8 identities of 12 112x112 faces and
  the identity records; ``property``), without the ``.sums`` sidecar that recpipe's writers add.
"""

from pathlib import Path

import cv2
import numpy as np

CLASSES = ("bird", "cat", "dog", "fox")
PER_CLASS = 24
IDENTITIES, PER_IDENTITY = 8, 12


def _photo(rng, label, height, width):
    tint = np.array([(label * 97) % 256, (label * 57 + 80) % 256, (200 - label * 45) % 256])
    noise = rng.normal(0, 40, (height // 8 + 1, width // 8 + 1, 3))
    image = cv2.resize(noise, (width, height)) + tint * 0.6 + 50
    ok, data = cv2.imencode(".jpg", np.clip(image, 0, 255).astype(np.uint8),
                            [cv2.IMWRITE_JPEG_QUALITY, 90])
    assert ok
    return data.tobytes()


def write_photos(folder: Path, seed=0):
    rng = np.random.default_rng(seed)
    for label, name in enumerate(CLASSES):
        (folder / name).mkdir(parents=True, exist_ok=True)
        for i in range(PER_CLASS):
            height, width = (int(v) for v in rng.integers((120, 160), (181, 241)))
            (folder / name / f"{name}{i:03d}.jpg").write_bytes(_photo(rng, label, height, width))


def _face(rng, identity):
    y, x = np.mgrid[0:112, 0:112]
    face = np.stack([(x * 2 + identity * 31) % 256, (y * 2 + identity * 17) % 256,
                     np.full((112, 112), (identity * 29) % 256)], axis=-1)
    face = face + rng.normal(0, 8, face.shape)
    ok, data = cv2.imencode(".jpg", np.clip(face, 0, 255).astype(np.uint8))
    assert ok
    return data.tobytes()


def write_faces_emore(folder: Path, seed=0):
    """InsightFace's layout: record 0 a header (flag 2, label [first identity key, end]), the
    images under keys 1..N labelled by identity, then one record per identity holding its range
    of image keys; and the ``property`` file ("identities,height,width")."""
    from recpipe import recordio

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    writer = recordio.MXIndexedRecordIO(str(folder / "train.idx"), str(folder / "train.rec"), "w")
    first = IDENTITIES * PER_IDENTITY + 1
    writer.write_idx(0, recordio.pack(recordio.IRHeader(2, [first, first + IDENTITIES], 0, 0), b""))
    key, ranges = 1, []
    for identity in range(IDENTITIES):
        start = key
        for _ in range(PER_IDENTITY):
            header = recordio.IRHeader(0, float(identity), key, 0)
            writer.write_idx(key, recordio.pack(header, _face(rng, identity)))
            key += 1
        ranges.append((start, key))
    for identity, (start, end) in enumerate(ranges):
        header = recordio.IRHeader(2, [start, end], 0, 0)
        writer.write_idx(first + identity, recordio.pack(header, b""))
    writer.close()
    (folder / "train.sums").unlink()  # as downloaded: InsightFace's tools write no checksums
    (folder / "property").write_text(f"{IDENTITIES},112,112\n")


def make_example_data(folder: Path):
    from recpipe.packing.packer import pack_dataset

    write_photos(folder / "photos")
    (folder / "cat.jpg").write_bytes((folder / "photos" / "cat" / "cat000.jpg").read_bytes())
    summary = pack_dataset(str(folder / "photos"), str(folder / "train"), workers=1)
    assert (folder / "train.rec").is_file() and (folder / "train.sums").is_file(), summary
    write_faces_emore(folder / "faces_emore")
