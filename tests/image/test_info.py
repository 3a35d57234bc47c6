import struct

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recpipe.image.info import REASONS, ImageInfo, sniff, unusual_reasons


def _image(h=30, w=50, channels=3, seed=0):
    rng = np.random.default_rng(seed)
    shape = (h, w, channels) if channels > 1 else (h, w)
    return rng.integers(0, 256, shape, dtype=np.uint8)


def _encode(ext, img, params=()):
    ok, buf = cv2.imencode(ext, img, list(params))
    assert ok
    return buf.tobytes()


def _exif_app1(orientation, byte_order="II"):
    """An APP1 Exif segment whose IFD0 holds one entry: Orientation (SHORT)."""
    o = "<" if byte_order == "II" else ">"
    value = struct.pack(o + "H", orientation) + b"\x00\x00"
    tiff = byte_order.encode() + struct.pack(o + "HI", 42, 8) + struct.pack(o + "H", 1)
    tiff += struct.pack(o + "HHI", 0x0112, 3, 1) + value + struct.pack(o + "I", 0)
    body = b"Exif\x00\x00" + tiff
    return b"\xff\xe1" + struct.pack(">H", len(body) + 2) + body


def _with_segment(jpeg, segment):
    return jpeg[:2] + segment + jpeg[2:]


@pytest.mark.parametrize("h,w", [(30, 50), (64, 17)])
def test_baseline_jpeg(h, w):
    info = sniff(_encode(".jpg", _image(h, w)))
    assert info == ImageInfo("jpeg", w, h, 3)
    assert unusual_reasons(info, ".jpg") == []


def test_progressive_jpeg():
    info = sniff(_encode(".jpg", _image(), [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]))
    assert (info.format, info.width, info.height, info.progressive) == ("jpeg", 50, 30, True)
    assert unusual_reasons(info, ".jpg") == ["progressive"]


def test_grayscale_jpeg():
    info = sniff(_encode(".jpg", _image(channels=1)))
    assert (info.channels, info.grayscale, info.cmyk) == (1, True, False)
    assert unusual_reasons(info, ".JPEG") == ["grayscale"]


def test_cmyk_jpeg_built_by_libjpeg():
    simplejpeg = pytest.importorskip("simplejpeg")
    data = simplejpeg.encode_jpeg(_image(channels=4), colorspace="CMYK")
    info = sniff(data)
    assert (info.width, info.height, info.channels, info.cmyk) == (50, 30, 4, True)
    assert "cmyk" in unusual_reasons(info, ".jpg")


@pytest.mark.parametrize("byte_order", ["II", "MM"])
@pytest.mark.parametrize("orientation", [1, 6, 8])
def test_exif_orientation(orientation, byte_order):
    data = _with_segment(_encode(".jpg", _image()), _exif_app1(orientation, byte_order))
    info = sniff(data)
    assert info.exif_orientation == orientation
    assert ("exif-rotated" in unusual_reasons(info, ".jpg")) == (orientation != 1)
    # OpenCV agrees the file is still a valid image and applies the rotation itself
    decoded = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    assert decoded.shape[:2] == ((50, 30) if orientation in (6, 8) else (30, 50))


def test_fill_bytes_and_restart_markers_are_skipped():
    jpeg = _encode(".jpg", _image())
    info = sniff(jpeg[:2] + b"\xff\xff" + jpeg[2:])
    assert (info.width, info.height) == (50, 30)


@pytest.mark.parametrize("channels,expected", [(1, 1), (3, 3), (4, 4)])
def test_png(channels, expected):
    info = sniff(_encode(".png", _image(channels=channels)))
    assert (info.format, info.width, info.height, info.channels) == ("png", 50, 30, expected)
    assert info.grayscale == (channels == 1)
    assert not info.progressive


def test_png_behind_jpg_name():
    info = sniff(_encode(".png", _image()))
    assert unusual_reasons(info, "photo.jpg") == ["not-jpeg"]
    assert unusual_reasons(info, ".png") == []


@pytest.mark.parametrize("ext,fmt", [(".bmp", "bmp"), (".webp", "webp")])
def test_other_formats(ext, fmt):
    info = sniff(_encode(ext, _image(h=21, w=33)))
    assert (info.format, info.width, info.height) == (fmt, 33, 21)


def test_lossless_webp():
    info = sniff(_encode(".webp", _image(h=21, w=33), [cv2.IMWRITE_WEBP_QUALITY, 101]))
    assert (info.format, info.width, info.height) == ("webp", 33, 21)


def test_gif_header():
    data = b"GIF89a" + struct.pack("<HH", 12, 7) + b"\x00" * 20
    assert sniff(data)[:3] == ("gif", 12, 7)


@pytest.mark.parametrize("data", [b"", b"garbage", b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"BM",
                                  b"RIFF\x00\x00\x00\x00WEBPVP8 "])
def test_garbage_and_truncated_are_unreadable(data):
    info = sniff(data)
    assert info.width is None
    assert unusual_reasons(info, ".jpg") == ["unreadable"]


def test_truncated_jpeg_header_still_found():
    jpeg = _encode(".jpg", _image())
    sof = jpeg.index(b"\xff\xc0")
    info = sniff(memoryview(jpeg)[:sof + 12])
    assert (info.format, info.width, info.height) == ("jpeg", 50, 30)


def test_every_reason_is_documented():
    infos = [ImageInfo("unknown"), ImageInfo("png", 1, 1, 1, True, True, True, 3)]
    for info in infos:
        for reason in unusual_reasons(info, ".jpg"):
            assert reason in REASONS


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.sampled_from([b"", b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n",
                                                b"BM", b"GIF89a", b"RIFF\x10\x00\x00\x00WEBP"]))
def test_never_raises(tail, magic):
    info = sniff(magic + tail)
    assert info.format in ("jpeg", "png", "gif", "bmp", "webp", "unknown")
    assert isinstance(unusual_reasons(info, ".jpg"), list)
