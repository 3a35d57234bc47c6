"""Decoder integrity (issue 19 item 3, issue 20 item 5): libjpeg's corrupt-data warnings are
errors in the rows decoded; ``integrity="strict"`` reads the rest of a region decode's scan, so
nothing a full decode flags gets through; JPEGs of more than ``max_scans`` scans are refused
quickly on every path; ``close()`` returns within its deadline while a decode runs on."""

import struct
import threading
import time

import cv2
import numpy as np
import pytest

import recpipe
from recpipe._optional import extension
from recpipe.decode import native as native_module
from recpipe.decode.decoders import DEFAULT_MAX_SCANS, available_decoders, get_decoder
from recpipe.decode.loader import ImageLoader
from recpipe.decode.options import INTEGRITY
from recpipe.decode.pool import WorkerPool, shut_down
from recpipe.errors import DecodeError
from recpipe.image.jpeg import count_scans

from .jpeg_samples import entropy_span, flip_bit, scan_bomb, zero_run

roi = pytest.mark.skipif(extension("_batch") is None, reason="recpipe._batch is not built")
PATHS = ["native", "python"]


def _image(h, w, seed):
    rng = np.random.default_rng(seed)
    return cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (5, 5), 0)


def _jpeg(img, progressive=False, sampling=None):
    flags = [cv2.IMWRITE_JPEG_QUALITY, 90]
    if progressive:
        flags += [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]
    if sampling:
        flags += [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, sampling]
    return cv2.imencode(".jpg", img, flags)[1].tobytes()


def _error(call):
    """The DecodeError message of ``call()``, or None when it decodes."""
    try:
        call()
    except DecodeError as exc:
        return str(exc)
    return None


def _damaged(jpeg, kind, rng, low=0.0, high=1.0):
    """``jpeg`` with one flipped bit, 16 zeroed bytes, or cut short, at a random place in
    [low, high) of its entropy-coded data (the bottom of a baseline image is its end)."""
    start, end = entropy_span(jpeg)
    offset = int(start + (end - 16 - start) * (low + (high - low) * rng.random()))
    if kind == "flip":
        return flip_bit(jpeg, offset, int(rng.integers(8)))
    if kind == "zero":
        return zero_run(jpeg, offset, 16)
    return jpeg[:offset]


def _huffman_table_zeroed(jpeg):
    """``jpeg`` with 16 bytes of its first AC Huffman table's symbols zeroed."""
    pos = 2
    while True:
        marker, length = jpeg[pos + 1], struct.unpack_from(">H", jpeg, pos + 2)[0]
        if marker == 0xC4 and jpeg[pos + 4] >> 4 == 1:
            return zero_run(jpeg, pos + 4 + 17 + 4, 16)
        pos += 2 + length


# -- the decoders -------------------------------------------------------------------------------


@roi
@pytest.mark.parametrize("kind", ["flip", "zero", "truncate"])
@pytest.mark.parametrize("shape", ["420", "444 scale 1/2", "progressive"])
def test_strict_region_decodes_flag_exactly_what_a_full_decode_flags(kind, shape):
    """Damage below a region: a full decode's warnings (mostly at the end of the scan, where
    libjpeg finds extraneous bytes or a marker too early) are missed by the region decode in
    'auto' and raised in 'strict', record for record."""
    sampling = cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444 if shape.startswith("444") else None
    jpeg = _jpeg(_image(240, 200, 1), progressive=shape == "progressive", sampling=sampling)
    scale = (1, 2) if "1/2" in shape else (1, 1)
    box = (30, 0, 90 // scale[1], 100 // scale[1])  # the top rows, columns cropped
    rng = np.random.default_rng(7)
    full, auto, strict = (get_decoder("libjpeg", integrity=mode)
                          for mode in ("off", "auto", "strict"))
    flagged = missed_by_auto = 0
    for _ in range(60):
        bad = _damaged(jpeg, kind, rng, low=0.6)
        whole = _error(lambda bad=bad: full.decode(bad, scale=scale))
        strict_region = _error(lambda bad=bad: strict.decode_region(bad, box, scale=scale))
        auto_region = _error(lambda bad=bad: auto.decode_region(bad, box, scale=scale))
        assert (strict_region is None) == (whole is None), (whole, strict_region)
        flagged += whole is not None
        missed_by_auto += whole is not None and auto_region is None
    assert flagged >= 5
    if shape != "progressive" and kind != "truncate":
        assert missed_by_auto > 0  # what strict adds: damage below the region
    else:  # a progressive file is read whole before its first row; a cut file has no EOI
        assert missed_by_auto == 0


@roi
@pytest.mark.parametrize("mode", ["off", "auto"])
@pytest.mark.parametrize("kind", ["flip", "zero"])
def test_warnings_in_the_rows_decoded_are_errors_in_every_mode(mode, kind):
    """A region reaching the last row reads to EOI in every mode: what a full decode flags
    is an error, never garbage pixels."""
    jpeg = _jpeg(_image(160, 160, 2))
    decoder = get_decoder("libjpeg", integrity=mode)
    rng = np.random.default_rng(3)
    flagged = 0
    for _ in range(40):
        bad = _damaged(jpeg, kind, rng)
        whole = _error(lambda bad=bad: get_decoder("libjpeg").decode(bad))
        assert _error(lambda bad=bad: decoder.decode_region(bad, (40, 20, 120, 160))) == whole
        flagged += whole is not None
    assert flagged > 0


@roi
def test_a_corrupted_huffman_table_is_an_error():
    """Zeroed Huffman symbols decode to garbage with no warning until the end of the scan (the
    issue's mean difference of 81/255): 'strict' raises whatever the region, 'auto' only for
    a region that reaches the bottom."""
    jpeg = _huffman_table_zeroed(_jpeg(_image(200, 200, 4)))
    assert _error(lambda: get_decoder("libjpeg").decode(jpeg)) is not None
    top, bottom = (0, 0, 64, 64), (0, 100, 64, 200)
    strict, auto = get_decoder("libjpeg", integrity="strict"), get_decoder("libjpeg")
    assert _error(lambda: strict.decode_region(jpeg, top)) is not None
    assert _error(lambda: strict.decode_region(jpeg, bottom)) is not None
    assert _error(lambda: auto.decode_region(jpeg, bottom)) is not None
    assert _error(lambda: auto.decode_region(jpeg, top)) is None


@pytest.mark.parametrize("name", available_decoders())
def test_every_backend_flags_what_a_full_strict_decode_flags(name):
    """Whole-image decodes of every backend raise on the damage libjpeg warns about (OpenCV:
    through the libjpeg pre-check, or the structure check without it)."""
    jpeg = _jpeg(_image(160, 160, 5))
    rng = np.random.default_rng(11)
    reference = get_decoder("libjpeg") if extension("_batch") else get_decoder("turbojpeg")
    decoder = get_decoder(name, integrity="strict")
    for _ in range(30):
        bad = _damaged(jpeg, "zero", rng, low=0.5)
        if _error(lambda bad=bad: reference.decode(bad)) is not None:
            assert _error(lambda bad=bad: decoder.decode(bad)) is not None
            assert _error(lambda bad=bad: decoder.decode_region(bad, (0, 0, 32, 32))) is not None


@roi
def test_clean_images_decode_to_the_same_pixels_in_every_mode():
    for progressive in (False, True):
        jpeg = _jpeg(_image(181, 203, 6), progressive=progressive)
        results = []
        for mode in INTEGRITY:
            decoder = get_decoder("auto", integrity=mode)
            results.append([decoder.decode_region(jpeg, box, scale=scale)[0]
                            for box in ((0, 0, 50, 40), (17, 60, 150, 140), (0, 0, -1, -1))
                            for scale in ((1, 1), (1, 2))])
        for other in results[1:]:
            for a, b in zip(results[0], other):
                np.testing.assert_array_equal(a, b)


def test_integrity_and_max_scans_are_validated():
    with pytest.raises(ValueError, match="integrity"):
        get_decoder("opencv", integrity="paranoid")
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="max_scans"):
            get_decoder("opencv", max_scans=bad)
        with pytest.raises(ValueError, match="max_scans"):
            recpipe.LoaderOptions.from_kwargs(4, (3, 8, 8), max_scans=bad)
    assert get_decoder("opencv", max_scans=None).max_scans is None
    strict = get_decoder("opencv", integrity="strict", strict=False)
    assert strict.strict and strict.check_rest


# -- scan bombs ----------------------------------------------------------------------------------


def test_scans_are_counted_without_decoding():
    assert count_scans(_jpeg(_image(16, 16, 0))) == 1
    assert count_scans(_jpeg(_image(64, 64, 0), progressive=True)) == 10
    bomb = scan_bomb(64, 64, 300)
    assert count_scans(bomb) == 300 and count_scans(bomb, at_least=1000) == 300
    # FF DA bytes inside a segment (a comment, a thumbnail) are not scans
    comment = b"\xff\xfe" + struct.pack(">H", 2 + 400) + b"\xff\xda" * 200
    padded = bomb[:2] + comment + bomb[2:]
    assert count_scans(padded) == 300 and 10 < count_scans(padded, at_least=10) < 300
    baseline = _jpeg(_image(64, 64, 0))
    assert count_scans(baseline[:2] + comment + baseline[2:], at_least=10) == 1


@pytest.mark.timeout(120)  # a hang guard only (refused in < 0.1 s; python -m benchmarks integrity)
@pytest.mark.parametrize("name", available_decoders())
def test_a_scan_bomb_is_refused_by_every_backend(name):
    bomb = scan_bomb(2048, 2048, 2080, components=3)
    decoder = get_decoder(name)
    for call in (lambda: decoder.decode(bomb), lambda: decoder.decode(bomb, scale=(1, 8)),
                 lambda: decoder.decode_region(bomb, (0, 0, 64, 64))):
        with pytest.raises(DecodeError, match=f"more than {DEFAULT_MAX_SCANS} scans"):
            call()


@pytest.mark.parametrize("name", available_decoders())
def test_max_scans_is_an_option(name):
    at_limit = scan_bomb(64, 64, 40)
    assert get_decoder(name, max_scans=40).decode(at_limit).shape == (64, 64, 3)
    with pytest.raises(DecodeError, match="more than 39 scans"):
        get_decoder(name, max_scans=39).decode(at_limit)
    with pytest.raises(DecodeError, match="more than 39 scans"):
        get_decoder(name, max_scans=39).decode_region(at_limit, (0, 0, 8, 8))
    unlimited = get_decoder(name, max_scans=None)
    assert (unlimited.decode(scan_bomb(64, 64, 694)) == 128).all()


# -- through the loader ----------------------------------------------------------------------------


def _pack(path, payloads):
    with recpipe.RecordWriter(str(path)) as writer:
        for i, data in enumerate(payloads):
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), data))
    return str(path)


def _damaged_below_centre(rng, count):
    """``count`` 256x256 JPEGs damaged in their bottom rows in a way a full decode flags."""
    out = []
    full = get_decoder("libjpeg" if extension("_batch") else "turbojpeg")
    seed = 100
    while len(out) < count:
        jpeg = _jpeg(_image(256, 256, seed))
        seed += 1
        bad = _damaged(jpeg, "zero" if len(out) % 2 else "flip", rng, low=0.85)
        if _error(lambda bad=bad: full.decode(bad)) is not None:
            out.append(bad)
    return out


def _delivered(rec, path, monkeypatch, **options):
    """Record positions the loader delivers (one epoch) and their pixels by position."""
    if path == "python":
        monkeypatch.setattr(native_module, "extension",
                            lambda name: None if name == "_batch" else extension(name))
    with ImageLoader(rec, 8, (3, 96, 96), on_error="skip", seed=3, **options) as loader:
        assert loader.records.native == (path == "native" and extension("_batch") is not None)
        pixels = {}
        for batch in loader:
            for image, position in zip(batch.images, batch.positions):
                pixels[int(position)] = image.copy()
    monkeypatch.undo()
    return pixels


@roi
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("threads", [1, 2])
def test_strict_loader_skips_damage_a_centre_crop_never_decodes(tmp_path, monkeypatch, path,
                                                                threads):
    rng = np.random.default_rng(5)
    clean = [_jpeg(_image(256, 256, 50 + i)) for i in range(10)]
    bad = _damaged_below_centre(rng, 6)
    payloads = clean[:5] + bad[:3] + clean[5:] + bad[3:]
    bad_positions = {5, 6, 7, 13, 14, 15}
    rec = _pack(tmp_path / "damaged.rec", payloads)
    auto = _delivered(rec, path, monkeypatch, threads=threads, integrity="auto")
    strict = _delivered(rec, path, monkeypatch, threads=threads, integrity="strict")
    assert set(strict) == set(range(16)) - bad_positions
    assert bad_positions & set(auto)  # the centre crop stops above the damage
    for position in strict:  # clean records: the same pixels in both modes
        np.testing.assert_array_equal(strict[position], auto[position])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("threads", [1, 2])
def test_a_scan_bomb_in_a_loader_is_skipped_quickly(tmp_path, monkeypatch, path, threads):
    clean = _jpeg(_image(128, 128, 9))
    rec = _pack(tmp_path / "bomb.rec", [clean, scan_bomb(2048, 2048, 2080, components=3), clean])
    if path == "python":
        monkeypatch.setattr(native_module, "extension",
                            lambda name: None if name == "_batch" else extension(name))
    with ImageLoader(rec, 3, (3, 96, 96), on_error="skip", threads=threads) as loader:
        batch = next(iter(loader))
        assert list(batch.positions) == [0, 2]
        assert loader.stats()["skipped"] == 1


def test_close_returns_within_its_deadline_while_a_task_runs_on():
    release = threading.Event()
    started = threading.Event()

    def work(task, clock):
        started.set()
        release.wait(30)  # a decode that cannot be interrupted

    class File:
        closed_at = None

        def close(self):
            self.closed_at = time.monotonic()

    pool, file = WorkerPool(work, 2), File()
    pool.submit("x")
    assert started.wait(10)
    start = time.monotonic()
    shut_down(pool, file, timeout=0.3)
    assert time.monotonic() - start < 5
    assert file.closed_at is None  # the busy task may still read it
    release.set()
    deadline = time.monotonic() + 10
    while file.closed_at is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert file.closed_at is not None
