"""Files for the viewer's tests: a small pack with a few damaged records of each kind, and a
file in InsightFace's layout."""

import numpy as np

import recpipe
from tests._damage import damage, textured_jpeg

KEY_BASE = 1000  # keys are KEY_BASE + position, so a key is never mistaken for a position
COUNT = 60
SHAPE = (96, 120)
TRUNCATED = 7     # a JPEG cut short (its checksum is right): a decode error
SUM_DAMAGED = 13  # one bit flipped after packing: a checksum mismatch
NOT_IMAGE = 21    # a payload that is not an image
FRAMING = 30      # its record head overwritten: the file's framing is broken there
DAMAGED = (TRUNCATED, SUM_DAMAGED, FRAMING)


def label_of(position):
    return float(position % 5)


def write_damaged(folder, count=COUNT):
    """``folder/pack.rec`` (+ .idx, .sums): ``count`` textured JPEGs labelled ``position % 5``
    with the damaged records above. Returns the path."""
    rec = str(folder / "pack.rec")
    with recpipe.RecordWriter(rec) as writer:
        for i in range(count):
            jpeg = textured_jpeg(i, SHAPE)
            if i == TRUNCATED:
                jpeg = jpeg[:int(len(jpeg) * 0.6)]
            if i == NOT_IMAGE:
                jpeg = b"this record holds a note, not an image" * 4
            writer.write(recpipe.pack(recpipe.IRHeader(0, label_of(i), i, 0), jpeg),
                         key=KEY_BASE + i)
    with recpipe.RecordReader(rec, integrity="off") as reader:
        offsets = reader.offsets.array
    damage(rec, int(offsets[SUM_DAMAGED]), "flip")
    with open(rec, "r+b") as f:
        f.seek(int(offsets[FRAMING]))
        f.write(b"\0" * 4)
    return rec


def face(i, size=48):
    y, x = np.mgrid[0:size, 0:size]
    return np.stack([(x * 5 + i * 11) % 256, (y * 4 + i * 7) % 256,
                     np.full((size, size), (i * 29) % 256)], axis=-1).astype(np.uint8)


def write_faces(folder, per_id=(3, 1, 4, 2)):
    """InsightFace's layout: header record (key 0), images (keys 1..), identity records.
    Returns ``(rec, labels of the images in key order)``."""
    from recpipe import recordio

    rec, idx = str(folder / "faces.rec"), str(folder / "faces.idx")
    writer = recordio.MXIndexedRecordIO(idx, rec, "w")
    first = sum(per_id) + 1
    writer.write_idx(0, recordio.pack(recordio.IRHeader(2, [first, first + len(per_id)], 0, 0),
                                      b""))
    key, labels, ranges = 1, [], []
    for identity, count in enumerate(per_id):
        start = key
        for _ in range(count):
            writer.write_idx(key, recordio.pack_img(
                recordio.IRHeader(0, float(identity), key, 0), face(key)))
            labels.append(identity)
            key += 1
        ranges.append((start, key))
    for identity, (start, end) in enumerate(ranges):
        writer.write_idx(first + identity,
                         recordio.pack(recordio.IRHeader(2, [start, end], 0, 0), b""))
    writer.close()
    return rec, labels
