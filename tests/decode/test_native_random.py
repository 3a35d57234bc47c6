"""A seeded randomized differential test: configurations drawn over the options recpipe._batch
renders (geometry, mirror, colour jitter (float16 too), normalisation, layout, uint8/float32/float16 with
scales down to float16's subnormals and up past its range) x JPEG kinds (gray, 4:2:0, 4:4:4,
progressive); the native run must give the Python path's pixels exactly."""

import cv2
import numpy as np
import pytest

import recpipe
from recpipe._optional import extension
from recpipe.decode.augment import AugmentConfig, Augmenter
from recpipe.decode.decoders import get_decoder
from recpipe.decode.native import augment_is_native
from recpipe.decode.records import RecordDecoder
from recpipe.io.reader import RecordReader

pytestmark = pytest.mark.skipif(extension("_batch") is None, reason="recpipe._batch is not built")
KINDS = ("gray", "420", "444", "progressive")
CONFIGURATIONS = 240


def _records(path):
    rng = np.random.default_rng(5)
    payloads = []
    for i, kind in enumerate(KINDS * 2):
        h, w = int(rng.integers(40, 260)), int(rng.integers(40, 260))
        img = cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (5, 5), 0)
        flags = [cv2.IMWRITE_JPEG_QUALITY, 90]
        if kind == "gray":
            img = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
        elif kind == "444":
            flags += [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444]
        elif kind == "progressive":
            flags += [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]
        data = cv2.imencode(".jpg", img, flags)[1].tobytes()
        payloads.append(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), data))
    with recpipe.RecordWriter(str(path)) as writer:
        for payload in payloads:
            writer.write(payload)
    return str(path)


def _configuration(rng):
    """One random configuration inside the allow-list (None: one AugmentConfig refuses)."""
    h, w = int(rng.integers(8, 72)), int(rng.integers(8, 72))
    dtype = str(rng.choice(["uint8", "float32", "float16"]))
    config = dict(data_shape=(3, h, w), dtype=dtype, layout=str(rng.choice(["NCHW", "NHWC"])))
    geometry = rng.integers(3)
    if geometry == 1:
        config.update(resize=int(rng.integers(max(h, w), 2 * max(h, w) + 2)),
                      rand_crop=bool(rng.integers(2)))
    elif geometry == 2:
        low = float(rng.uniform(0.3, 1.0))
        config.update(random_resized_crop=True, min_random_area=float(rng.uniform(0.05, 0.9)),
                      min_aspect_ratio=low, max_aspect_ratio=float(rng.uniform(1.0, 1 / low)))
    else:
        config.update(rand_crop=bool(rng.integers(2)))
    config.update(rand_mirror=bool(rng.integers(2)), mirror=bool(rng.integers(4) == 0))
    if rng.integers(2):
        for name in ("brightness", "contrast", "saturation"):
            if rng.integers(2):
                config[name] = float(rng.uniform(0.0, 0.6))
    if dtype != "uint8":
        for channel in "rgb":
            config[f"mean_{channel}"] = float(rng.uniform(0, 255)) * int(rng.integers(2))
            config[f"std_{channel}"] = float(rng.uniform(0.5, 90))
        # float16 extremes: subnormal results (tiny scales) and overflow to inf (large ones)
        config["scale"] = float(10.0 ** rng.uniform(-9, 4))
    try:
        return AugmentConfig.from_kwargs(**config)
    except ValueError:
        return None


def test_random_configurations_give_the_python_paths_pixels(tmp_path):
    rec = _records(tmp_path / "kinds.rec")
    rng = np.random.default_rng(2026)
    decoder = get_decoder("auto")
    checked = 0
    with RecordReader(rec) as reader:
        positions = np.arange(len(reader))
        for _ in range(CONFIGURATIONS):
            config = _configuration(rng)
            if config is None:
                continue
            assert augment_is_native(config), config
            records = RecordDecoder(reader, decoder, Augmenter(config), seed=int(rng.integers(99)))
            if not records.native:
                pytest.skip("the decoder does not decode regions with recpipe._jpegroi")
            epoch = int(rng.integers(4))
            samples = positions * 31 + epoch
            shape = (len(positions),) + records.augmenter.out_shape
            expected = np.zeros(shape, records.augmenter.dtype)
            for position, sample in zip(positions, samples):
                records.decode_into(expected[position], int(position), int(sample), epoch)
            images = np.full(shape, 3, records.augmenter.dtype)
            failures = records.fill(images, np.zeros(len(positions), np.float32), positions,
                                    positions, samples, epoch)
            # an upscaled crop may be left to Python; every other sample is native
            assert all(images[slot].tobytes() == expected[slot].tobytes() or slot in failures
                       for slot in positions), config
            np.testing.assert_array_equal(images, expected, err_msg=str(config))
            checked += 1
    assert checked > CONFIGURATIONS // 2
