"""Shared helpers of the RecordIO core tests: small record files and images made on the spot."""

import numpy as np

from recpipe.io.format.framing import frame


def framed_file(payloads):
    """``(file bytes, offsets)`` of records framed one after the other."""
    offsets, chunks, pos = [], [], 0
    for payload in payloads:
        data = frame(payload)
        offsets.append(pos)
        chunks.append(data)
        pos += len(data)
    return b"".join(chunks), offsets


def index_text(keys, offsets):
    return "".join(f"{k}\t{o}\n" for k, o in zip(keys, offsets))


def write_rec(directory, payloads, name="data", keys=None, with_index=True):
    """Write ``payloads`` as ``directory/name.rec`` (+ ``.idx``); return ``(rec, idx, offsets)``."""
    data, offsets = framed_file(payloads)
    rec = directory / f"{name}.rec"
    rec.write_bytes(data)
    idx = directory / f"{name}.idx"
    if with_index:
        keys = range(len(payloads)) if keys is None else keys
        idx.write_text(index_text(keys, offsets))
    return rec, idx, offsets


def jpeg(seed=0, shape=(24, 32, 3), quality=90):
    """A small JPEG of a random gradient image."""
    import cv2

    rng = np.random.default_rng(seed)
    base = np.linspace(0, 255, shape[1], dtype=np.float32)[None, :, None]
    img = np.clip(base + rng.normal(0, 20, shape), 0, 255).astype(np.uint8)
    ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, quality])
    assert ok
    return buf.tobytes()
