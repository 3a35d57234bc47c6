"""Restart markers (csrc/jpeg/transcode.h, csrc/jpeg/restart.h, recpipe.image.restart): adding
them is lossless, and a region decode fed only the intervals it touches gives the pixels the
same region had before (from the file without markers, and from the whole stream)."""

import struct

import cv2
import numpy as np
import pytest

from recpipe._optional import extension
from recpipe.image.restart import RestartLayout, RestartPolicy, add_restarts, restart_layout

_batch = extension("_batch")
pytestmark = pytest.mark.skipif(_batch is None, reason="recpipe._batch is not built")

SAMPLINGS = {"420": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420,
             "422": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422,
             "444": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444,
             "411": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_411}
# (kind, height, width): odd sizes, wider than tall and taller than wide, one MCU column
SHAPES = [("420", 97, 131), ("422", 64, 203), ("444", 121, 77), ("411", 75, 150),
          ("gray", 83, 99), ("420", 200, 15)]
POLICIES = [RestartPolicy(), RestartPolicy(rows=1, mcus=0), RestartPolicy(rows=2, mcus=0),
            RestartPolicy(mcus=1), RestartPolicy(optimize=False)]


def photo(h, w, seed, channels=3):
    """Smooth shapes plus fine noise: Huffman data of a realistic size."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (max(1, h // 6), max(1, w // 6), 3), dtype=np.uint8)
    img = cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)
    img = cv2.add(img, rng.integers(0, 24, img.shape, dtype=np.uint8))
    return cv2.cvtColor(img, cv2.COLOR_BGR2GRAY) if channels == 1 else img


def encode(kind, h, w, seed=0, quality=90, progressive=False):
    params = [cv2.IMWRITE_JPEG_QUALITY, quality]
    if kind in SAMPLINGS:
        params += [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, SAMPLINGS[kind]]
    if progressive:
        params += [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]
    img = photo(h, w, seed, channels=1 if kind == "gray" else 3)
    ok, buf = cv2.imencode(".jpg", img, params)
    assert ok
    return buf.tobytes()


def region(data, box, den=1, channels=3, fast_upsample=False, strict=False, restarts=True,
           check_rest=False):
    """The pixels of ``box`` (scaled coordinates) out of decode_region's window."""
    buf, h, w, depth, x, y, full_h, full_w = _batch.decode_region(
        data, 1, den, *box, channels, False, fast_upsample, strict, 0, check_rest, 0, restarts)
    img = np.frombuffer(buf, np.uint8).reshape(h, w, depth)
    x0, y0, x1, y1 = box
    x1 = full_w if x1 < 0 else min(x1, full_w)
    y1 = full_h if y1 < 0 else min(y1, full_h)
    return img[y0 - y:y1 - y, x0 - x:x1 - x]


def full(data, **kw):
    return region(data, (0, 0, -1, -1), **kw)


def intervals(data):
    """Offsets of the entropy-coded bytes of every restart interval: [(start, end), ...]."""
    scan = data.index(b"\xff\xda")
    start = scan + 2 + struct.unpack(">H", data[scan + 2:scan + 4])[0]
    spans, pos = [], start
    while True:
        at = data.index(b"\xff", pos)
        if data[at + 1] == 0x00:
            pos = at + 2
            continue
        spans.append((start, at))
        if not 0xD0 <= data[at + 1] <= 0xD7:
            return spans
        start = pos = at + 2


# --- transcoding ------------------------------------------------------------------------------

@pytest.mark.parametrize("kind,h,w", SHAPES)
@pytest.mark.parametrize(
    "policy", POLICIES, ids=lambda p: f"rows{p.rows}-mcus{p.mcus}-opt{p.optimize:d}")
def test_markers_are_lossless(kind, h, w, policy):
    data = encode(kind, h, w, seed=h * w)
    marked = add_restarts(data, policy)
    assert marked is not None and marked != data and b"\xff\xdd" in marked
    for channels in (3, 1):
        assert np.array_equal(full(marked, channels=channels), full(data, channels=channels))
    flag = cv2.IMREAD_GRAYSCALE if kind == "gray" else cv2.IMREAD_COLOR
    assert np.array_equal(cv2.imdecode(np.frombuffer(marked, np.uint8), flag),
                          cv2.imdecode(np.frombuffer(data, np.uint8), flag))
    assert len(intervals(marked)) > 1
    assert restart_layout(data) is None


def test_auto_intervals_divide_a_row_and_rows_give_rows():
    data = encode("420", 160, 192, seed=3)  # 12 x 10 MCUs
    assert restart_layout(add_restarts(data, "auto")) == RestartLayout(4, 12, 10, 1, 4, 16, 16)
    assert restart_layout(add_restarts(data, 2)) == RestartLayout(24, 12, 10, 2, 12, 16, 16)
    wide = encode("444", 40, 8 * 29, seed=4)  # 29 MCUs a row (a prime): one MCU an interval
    assert restart_layout(add_restarts(wide, "auto")).interval == 1
    gray = encode("gray", 16, 8 * 10, seed=5)  # one component: 8x8 MCUs, 10 a row
    assert restart_layout(add_restarts(gray, "auto"))[:2] == (5, 10)


def test_optimal_tables_make_the_files_smaller():
    data = encode("420", 240, 320, seed=6)
    assert len(add_restarts(data, "auto")) < len(data)
    assert len(add_restarts(data, RestartPolicy(optimize=False))) > len(data)


def test_app_and_comment_segments_are_kept():
    from .native_diff import with_app_segments

    data = with_app_segments(encode("420", 64, 64))
    marked = add_restarts(data)
    for segment in (b"Exif\x00\x00", b"Photoshop 3.0\x00", b"recpipe differential test"):
        assert segment in marked
    assert np.array_equal(full(marked), full(data))


def test_what_cannot_take_markers_is_left_alone():
    assert add_restarts(encode("420", 64, 64, progressive=True)) is None
    assert add_restarts(b"\x89PNG\r\n\x1a\n" + bytes(40)) is None
    assert add_restarts(b"") is None
    assert add_restarts(encode("420", 64, 64), "off") is None
    data = encode("420", 96, 96)
    assert add_restarts(data[:len(data) // 2]) is None  # truncated: libjpeg warns
    broken = bytearray(data)
    broken[len(data) // 2:len(data) // 2 + 40] = bytes(40)  # zeros in the Huffman data
    assert add_restarts(bytes(broken)) is None or np.array_equal(full(add_restarts(
        bytes(broken))), full(bytes(broken)))


@pytest.mark.parametrize("value,expected", [
    ("auto", RestartPolicy()), ("AUTO", RestartPolicy()), ("off", None), (None, None),
    (3, RestartPolicy(rows=3, mcus=0)), ("2", RestartPolicy(rows=2, mcus=0))])
def test_policy_spellings(value, expected):
    assert RestartPolicy.parse(value) == expected


@pytest.mark.parametrize("value", [0, -1, "x", "1.5", True, ""])
def test_bad_policies_are_refused(value):
    with pytest.raises(ValueError, match="restart"):
        RestartPolicy.parse(value)


# --- region decodes through the cut ----------------------------------------------------------

@pytest.mark.parametrize("kind,h,w", SHAPES)
@pytest.mark.parametrize("policy", POLICIES[:4], ids=["auto", "row", "rows2", "mcu1"])
def test_regions_equal_the_decode_without_markers(kind, h, w, policy):
    data = encode(kind, h, w, seed=h + w)
    marked = add_restarts(data, policy)
    rng = np.random.default_rng(h * 7 + w)
    boxes = [(0, 0, w, h), (0, 0, 1, 1), (w - 1, h - 1, w, h), (-3, -3, w + 5, h + 5)]
    for _ in range(14):
        x0, y0 = int(rng.integers(0, w)), int(rng.integers(0, h))
        boxes.append((x0, y0, int(rng.integers(x0 + 1, w + 1)), int(rng.integers(y0 + 1, h + 1))))
    for i, box in enumerate(boxes):
        den = [1, 1, 2, 4, 8][i % 5]
        scaled = tuple(v // den if v > 0 else v for v in box[:2]) + tuple(
            -(-v // den) for v in box[2:])
        channels = 1 if i % 4 == 3 else 3
        fast = bool(i % 3 == 2)
        want = region(data, scaled, den, channels, fast)
        assert np.array_equal(region(marked, scaled, den, channels, fast), want), (box, den)
        assert np.array_equal(region(marked, scaled, den, channels, fast, restarts=False), want)


def test_a_bottom_region_never_reads_the_intervals_above():
    """A damaged interval at the top: the whole stream warns there (strict: an error), the cut
    of a region below it never reads it and decodes cleanly."""
    data = add_restarts(encode("420", 192, 160, seed=9), 1)  # one MCU row an interval
    start, end = intervals(data)[0]
    damaged = data[:start] + data[start:start + (end - start) // 3] + data[end:]
    box = (16, 150, 140, 190)
    want = region(data, box)
    assert np.array_equal(region(damaged, box, strict=True), want)
    with pytest.raises(ValueError):
        region(damaged, box, strict=True, restarts=False)
    with pytest.raises(ValueError):  # check_rest reads every interval, cut or not
        region(damaged, box, strict=True, check_rest=True)
    with pytest.raises(ValueError):  # and so does a region over the damage
        region(damaged, (0, 0, 40, 20), strict=True)


def test_columns_beside_a_region_are_not_read():
    data = add_restarts(encode("444", 64, 256, seed=10), RestartPolicy(mcus=2))  # 16 px intervals
    start, end = intervals(data)[1]  # MCU row 0, columns 16..31
    damaged = data[:start] + data[start:start + (end - start) // 2] + data[end:]
    box = (128, 0, 200, 30)
    assert np.array_equal(region(damaged, box, strict=True), region(data, box))
    with pytest.raises(ValueError):
        region(damaged, box, strict=True, restarts=False)


def test_markers_out_of_order_fall_back_to_the_whole_stream():
    data = add_restarts(encode("420", 160, 160, seed=11), 1)
    _, end = intervals(data)[2]
    assert data[end:end + 2] == b"\xff\xd2"
    swapped = data[:end] + b"\xff\xd5" + data[end + 2:]  # RST5 where RST2 belongs
    box = (20, 120, 100, 150)
    assert np.array_equal(region(swapped, box), region(swapped, box, restarts=False))
    with pytest.raises(ValueError):  # libjpeg's resync warning, as without the cut
        region(swapped, box, strict=True)


def test_a_truncated_file_is_refused_in_strict_mode_as_before():
    data = add_restarts(encode("420", 160, 160, seed=12), 1)
    cut_short = data[:intervals(data)[6][0]]  # rows 0-5 only, no EOI
    box = (0, 0, 60, 40)
    assert np.array_equal(region(cut_short, box), region(data, box))
    for restarts in (True, False):
        with pytest.raises(ValueError, match="Premature end"):
            region(cut_short, box, strict=True, restarts=restarts)
    below = (0, 120, 60, 150)  # past the end: the cut cannot be built, the whole stream warns
    with pytest.raises(ValueError):
        region(cut_short, below, strict=True)


# --- whole loaders: the reference batches from files with markers -----------------------------

@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("policy", ["auto", 1])
def test_reference_batches_from_files_with_markers(tmp_path, threads, policy):
    """Every loader configuration of the reference batches (native run decoder, random crops,
    every colour path) gives the same pixels when each JPEG carries restart markers."""
    from .reference_batches import run_configs
    from .test_reference_batches import REFERENCE, _mismatches

    marked = []

    def with_markers(jpeg):
        out = add_restarts(jpeg, policy)
        marked.append(out is not None)
        return out

    got = run_configs(tmp_path, threads=threads, transform=with_markers)
    assert marked and all(marked)
    assert _mismatches(REFERENCE["configs"], got) == []


def test_python_path_from_files_with_markers(tmp_path, monkeypatch):
    """With recpipe._batch's run decoder hidden every run takes the Python path (regions through
    decode_region): the same pixels."""
    import recpipe.decode.native as native

    from .reference_batches import run_configs
    from .test_reference_batches import REFERENCE, _mismatches

    monkeypatch.setattr(native, "extension", lambda name: None)
    got = run_configs(tmp_path, names=["train", "train_jitter", "val", "random_size"],
                      transform=add_restarts)
    assert _mismatches({name: REFERENCE["configs"][name] for name in got}, got) == []
