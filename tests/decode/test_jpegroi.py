"""recpipe._batch's region decoder (decode_region): region decodes equal full decodes inside the
region, and no
input (garbage, truncated, fuzzed, huge dimensions) crashes it."""

import os
import threading

import cv2
import numpy as np
import pytest

from recpipe import DecodeError
from recpipe.decode.decoders import Window, get_decoder, roi_available

try:
    from recpipe import _batch
except ImportError:  # pragma: no cover - the build without libjpeg
    _batch = None

needs_roi = pytest.mark.skipif(
    not roi_available(),
    reason="recpipe._batch is not built (needs libjpeg-turbo headers, e.g. apt-get install "
           "libjpeg62-turbo-dev, then pip install -e .) or libturbojpeg is missing")


def test_extension_built_when_required():
    """ci/test.sh sets RECPIPE_REQUIRE_JPEGROI=1 after installing the headers."""
    if os.environ.get("RECPIPE_REQUIRE_JPEGROI") != "1":
        pytest.skip("RECPIPE_REQUIRE_JPEGROI is not set")
    assert _batch is not None, "recpipe._batch was not built"
    assert get_decoder("turbojpeg").roi


def smooth_image(h, w, channels=3, seed=0):
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (max(1, h // 8), max(1, w // 8), channels), dtype=np.uint8)
    img = cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)
    return img if img.ndim == 3 else img[:, :, None]


def jpeg(img, quality=92, subsampling=None, progressive=False):
    params = [cv2.IMWRITE_JPEG_QUALITY, quality]
    if subsampling is not None:
        params += [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, subsampling]
    if progressive:
        params += [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]
    ok, buf = cv2.imencode(".jpg", img, params)
    assert ok
    return buf.tobytes()


SUBSAMPLINGS = {
    "420": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420,
    "422": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422,
    "444": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444,
    "411": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_411,
}


@pytest.fixture(scope="module")
def dec():
    if not roi_available():
        pytest.skip("recpipe._batch is not built")
    return get_decoder("turbojpeg")


def assert_region_matches(dec, data, box, scale=(1, 1), channels=3):
    full = dec.decode(data, scale=scale, channels=channels)
    img, window = dec.decode_region(data, box, scale=scale, channels=channels)
    assert isinstance(window, Window)
    assert (window.full_height, window.full_width) == full.shape[:2]
    x0, y0, x1, y1 = box
    x1 = min(x1, full.shape[1]) if x1 >= 0 else full.shape[1]
    y1 = min(y1, full.shape[0]) if y1 >= 0 else full.shape[0]
    x0, y0 = max(0, x0), max(0, y0)
    # the window covers the box ...
    assert window.x <= x0 and window.y <= y0
    assert window.x + img.shape[1] >= x1 and window.y + img.shape[0] >= y1
    assert img.dtype == np.uint8 and img.shape[2] == channels
    # ... and inside the box its pixels are a full decode's
    inside = img[y0 - window.y:y1 - window.y, x0 - window.x:x1 - window.x]
    assert np.array_equal(inside, full[y0:y1, x0:x1])
    return img, window


@needs_roi
@pytest.mark.parametrize("sub", sorted(SUBSAMPLINGS))
@pytest.mark.parametrize("progressive", [False, True])
def test_region_equals_full_decode(dec, sub, progressive):
    data = jpeg(smooth_image(203, 317, seed=1), subsampling=SUBSAMPLINGS[sub],
                progressive=progressive)
    rng = np.random.default_rng(3)
    for _ in range(12):
        x0, y0 = int(rng.integers(0, 300)), int(rng.integers(0, 190))
        x1, y1 = x0 + int(rng.integers(1, 317 - x0 + 1)), y0 + int(rng.integers(1, 203 - y0 + 1))
        assert_region_matches(dec, data, (x0, y0, x1, y1))
    img, window = assert_region_matches(dec, data, (0, 0, 317, 203))
    assert img.shape == (203, 317, 3) and window[:2] == (0, 0)


@needs_roi
@pytest.mark.parametrize("scale", [(1, 2), (1, 4), (1, 8), (3, 4)])
def test_region_at_dct_scales(dec, scale):
    data = jpeg(smooth_image(240, 360, seed=2))
    full = dec.decode(data, scale=scale)
    h, w = full.shape[:2]
    for box in [(0, 0, w, h), (w // 3, h // 4, w - 1, h - 2), (w - 3, h - 3, w, h)]:
        assert_region_matches(dec, data, box, scale=scale)


@needs_roi
def test_only_region_rows_and_narrow_columns_are_returned(dec):
    data = jpeg(smooth_image(256, 256, seed=4), subsampling=SUBSAMPLINGS["420"])
    img, window = dec.decode_region(data, (100, 120, 140, 150))
    # rows exactly as asked; columns widened to iMCU boundaries (16 px for 4:2:0) and a margin
    assert (window.y, img.shape[0]) == (120, 30)
    assert window.x <= 100 and window.x % 16 == 0 and img.shape[1] < 256
    assert window.x + img.shape[1] >= 140


@needs_roi
def test_gray_cmyk_and_channels(dec):
    gray = jpeg(smooth_image(50, 70, channels=1, seed=5))
    img, _ = assert_region_matches(dec, gray, (10, 5, 60, 45))
    assert np.array_equal(img[:, :, 0], img[:, :, 1])
    assert_region_matches(dec, gray, (10, 5, 60, 45), channels=1)
    colour = jpeg(smooth_image(50, 70, seed=6))
    assert_region_matches(dec, colour, (3, 7, 33, 40), channels=1)
    simplejpeg = pytest.importorskip("simplejpeg")
    cmyk = simplejpeg.encode_jpeg(smooth_image(40, 56, channels=4, seed=7), 95, "CMYK", "444")
    for channels in (3, 1):
        assert_region_matches(dec, cmyk, (8, 8, 40, 30), channels=channels)


@needs_roi
@pytest.mark.parametrize("h,w", [(1, 1), (1, 9), (9, 1), (8, 8), (17, 33)])
def test_tiny_images_and_boxes(dec, h, w):
    data = jpeg(smooth_image(h, w, seed=h + w))
    assert_region_matches(dec, data, (0, 0, w, h))
    assert_region_matches(dec, data, (w - 1, h - 1, w, h))
    assert_region_matches(dec, data, (-5, -5, w + 10, h + 10))  # clipped to the image


@needs_roi
def test_memoryview_slice_without_copy(dec):
    data = jpeg(smooth_image(64, 80, seed=8))
    record = b"HEADER" + data + b"TAIL"
    view = memoryview(record)[6:6 + len(data)]
    a, wa = dec.decode_region(view, (5, 6, 50, 40))
    b, wb = dec.decode_region(data, (5, 6, 50, 40))
    assert wa == wb and np.array_equal(a, b)


@needs_roi
def test_empty_box_and_non_jpeg(dec):
    data = jpeg(smooth_image(30, 30, seed=9))
    with pytest.raises(DecodeError, match="empty region"):
        dec.decode_region(data, (20, 5, 20, 10))
    png = cv2.imencode(".png", smooth_image(20, 24, seed=10))[1].tobytes()
    img, window = dec.decode_region(png, (2, 2, 10, 10))  # non-JPEG: whole image
    assert img.shape == (20, 24, 3) and window == (0, 0, 20, 24)


@needs_roi
def test_truncated_stream(dec):
    data = jpeg(smooth_image(200, 160, seed=11))
    truncated = data[: len(data) * 2 // 3]
    # the region lies above the missing part: strict mode still sees no EOI marker
    with pytest.raises(DecodeError, match="(?i)premature|end"):
        dec.decode_region(truncated, (0, 0, 40, 20))
    with pytest.raises(DecodeError):
        dec.decode_region(truncated, (0, 150, 40, 200))
    lenient = get_decoder("turbojpeg", strict=False)
    img, window = lenient.decode_region(truncated, (0, 0, 40, 20))
    full = dec.decode(data)
    assert np.array_equal(img[:, :40], full[:20, :40])
    img, _ = lenient.decode_region(truncated, (0, 0, 160, 200))  # grey below the cut
    assert img.shape == (200, 160, 3)


@needs_roi
def test_huge_dimensions_refused_without_allocating(dec):
    data = bytearray(jpeg(smooth_image(16, 16, seed=12)))
    sof = data.find(b"\xff\xc0")
    data[sof + 5:sof + 9] = (65500).to_bytes(2, "big") + (65500).to_bytes(2, "big")
    with pytest.raises(DecodeError):
        dec.decode_region(bytes(data), (0, 0, 65500, 65500))
    # a small region of the 'huge' image: decoding fails on the missing data, cleanly
    with pytest.raises(DecodeError):
        dec.decode_region(bytes(data), (0, 0, 64, 64))
    progressive = bytearray(jpeg(smooth_image(16, 16, seed=12), progressive=True))
    sof = progressive.find(b"\xff\xc2")
    progressive[sof + 5:sof + 9] = (65500).to_bytes(2, "big") + (65500).to_bytes(2, "big")
    with pytest.raises(DecodeError):  # its coefficient buffer would need ~25 GB
        dec.decode_region(bytes(progressive), (0, 0, 8, 8))


@needs_roi
@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("fast", [False, True])
def test_fuzzed_bytes_never_crash(dec, strict, fast):
    """Random byte flips, truncations and garbage: a DecodeError or an image, never a crash."""
    decoder = get_decoder("turbojpeg", strict=strict, fast_dct=fast, fast_upsample=fast)
    seeds = [jpeg(smooth_image(48, 64, seed=13), subsampling=SUBSAMPLINGS["420"]),
             jpeg(smooth_image(40, 40, seed=14), progressive=True),
             jpeg(smooth_image(24, 32, channels=1, seed=15))]
    rng = np.random.default_rng(16)
    outcomes = {"ok": 0, "error": 0}
    for i in range(300):
        data = bytearray(seeds[i % len(seeds)])
        kind = i % 3
        if kind == 0:
            for _ in range(int(rng.integers(1, 8))):
                data[int(rng.integers(2, len(data)))] = int(rng.integers(0, 256))
        elif kind == 1:
            data = data[:int(rng.integers(3, len(data)))]
        else:
            data = data[:int(rng.integers(2, 200))] + bytearray(
                rng.integers(0, 256, int(rng.integers(0, 400)), dtype=np.uint8).tobytes())
        box = tuple(int(v) for v in rng.integers(0, 64, 4))
        scale = ((1, 1), (1, 2), (1, 8))[i % 3]
        try:
            img, window = decoder.decode_region(bytes(data), box, scale=scale)
        except DecodeError:
            outcomes["error"] += 1
        else:
            assert img.dtype == np.uint8 and img.ndim == 3 and min(img.shape) >= 1
            assert window.x + img.shape[1] <= window.full_width
            outcomes["ok"] += 1
    assert outcomes["error"] > 0 and outcomes["ok"] > 0


@needs_roi
def test_threads_share_the_decoder(dec):
    blobs = [jpeg(smooth_image(60 + i, 90, seed=20 + i)) for i in range(6)]
    boxes = [(i, 2 * i, 50 + i, 40 + i) for i in range(6)]
    expected = [dec.decode_region(b, box) for b, box in zip(blobs, boxes)]
    mismatches, errors = [], []

    def work():
        try:
            for _ in range(10):
                for (b, box), (img, window) in zip(zip(blobs, boxes), expected):
                    got, got_window = dec.decode_region(b, box)
                    if got_window != window or not np.array_equal(got, img):
                        mismatches.append(box)
        except Exception as e:  # noqa: BLE001 - a thread's error, reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and not mismatches


@needs_roi
def test_low_level_argument_checks():
    data = jpeg(smooth_image(16, 16, seed=30))
    with pytest.raises(ValueError, match="channels"):
        _batch.decode_region(data, 1, 1, 0, 0, -1, -1, 2, False, False, True, 0)
    with pytest.raises(ValueError, match="scale"):
        _batch.decode_region(data, 0, 1, 0, 0, -1, -1, 3, False, False, True, 0)
    with pytest.raises(TypeError):
        _batch.decode_region("not bytes", 1, 1, 0, 0, -1, -1, 3, False, False, True, 0)
    buf, h, w, depth, x, y, full_h, full_w = _batch.decode_region(data, 1, 1, 0, 0, -1, -1, 3,
                                                                  False, False, True, 0)
    assert (h, w, depth, x, y, full_h, full_w) == (16, 16, 3, 0, 0, 16, 16)
    assert isinstance(buf, bytearray) and len(buf) == 16 * 16 * 3
