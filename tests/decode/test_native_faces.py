"""The faces path of ``recpipe._batch`` (issue 21, "112 px faces against a C loop of libjpeg"):
a record exactly the output's size written one to one into a float32 (C, H, W) slot by
``csrc/kernels/chw_rows.h`` (normalised and mirrored in one pass; AVX2 where the CPU has it,
non-temporal stores where a row starts on 32 bytes). Pixels must equal the Python path's
exactly, whatever the width (the vector loops' tails), the mirror, the slot's alignment and the
images decoded before in the same run (a failed, a progressive or a gray one)."""

import cv2
import numpy as np
import pytest

import recpipe
from recpipe._optional import extension
from recpipe.decode.augment import AugmentConfig
from recpipe.decode.buffers import BufferPool
from recpipe.decode.decoders import get_decoder
from recpipe.io.reader import RecordReader

from .native_diff import native_and_python

pytestmark = pytest.mark.skipif(extension("_batch") is None, reason="recpipe._batch is not built")

NORM = dict(mean_r=127.5, mean_g=127.5, mean_b=127.5, std_r=127.5, std_g=127.5, std_b=127.5)


def _jpeg(rng, h, w, **flags):
    img = cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (3, 3), 0)
    params = [cv2.IMWRITE_JPEG_QUALITY, 92]
    if flags.get("progressive"):
        params += [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]
    if flags.get("gray"):
        img = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
    if flags.get("sampling"):
        params += [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, flags["sampling"]]
    return cv2.imencode(".jpg", img, params)[1].tobytes()


def _pack(path, jpegs):
    with recpipe.RecordWriter(str(path)) as writer:
        for i, data in enumerate(jpegs):
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), data))
    return RecordReader(str(path))


def _decoder():
    decoder = get_decoder("libjpeg")
    if decoder.region_options() is None:
        pytest.skip("libjpeg regions are not decoded by recpipe._batch here")
    return decoder


SAMPLINGS = {"420": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420,
             "422": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422,
             "444": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444}


# widths around the vector loops' steps (16 pixels split, 8 floats stored) and the faces' 112;
# the writer converts libjpeg's YCbCr rows itself (one pass): every chroma subsampling
@pytest.mark.parametrize("width", [1, 5, 8, 15, 16, 17, 24, 31, 33, 112])
@pytest.mark.parametrize("mirror", ["mirror", "rand_mirror", "none"])
@pytest.mark.parametrize("sampling", sorted(SAMPLINGS))
def test_one_to_one_float_slots_equal_the_python_path(tmp_path, width, mirror, sampling):
    rng = np.random.default_rng(width)
    height = 7 + width % 5
    reader = _pack(tmp_path / "faces.rec", [_jpeg(rng, height, width,
                                                  sampling=SAMPLINGS[sampling])
                                            for _ in range(6)])
    flags = {"mirror": True} if mirror == "mirror" else (
        {"rand_mirror": True} if mirror == "rand_mirror" else {})
    config = AugmentConfig(data_shape=(3, height, width), dtype="float32", **flags, **NORM)
    rendered = native_and_python(reader, _decoder(), config, seed=5, epoch=1)
    assert rendered.native is not None, "the faces recipe must take the native path"
    assert rendered.done.all(), "C left a plain face to the Python path"
    assert rendered.mismatches() == []
    if mirror == "mirror":  # the mirror really happened: the first column is the last one
        assert np.array_equal(rendered.native[0][:, :, 0], rendered.python[0][:, :, 0])
        assert width == 1 or not np.array_equal(rendered.native[0],
                                                rendered.native[0][:, :, ::-1])


def test_a_run_mixing_failures_and_other_kinds(tmp_path):
    """One run on one thread: a truncated JPEG (a libjpeg warning: left to the Python path), a
    progressive one, a gray one (another output colour space) and plain ones between them; every
    sample C renders equals the Python path, so nothing of one image leaks into the next."""
    rng = np.random.default_rng(3)
    good = [_jpeg(rng, 24, 40) for _ in range(4)]
    truncated = good[0][: len(good[0]) // 2]
    jpegs = [good[0], truncated, good[1], _jpeg(rng, 24, 40, progressive=True), good[2],
             _jpeg(rng, 24, 40, gray=True), good[3], truncated, good[1]]
    reader = _pack(tmp_path / "mixed.rec", jpegs)
    config = AugmentConfig(data_shape=(3, 24, 40), dtype="float32", rand_mirror=True, **NORM)
    for _ in range(2):  # twice on the same thread
        rendered = native_and_python(reader, _decoder(), config, seed=9, epoch=2)
        assert rendered.mismatches() == []
        assert not rendered.done[1] and not rendered.done[7]  # truncated: Python's to report
        assert rendered.done[[0, 2, 3, 4, 6, 8]].all()


def test_batches_start_on_a_cache_line():
    pool = BufferPool(keep=2)
    for shape in [(128, 3, 112, 112), (3, 5), (7,)]:
        batch = pool.array(shape, np.float32)
        assert batch.ctypes.data % 64 == 0
        del batch
    again = pool.array((128, 3, 112, 112), np.float32)  # a reused buffer is aligned too
    assert pool.reused >= 1 and again.ctypes.data % 64 == 0


@pytest.mark.parametrize("offset", [0, 4, 16])  # floats: rows on 64, on 16 and on 0 mod 32 bytes
def test_streamed_and_plain_stores_write_the_same_slots(tmp_path, offset):
    """Rows that start on 32 bytes are written with non-temporal stores, others with plain ones:
    both equal the Python path (a batch from BufferPool, shifted by ``offset`` floats)."""
    from recpipe.decode.native import native_module, run_options
    from recpipe.decode.augment import Augmenter

    rng = np.random.default_rng(offset)
    reader = _pack(tmp_path / "aligned.rec", [_jpeg(rng, 16, 32) for _ in range(5)])
    config = AugmentConfig(data_shape=(3, 16, 32), dtype="float32", rand_mirror=True, **NORM)
    rendered = native_and_python(reader, _decoder(), config, seed=4, epoch=0)
    augmenter = Augmenter(config)
    count = len(reader)
    flat = BufferPool().array((count * 3 * 16 * 32 + offset,), np.float32)
    images = flat[offset:].reshape((count,) + augmenter.out_shape)
    labels = np.zeros(count, np.float32)
    status = np.zeros(count, np.uint8)
    positions = np.arange(count, dtype=np.int64)
    starts, ends = reader.spans(positions)
    native_module().fill(reader.local_descriptor(), reader.size, starts, ends, positions * 31,
                         positions, images, labels, status, 4, 0, 0,
                         run_options(augmenter, _decoder()), b"")
    assert status.all()
    assert images.tobytes() == rendered.python.tobytes()


def test_windows_of_the_file_decode_as_its_descriptor(tmp_path):
    """A remote run's source: ``(window, base)`` pairs holding the file's bytes. Each record is
    read from the window holding its whole span, pixels and labels equal the descriptor's; a
    record split across two windows or held by none is left to the caller; a window outside
    the file, an empty list and anything but pairs are refused."""
    from recpipe.decode.augment import Augmenter
    from recpipe.decode.native import native_module, run_options

    rng = np.random.default_rng(9)
    reader = _pack(tmp_path / "windows.rec", [_jpeg(rng, 16, 24) for _ in range(6)])
    augmenter = Augmenter(AugmentConfig(data_shape=(3, 16, 24), dtype="float32",
                                        rand_mirror=True, **NORM))
    options = run_options(augmenter, _decoder())
    count = len(reader)
    positions = np.arange(count, dtype=np.int64)
    starts, ends = reader.spans(positions)
    file = (tmp_path / "windows.rec").read_bytes()

    def fill(source):
        images = np.zeros((count,) + augmenter.out_shape, np.float32)
        labels, status = np.zeros(count, np.float32), np.zeros(count, np.uint8)
        native_module().fill(source, reader.size, starts, ends, positions * 7, positions,
                             images, labels, status, 4, 0, 0, options, b"")
        return images, labels, status

    want = fill(reader.local_descriptor())
    assert want[2].all()
    # records 0-1 in one window, 2 split across two, 3 in none, 4-5 from a window of their own
    cut = int(starts[2]) + 20
    windows = [(file[:cut], 0), (memoryview(file)[cut:int(ends[2])], cut),
               (bytearray(file[int(starts[4]):]), int(starts[4]))]
    images, labels, status = fill(windows)
    assert status.tolist() == [1, 1, 0, 0, 1, 1]
    done = status.astype(bool)
    assert images[done].tobytes() == want[0][done].tobytes()
    assert labels[done].tolist() == want[1][done].tolist()
    with pytest.raises(ValueError, match="window 1 lies outside the file"):
        fill([(file[:10], 0), (file[-10:], reader.size - 9)])
    with pytest.raises(ValueError, match="no window"):
        fill([])
    with pytest.raises(TypeError):
        fill([file])
    with pytest.raises(TypeError):
        fill(file[:10])
