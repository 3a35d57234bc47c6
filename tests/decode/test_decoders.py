import threading

import cv2
import numpy as np
import pytest

from recpipe import DecodeError
from recpipe.decode.decoders import available_decoders, get_decoder, image_size

BACKENDS = available_decoders()


def smooth_image(h, w, channels=3, seed=0):
    """Blurred noise: JPEG-friendly but not constant."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (max(1, h // 8), max(1, w // 8), channels), dtype=np.uint8)
    img = cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)
    return img if img.ndim == 3 else img[:, :, None]


def jpeg(img, quality=95):
    ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, quality])
    assert ok
    return buf.tobytes()


def cv_rgb(data, flag=cv2.IMREAD_COLOR):
    img = cv2.imdecode(np.frombuffer(data, np.uint8), flag | cv2.IMREAD_IGNORE_ORIENTATION)
    return img[:, :, ::-1] if img.ndim == 3 else img


@pytest.fixture(scope="module")
def photo():
    return jpeg(smooth_image(97, 131))


def test_opencv_always_available():
    assert "opencv" in BACKENDS
    assert get_decoder("auto").name == BACKENDS[0]


def test_unknown_backend_name():
    with pytest.raises(ValueError, match="unknown decoder"):
        get_decoder("nope")


@pytest.mark.parametrize("name", BACKENDS)
def test_decode_matches_opencv(name, photo):
    img = get_decoder(name).decode(photo)
    ref = cv_rgb(photo)
    assert img.shape == ref.shape and img.dtype == np.uint8 and img.flags.c_contiguous
    assert np.abs(img.astype(int) - ref).max() <= 2


@pytest.mark.parametrize("name", BACKENDS)
def test_memoryview_slice_input(name, photo):
    record = b"HEADER" + photo + b"TAIL"
    view = memoryview(record)[6:6 + len(photo)]
    assert np.array_equal(get_decoder(name).decode(view), get_decoder(name).decode(photo))
    assert get_decoder(name).size(view) == (97, 131)


@pytest.mark.parametrize("name", BACKENDS)
def test_scaled_sizes_follow_libjpeg(name, photo):
    dec = get_decoder(name)
    assert (1, 1) in dec.scales
    for num, den in dec.scales:
        img = dec.decode(photo, scale=(num, den))
        assert img.shape == (-(-97 * num // den), -(-131 * num // den), 3)


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("den,flag", [(2, cv2.IMREAD_REDUCED_COLOR_2), (4,
                                                                        cv2.IMREAD_REDUCED_COLOR_4),
                                      (8, cv2.IMREAD_REDUCED_COLOR_8)])
def test_scaled_decode_matches_opencv_reduced(name, den, flag, photo):
    img = get_decoder(name).decode(photo, scale=(1, den))
    ref = cv_rgb(photo, flag)
    assert img.shape == ref.shape
    assert np.abs(img.astype(int) - ref).max() <= 2


@pytest.mark.parametrize("name", BACKENDS)
def test_equivalent_fraction_accepted_and_unsupported_rejected(name, photo):
    dec = get_decoder(name)
    assert dec.decode(photo, scale=(4, 8)).shape == dec.decode(photo, scale=(1, 2)).shape
    with pytest.raises(ValueError, match="scale"):
        dec.decode(photo, scale=(2, 3))


@pytest.mark.parametrize("name", BACKENDS)
def test_channels_one_is_luma(name, photo):
    img = get_decoder(name).decode(photo, channels=1)
    ref = cv_rgb(photo, cv2.IMREAD_GRAYSCALE)
    assert img.shape == ref.shape + (1,)
    assert np.abs(img[:, :, 0].astype(int) - ref).max() <= 2


@pytest.mark.parametrize("name", BACKENDS)
def test_grayscale_jpeg_becomes_rgb(name):
    data = jpeg(smooth_image(40, 30, channels=1))
    img = get_decoder(name).decode(data)
    assert img.shape == (40, 30, 3)
    assert np.array_equal(img[:, :, 0], img[:, :, 1]) and np.array_equal(img[:, :, 1], img[:, :, 2])
    assert np.abs(img.astype(int) - cv_rgb(data)).max() <= 2


@pytest.mark.parametrize("name", BACKENDS)
def test_cmyk_jpeg_converted_like_opencv(name):
    simplejpeg = pytest.importorskip("simplejpeg")
    cmyk = smooth_image(24, 40, channels=4, seed=3)
    data = simplejpeg.encode_jpeg(cmyk, 95, "CMYK", "444")
    ref = cv_rgb(data)
    for channels in (3, 1):
        img = get_decoder(name).decode(data, channels=channels)
        assert img.shape == (24, 40, channels)
    img = get_decoder(name).decode(data)
    assert np.abs(img.astype(int) - ref).max() <= 2


@pytest.mark.parametrize("name", BACKENDS)
def test_png_behind_any_name_drops_alpha(name):
    rgba = smooth_image(20, 30, channels=4, seed=5)
    data = cv2.imencode(".png", rgba)[1].tobytes()
    dec = get_decoder(name)
    img = dec.decode(data, scale=(1, 2))  # non-JPEG: full size whatever the scale
    assert img.shape == (20, 30, 3)
    assert np.array_equal(img, rgba[:, :, 2::-1])
    assert dec.size(data) == (20, 30)
    assert dec.decode(data, channels=1).shape == (20, 30, 1)


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("h,w", [(1, 1), (7, 5), (5, 7)])
def test_tiny_images(name, h, w):
    data = jpeg(smooth_image(h, w, seed=h * 10 + w))
    dec = get_decoder(name)
    assert dec.size(data) == (h, w)
    assert np.abs(dec.decode(data).astype(int) - cv_rgb(data)).max() <= 2
    for num, den in dec.scales:
        assert dec.decode(data, scale=(num, den)).shape == (-(-h * num // den), -(-w * num // den),
                                                            3)


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("bad", [b"", b"not an image at all", b"\xff\xd8\xff" + b"\x00" * 50,
                                 b"\x89PNG\r\n\x1a\n" + b"\x00" * 30])
def test_garbage_raises_decode_error(name, bad):
    dec = get_decoder(name)
    with pytest.raises(DecodeError):
        dec.decode(bad)


@pytest.mark.parametrize("name", BACKENDS)
def test_truncated_jpeg_raises_when_strict(name, photo):
    truncated = photo[: len(photo) * 2 // 3]
    with pytest.raises(DecodeError, match="(?i)premature|end"):
        get_decoder(name).decode(truncated)


@pytest.mark.parametrize("name", [n for n in BACKENDS if n != "opencv"])
def test_truncated_jpeg_partial_when_not_strict(name, photo):
    truncated = photo[: len(photo) * 2 // 3]
    img = get_decoder(name, strict=False).decode(truncated)
    full = get_decoder(name).decode(photo)
    assert img.shape == full.shape
    assert np.array_equal(img[:8], full[:8])  # the top rows were decoded


@pytest.mark.parametrize("name", BACKENDS)
def test_decoder_recovers_after_errors(name, photo):
    dec = get_decoder(name)
    for bad in (b"\xff\xd8\xff" + b"x" * 100, photo[:200]):
        with pytest.raises(DecodeError):
            dec.decode(bad)
        assert np.array_equal(dec.decode(photo), get_decoder(name).decode(photo))


def test_size_header_errors():
    with pytest.raises(DecodeError):
        image_size(b"\xff\xd8\xff\xe0\x00")
    with pytest.raises(DecodeError):
        image_size(b"garbage bytes")
    data = jpeg(smooth_image(33, 17))
    assert image_size(data) == (33, 17)


@pytest.mark.parametrize("name", BACKENDS)
def test_fast_options_stay_close(name, photo):
    ref = get_decoder(name).decode(photo).astype(int)
    fast_dct = get_decoder(name, fast_dct=True).decode(photo)
    assert fast_dct.shape == ref.shape and np.abs(fast_dct - ref).mean() < 2
    # nearest-neighbour chroma upsampling: larger but bounded error on strong colour gradients
    fast_up = get_decoder(name, fast_upsample=True).decode(photo)
    assert fast_up.shape == ref.shape and np.abs(fast_up - ref).mean() < 10


@pytest.mark.parametrize("name", BACKENDS)
def test_many_threads_decode_identically(name):
    blobs = [jpeg(smooth_image(60 + i, 80 - i, seed=i)) for i in range(12)]
    dec = get_decoder(name)
    expected = [dec.decode(b, scale=dec.scales[i % len(dec.scales)]) for i, b in enumerate(blobs)]
    results = {}
    errors = []

    def work(tid):
        try:
            for rep in range(5):
                for i, b in enumerate(blobs):
                    img = dec.decode(b, scale=dec.scales[i % len(dec.scales)])
                    if not np.array_equal(img, expected[i]):
                        results[(tid, rep, i)] = False
        except Exception as e:  # noqa: BLE001 - a thread's error, reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and not results


@pytest.mark.parametrize("name", BACKENDS)
def test_decode_region_covers_the_box(name, photo):
    dec = get_decoder(name)
    full = dec.decode(photo)
    for box in [(10, 20, 90, 60), (0, 0, 131, 97)]:
        img, window = dec.decode_region(photo, box)
        x0, y0, x1, y1 = box
        assert window.full_height == 97 and window.full_width == 131
        assert window.x <= x0 and window.y <= y0
        inside = img[y0 - window.y:y1 - window.y, x0 - window.x:x1 - window.x]
        assert np.array_equal(inside, full[y0:y1, x0:x1])
    if not dec.roi:  # generic version: the whole image
        assert img.shape == full.shape and window[:2] == (0, 0)
