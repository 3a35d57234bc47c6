"""``verify --decode`` is at least as strict as the default loader, and the OpenCV decoder
does not hand out grey or garbage pixels for corrupt JPEGs."""

import random

import cv2
import numpy as np
import pytest

import recpipe
from recpipe.decode import decoders
from recpipe.decode.decoders import get_decoder
from recpipe.decode.loader import ImageLoader
from recpipe.errors import DecodeError
from recpipe.io.health.verify import verify

PHOTO = "../shared/data/photos"


def _photo_jpeg():
    rng = np.random.default_rng(5)
    y, x = np.mgrid[0:96, 0:128]
    img = np.stack([(x * 2 + y) % 256, (y * 3) % 256, (x * y) % 256], -1).astype(np.uint8)
    img = cv2.add(img, rng.integers(0, 30, img.shape, dtype=np.uint8))
    return cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes()


def bit_flipped(jpeg, count=40, seed=0):
    """``count`` copies of ``jpeg`` with one bit flipped in the entropy-coded data."""
    rng = random.Random(seed)
    start = jpeg.find(b"\xff\xda") + 20
    out = []
    for _ in range(count):
        data = bytearray(jpeg)
        pos = rng.randrange(start, len(data) - 2)
        data[pos] ^= 1 << rng.randrange(8)
        out.append(bytes(data))
    return out


@pytest.fixture(scope="module")
def flipped_rec(tmp_path_factory):
    rec = str(tmp_path_factory.mktemp("flips") / "flipped.rec")
    with recpipe.RecordWriter(rec) as writer:
        for i, data in enumerate(bit_flipped(_photo_jpeg())):
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), data))
    return rec


def test_verify_flags_every_record_the_loader_rejects(flipped_rec):
    with ImageLoader(flipped_rec, 40, (3, 96, 128), threads=2, on_error="skip") as loader:
        (_, labels), = list(loader)
    rejected = set(range(40)) - {int(v) for v in labels}
    report = verify(flipped_rec, decoder=get_decoder("auto"))
    flagged = {p.record for p in report.problems if p.kind == "decode-failed"}
    assert rejected, "the bit flips should break some images"
    assert rejected <= flagged
    assert report.decoded + report.decode_failures == 40


@pytest.mark.parametrize("name", decoders.available_decoders())
def test_the_opencv_decoder_is_as_strict_as_the_others(flipped_rec, name):
    with recpipe.RecordReader(flipped_rec) as reader:
        payloads = [recpipe.unpack(reader[i])[1] for i in range(len(reader))]

    def failures(decoder):
        failed = set()
        for i, data in enumerate(payloads):
            try:
                decoder.decode(data)
            except DecodeError:
                failed.add(i)
        return failed

    assert failures(decoders.get_decoder(name)) <= failures(decoders.get_decoder("opencv"))


def test_without_the_extension_opencv_still_refuses_broken_structure(monkeypatch):
    monkeypatch.setattr(decoders, "load_roi", lambda: None)  # as decoders looks it up
    opencv = decoders.get_decoder("opencv")
    jpeg = _photo_jpeg()
    assert opencv.decode(jpeg).shape == (96, 128, 3)
    with pytest.raises(DecodeError, match="EOI"):
        opencv.decode(jpeg[: len(jpeg) * 2 // 3])
    broken = bytearray(jpeg)
    pos = jpeg.find(b"\xff\xda") + 200
    broken[pos:pos + 2] = b"\xff\x12"
    with pytest.raises(DecodeError, match="invalid marker"):
        opencv.decode(bytes(broken))
