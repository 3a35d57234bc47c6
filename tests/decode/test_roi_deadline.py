"""No combination of region-decode options hangs or fails a valid photo: every strictness
(integrity off / strict / strict reading the rest of the scan) x fast or fancy upsampling x DCT
scale x baseline or progressive x chroma subsampling x crops starting and ending on odd and even
rows decodes, within a deadline, to a full decode's pixels.

libjpeg-turbo's merged 2x2 upsampler (``fast_upsample`` on 4:2:0) keeps a pending row that
``jpeg_skip_scanlines`` ignores: a strict region decode ending on an odd row used to hang on
progressive files and report "premature end of data segment" on baseline ones.

Each grid runs in a child process (this file run as a script) under a timeout, so a hang fails
the test, naming the combination the child was decoding, instead of hanging the suite."""

import itertools
import json
import os
import subprocess
import sys

import cv2
import numpy as np
import pytest

from recpipe._optional import extension

batch = extension("_batch")
native = pytest.mark.skipif(batch is None, reason="recpipe._batch is not built")

DEADLINE = 240  # seconds for a whole grid (a few seconds when nothing hangs)
SIZES = [(53, 61), (64, 48)]  # an odd height not a multiple of 16, and a multiple of 16
SAMPLINGS = {"420": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420,
             "422": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422,
             "444": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444,
             "411": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_411, "gray": None}
INTEGRITY = {"off": (False, False), "strict": (True, False), "strict+rest": (True, True)}
SCALES = [(1, 1), (1, 2), (1, 4), (1, 8)]
MAX_BYTES = 1 << 30
PHOTOS = 24


def _photo(h, w, seed):
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (h // 4 + 1, w // 4 + 1, 3), dtype=np.uint8)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)


def _jpeg(img, sampling, progressive):
    flags = [cv2.IMWRITE_JPEG_QUALITY, 90]
    if progressive:
        flags += [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]
    if SAMPLINGS[sampling] is None:
        img = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)
    else:
        flags += [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, SAMPLINGS[sampling]]
    ok, buf = cv2.imencode(".jpg", img, flags)
    assert ok
    return buf.tobytes()


def _crops(h, w):
    """Row ranges starting on odd and even rows, ending on odd and even rows (and at the
    bottom), at full width and with columns cut."""
    rows = set()
    for y0 in (0, 1, 2, 5):
        for y1 in (y0 + 1, y0 + 2, y0 + 3, h // 2, h // 2 + 1, h - 1, h):
            if y0 < y1 <= h:
                rows.add((y0, y1))
    columns = [(0, w), (min(3, w - 1), max(min(3, w - 1) + 1, w - 4))]
    return [(x0, y0, x1, y1) for (y0, y1) in sorted(rows) for (x0, x1) in columns]


def _decode(data, scale, box, channels, fast_upsample, strict, check_rest):
    buf, h, w, depth, x, y, full_h, full_w = batch.decode_region(
        data, scale[0], scale[1], *box, channels, False, fast_upsample, strict, MAX_BYTES,
        check_rest, 100)
    return np.frombuffer(buf, np.uint8).reshape(h, w, depth), x, y


def run_grid(progressive):
    """The child's job: every combination for baseline or progressive files; prints one JSON
    line before each decode (the parent names the last one on a timeout) and one per failure."""
    for (h, w), sampling in itertools.product(SIZES, SAMPLINGS):
        data = _jpeg(_photo(h, w, h * w), sampling, progressive)
        for scale, fast_upsample, channels in itertools.product(SCALES, (False, True), (3, 1)):
            full, _, _ = _decode(data, scale, (0, 0, -1, -1), channels, fast_upsample, False,
                                 False)
            for (name, (strict, rest)), box in itertools.product(
                    INTEGRITY.items(), _crops(*full.shape[:2])):
                combo = dict(size=[h, w], sampling=sampling, progressive=progressive,
                             scale=list(scale), fast_upsample=fast_upsample, channels=channels,
                             integrity=name, box=list(box))
                print(json.dumps({"start": combo}), flush=True)
                try:
                    pixels, x, y = _decode(data, scale, box, channels, fast_upsample, strict,
                                           rest)
                except ValueError as exc:
                    print(json.dumps({"error": combo, "message": str(exc)}), flush=True)
                    continue
                x0, y0, x1, y1 = box
                inside = pixels[y0 - y:y1 - y, x0 - x:x1 - x]
                if not np.array_equal(inside, full[y0:y1, x0:x1]):
                    print(json.dumps({"error": combo, "message": "pixels differ from a full "
                                      "decode"}), flush=True)
    print(json.dumps({"done": True}), flush=True)


def run_loader(folder, path):
    """The child's job: a strict, fast-upsampling loader with random crops over valid 4:2:0
    photos (odd and even heights, baseline and progressive) on the ``path`` ("native" or
    "python"), three epochs; prints one JSON line per epoch with the labels it served."""
    import recpipe
    from recpipe.decode import native as native_module
    from recpipe.decode.loader import ImageLoader

    if path == "python":  # the loader's Python path: no native runs
        real = native_module.extension
        native_module.extension = lambda name: None if name == "_batch" else real(name)
    url = os.path.join(folder, "photos.rec")
    with recpipe.RecordWriter(url) as writer:
        for i in range(PHOTOS):
            h, w = (75 + 2 * (i % 5), 83) if i % 2 else (96, 71 + i)
            data = _jpeg(_photo(h, w, i), "420", progressive=i % 3 != 0)
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), data))
    with ImageLoader(url, 4, (3, 37, 37), rand_crop=True, integrity="strict", fast_upsample=True,
                     on_error="skip", last_batch="partial", threads=2, seed=3) as loader:
        for _ in range(3):
            labels = sorted(int(label) for _, batch_labels in loader for label in batch_labels)
            print(json.dumps({"epoch": labels, "native": loader.records.native}), flush=True)
    print(json.dumps({"done": True}), flush=True)


def _child(*args):
    """The JSON lines a child run of this file printed, or a test failure naming the
    combination it was decoding when it ran past the deadline."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))]
        + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    try:
        done = subprocess.run([sys.executable, os.path.abspath(__file__), *map(str, args)],
                              capture_output=True, text=True, timeout=DEADLINE, env=env)
        out, err = done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        starts = [json.loads(line)["start"] for line in out.splitlines() if '"start"' in line]
        pytest.fail(f"the run did not finish within {DEADLINE} s: "
                    f"{starts[-1] if starts else out[-500:]}")
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert lines and lines[-1] == {"done": True}, err[-2000:]
    return lines


@native
@pytest.mark.parametrize("progressive", [False, True], ids=["baseline", "progressive"])
def test_every_region_decode_combination_finishes_with_full_decode_pixels(progressive):
    lines = _child("grid", int(progressive))
    errors = [line for line in lines if "error" in line]
    assert not errors, f"{len(errors)} failed, e.g. {errors[:3]}"
    assert sum("start" in line for line in lines) > 1000  # the grid did run


@pytest.mark.parametrize("path", ["native", "python"])
def test_strict_fast_upsampling_loader_serves_every_valid_photo(tmp_path, path):
    if batch is None:
        pytest.skip("recpipe._batch is not built")
    epochs = [line for line in _child("loader", tmp_path, path) if "epoch" in line]
    assert len(epochs) == 3
    for epoch in epochs:
        assert epoch["epoch"] == list(range(PHOTOS))
    if path == "native":
        assert epochs[-1]["native"] is True


if __name__ == "__main__":
    if sys.argv[1] == "grid":
        run_grid(bool(int(sys.argv[2])))
    else:
        run_loader(sys.argv[2], sys.argv[3])
