"""Damage inside the entropy-coded data of JPEG records of a ``.rec``, lengths unchanged (as bit
rot on a disk or a flipped bit on the wire would do), and small image packs to damage."""

import cv2
import numpy as np

import recpipe
from recpipe.io.format.framing import HEAD_SIZE

IMAGE_HEADER = 24  # IRHeader before the JPEG in a record's payload


def textured_jpeg(seed, shape=(64, 80)):
    """A JPEG with fine detail (damage to its scan changes many pixels)."""
    rng = np.random.default_rng(seed)
    img = cv2.GaussianBlur(rng.integers(0, 256, (*shape, 3), dtype=np.uint8), (3, 3), 0)
    return cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 92])[1].tobytes()


def write_pack(path, count=12, shape=(64, 80)):
    """``path`` (.rec + .idx + .sums) with ``count`` JPEG records labelled ``0..count-1``."""
    with recpipe.RecordWriter(str(path)) as writer:
        for i in range(count):
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0),
                                      textured_jpeg(i, shape)))
    return str(path)


def scan_span(jpeg):
    """``(start, end)`` of the entropy-coded data of a baseline JPEG's (first) scan."""
    sos = jpeg.index(b"\xff\xda")
    start = sos + 2 + int.from_bytes(jpeg[sos + 2:sos + 4], "big")
    return start, jpeg.rindex(b"\xff\xd9")


def _jpeg_at(rec_bytes, offset):
    length = int.from_bytes(rec_bytes[offset + 4:offset + 8], "little") & ((1 << 29) - 1)
    body = offset + HEAD_SIZE + IMAGE_HEADER
    return body, bytes(rec_bytes[body:offset + HEAD_SIZE + length])


def damage(rec_path, offset, how="flip", where=0.5):
    """Damage the record at byte ``offset`` of ``rec_path`` in place: ``how`` 'flip' (one bit)
    or 'zero' (16 bytes set to 0), at fraction ``where`` of its scan data."""
    data = bytearray(open(rec_path, "rb").read())
    body, jpeg = _jpeg_at(data, offset)
    start, end = scan_span(jpeg)
    at = body + start + int((end - start - 16) * where)
    if how == "flip":
        data[at] ^= 0x10
    else:
        data[at:at + 16] = bytes(16)
    with open(rec_path, "r+b") as f:
        f.write(data)
