"""PNG records in native runs (csrc/png/png.h, with libpng): the PNGs whose pixels OpenCV gives
without converting values (8-bit RGB, gray, palette; interlaced too) are decoded and rendered in
C with the Python path's pixels (OpenCV's decode, the same kernels), for colour and gray output;
the others (alpha, tRNS, 16-bit) are left to the Python path, which gives them as before."""

import io

import cv2
import numpy as np
import pytest

import recpipe
from recpipe._optional import extension
from recpipe.decode.augment import AugmentConfig, Augmenter
from recpipe.decode.decoders import get_decoder
from recpipe.decode.native import run_options
from recpipe.decode.records import RecordDecoder
from recpipe.io.reader import RecordReader

batch = extension("_batch")
pytestmark = pytest.mark.skipif(batch is None or not getattr(batch, "PNG_NATIVE", 0),
                                reason="recpipe._batch is not built with libpng")


def _png(img, **pil):
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(img).save(out, "PNG", **pil)
    return out.getvalue()


def _kinds(rng):
    """(name, png bytes, rendered natively in a 3-channel run, in a gray run)."""
    h, w = 61, 83
    rgb = cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (5, 5), 0)
    gray = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
    from PIL import Image

    palette = Image.fromarray(rgb).quantize(64)
    out = io.BytesIO()
    palette.save(out, "PNG")
    rgba = np.dstack([rgb, rng.integers(0, 256, (h, w), dtype=np.uint8)])
    deep = cv2.imencode(".png", (rgb.astype(np.uint16) * 257)[:, :, ::-1])[1].tobytes()
    tiny = cv2.resize(rgb, (9, 7), interpolation=cv2.INTER_AREA)
    return [("rgb", _png(rgb), True, True), ("gray", _png(gray), True, True),
            ("palette", out.getvalue(), True, True),
            ("opencv's", cv2.imencode(".png", rgb[:, :, ::-1])[1].tobytes(), True, True),
            ("tiny", _png(tiny), True, True), ("rgba", _png(rgba), False, False),
            ("16-bit", deep, False, False)]


def _interlaced(rgb):
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(rgb).save(out, "PNG", interlace=1)
    return out.getvalue()


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    rng = np.random.default_rng(4)
    kinds = _kinds(rng)
    rgb = cv2.GaussianBlur(rng.integers(0, 256, (70, 90, 3), dtype=np.uint8), (5, 5), 0)
    kinds.append(("adam7", _interlaced(rgb), True, True))
    path = tmp_path_factory.mktemp("png") / "png.rec"
    with recpipe.RecordWriter(str(path)) as writer:
        for i, (_, data, _, _) in enumerate(kinds):
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), data))
    return str(path), kinds


@pytest.mark.parametrize("config", [
    dict(data_shape=(3, 40, 48), random_resized_crop=True, min_random_area=0.3, rand_mirror=True,
         dtype="float32", mean_r=120, std_b=60),
    dict(data_shape=(3, 32, 32), resize=40, random_h=20, brightness=0.3),
    dict(data_shape=(3, 28, 28), pad=4, rand_crop=True, max_rotate_angle=10),
    dict(data_shape=(1, 36, 36), resize=44, dtype="float16", mean_r=100, std_r=50),
], ids=["train", "val-hls-jitter", "pad-affine", "gray"])
def test_png_records_render_natively_with_the_python_paths_pixels(pack, config):
    path, kinds = pack
    augmenter = Augmenter(AugmentConfig.from_kwargs(**config))
    with RecordReader(path) as reader:
        records = RecordDecoder(reader, get_decoder("auto"), augmenter, seed=9)
        options = run_options(augmenter, records.decoder)
        if options is None:
            pytest.skip("no native runs with this decoder")
        n = len(reader)
        positions = np.arange(n)
        samples = positions * 7 + 1
        shape = (n,) + augmenter.out_shape
        python = np.zeros(shape, augmenter.dtype)
        for position in range(n):
            records.decode_into(python[position], position, int(samples[position]), 1)
        images = np.full(shape, 3, augmenter.dtype)
        status = np.zeros(n, np.uint8)
        starts, ends = reader.spans(positions)
        key = records.seed & ((1 << 128) - 1)
        batch.fill(reader.local_descriptor(), reader.size, starts, ends, samples, positions,
                   images, np.zeros(n, np.float32), status, key & ((1 << 64) - 1), key >> 64, 1,
                   options, b"")
        gray = config["data_shape"][0] == 1
        for i, (name, _, native3, native1) in enumerate(kinds):
            assert bool(status[i]) == (native1 if gray else native3), name
            if status[i]:
                np.testing.assert_array_equal(images[i], python[i], err_msg=name)
        # and the loader's own runs give the Python path's batch, PNGs and all
        filled = np.zeros(shape, augmenter.dtype)
        assert records.fill(filled, np.zeros(n, np.float32), positions, positions, samples,
                            1) == []
        np.testing.assert_array_equal(filled, python)
