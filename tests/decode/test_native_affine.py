"""MXNet's affine step and pad (csrc/kernels/warp.h): recpipe's warp equals cv2.warpAffine
(INTER_LINEAR, BORDER_CONSTANT) bit for bit on seeded random images, matrices and sizes, on
this machine (OpenCV's AVX2 dispatch: blocks of 16 columns, recpipe's definition); native runs
of the affine/pad recipes (MXNet's example/image-classification aug level 3, the CIFAR scripts'
pad=4 crop, with a resize step first, with a random-resized crop, with PCA lighting) give the
Python path's pixels; a warp with another interpolation is left to the Python path sample by
sample, with the same pixels."""

import math

import cv2
import numpy as np
import pytest

import recpipe
from recpipe._optional import extension
from recpipe.decode.augment import AugmentConfig, Augmenter
from recpipe.decode.decoders import get_decoder
from recpipe.decode.native import augment_is_native, run_options
from recpipe.decode.records import RecordDecoder
from recpipe.io.reader import RecordReader

batch = extension("_batch")
kernels = extension("_kernels")
pytestmark = pytest.mark.skipif(batch is None, reason="recpipe._batch is not built")
LANES = 16  # recpipe's warp block width: OpenCV's with AVX2 (csrc/kernels/render.h)
needs_avx2_cv2 = pytest.mark.skipif(
    "AVX2" not in (t.lstrip("*") for t in cv2.getCPUFeaturesLine().split()),
    reason="this OpenCV does not dispatch to AVX2: its warpAffine computes otherwise")


def warp_probes(count=24):
    """Seeded (image, forward float32 matrix, out_h, out_w) cases whose rows end in a long
    scalar tail, where a wrong block width shows."""
    rng = np.random.default_rng(21)
    for _ in range(count):
        rows, cols = (int(v) for v in rng.integers(48, 96, 2))
        image = rng.integers(0, 256, (rows, cols, 3), dtype=np.uint8)
        angle, scale = math.radians(rng.uniform(-45, 45)), rng.uniform(0.7, 1.4)
        shear = rng.uniform(-0.3, 0.3)
        a, b = math.cos(angle) * scale, math.sin(angle) * scale
        forward = np.array([[a - shear * b, b + shear * a, rng.uniform(-9, 9)],
                            [-b, a, rng.uniform(-9, 9)]], dtype=np.float32)
        out_w = 32 * int(rng.integers(1, 3)) + int(rng.integers(17, 32))
        yield image, forward, int(rng.integers(48, 96)), out_w

# MXNet's example/image-classification/common/data.py --aug-level 3 (rand crop and mirror from
# level 1, h/s/l 36/50/50 from level 2, rotate 10, shear 0.1, aspect 0.25 from level 3)
AUG_LEVEL_3 = dict(data_shape=(3, 224, 224), rand_crop=True, rand_mirror=True,
                   max_aspect_ratio=0.25, max_rotate_angle=10, max_shear_ratio=0.1,
                   fill_value=127)
HLS = dict(random_h=36, random_s=50, random_l=50)
# the CIFAR scripts: pad=4 around the image, random 28x28 crop, mirror
CIFAR_PAD_4 = dict(data_shape=(3, 28, 28), pad=4, rand_crop=True, rand_mirror=True)
RECIPES = {
    "aug_level_3": AUG_LEVEL_3,
    "aug_level_3_float": dict(AUG_LEVEL_3, dtype="float32", mean_r=123.68, mean_g=116.28,
                              mean_b=103.53, std_r=58.395, std_g=57.12, std_b=57.375),
    # MXNet's --aug-level 3 whole: the affine step and the HLS shift
    "aug_level_3_hls": dict(AUG_LEVEL_3, **HLS),
    "aug_level_3_hls_float": dict(AUG_LEVEL_3, **HLS, dtype="float32", mean_r=123.68,
                                  std_r=58.395),
    "hls_jitter_pad": dict(data_shape=(3, 32, 48), pad=4, rand_crop=True, **HLS,
                           brightness=0.3, saturation=0.3, dtype="float32", layout="NHWC"),
    "hls_plane_tail": dict(data_shape=(3, 25, 41), max_rotate_angle=15, random_s=40,
                           dtype="float32", mean_r=100, rand_crop=True),
    "cifar_pad_4": CIFAR_PAD_4,
    "cifar_pad_4_float_nhwc": dict(CIFAR_PAD_4, dtype="float32", layout="NHWC", scale=1 / 255),
    "pad_affine_fill": dict(data_shape=(3, 48, 40), pad=6, fill_value=17, max_rotate_angle=30,
                            max_random_scale=1.3, min_random_scale=0.8),
    "rotate": dict(data_shape=(3, 40, 40), rotate=45, rand_crop=True),
    "rotate_list": dict(data_shape=(3, 40, 40), rotate_list=(0, 90, 180, 270)),
    "img_sizes": dict(data_shape=(3, 32, 32), max_random_scale=2.0, min_random_scale=0.5,
                      max_img_size=150, min_img_size=60, rand_crop=True),
    "jitter": dict(data_shape=(3, 32, 48), max_shear_ratio=0.3, brightness=0.4, contrast=0.4,
                   saturation=0.4, rand_mirror=True, dtype="float32", mean_r=120, std_r=60),
    "float16": dict(data_shape=(3, 32, 32), max_rotate_angle=20, pad=2, dtype="float16",
                    scale=0.01),
    "min_aspect": dict(data_shape=(3, 36, 30), min_aspect_ratio=0.6, max_aspect_ratio=1.5),
    # a float32 NCHW plane of 25 x 41 = 1024 + 1 values: cv2.addWeighted's scalar last block
    "float_plane_tail": dict(data_shape=(3, 25, 41), max_rotate_angle=15, dtype="float32",
                             mean_r=100, std_g=30, scale=0.7, rand_crop=True),
}


def _random_image(rng, rows, cols, channels):
    image = rng.integers(0, 256, (rows, cols, channels), dtype=np.uint8)
    if rng.random() < 0.4:  # smooth images too: interpolation differences show on gradients
        image = cv2.GaussianBlur(image, (0, 0), 2.5).reshape(rows, cols, channels)
    return image


def _random_matrix(rng):
    kind = rng.integers(5)
    if kind == 0:  # anything
        matrix = rng.normal(0, 2, (2, 3))
        matrix[:, 2] *= 50
    elif kind == 1:  # degenerate: rank 1 or 0
        matrix = np.zeros((2, 3))
        matrix[0, 0] = rng.uniform(-2, 2)
        matrix[0, 1] = matrix[0, 0] * rng.integers(2)
        matrix[:, 2] = rng.uniform(-10, 10, 2)
    else:  # rotation, shear, scale from 1/20 (down) to 8 (up)
        angle = math.radians(rng.uniform(-180, 180))
        scale, shear = rng.uniform(0.05, 8), rng.uniform(-1, 1)
        a, b = math.cos(angle) * scale, math.sin(angle) * scale
        matrix = np.array([[a - shear * b, b + shear * a, rng.uniform(-300, 300)],
                           [-b, a, rng.uniform(-300, 300)]])
    return matrix.astype(np.float32)


def _native_warp(image, matrix, out_h, out_w, fill, lanes):
    rows, cols, channels = image.shape
    data = kernels.warp_affine(image.tobytes(), rows, cols, channels,
                             tuple(float(v) for v in matrix.reshape(6)), out_h, out_w, fill,
                             lanes)
    return np.frombuffer(data, np.uint8).reshape(out_h, out_w, channels)


@needs_avx2_cv2
def test_the_warp_equals_cv2_warp_affine():
    lanes = LANES
    rng = np.random.default_rng(2121)
    for case in range(3000):
        rows, cols = (int(v) for v in rng.integers(1, 260, 2))
        channels = 3 if rng.random() < 0.7 else 1
        image = _random_image(rng, rows, cols, channels)
        matrix = _random_matrix(rng)
        out_h, out_w = (int(v) for v in rng.integers(1, 330, 2))
        fill = int(rng.integers(256))
        src = image if channels == 3 else image[:, :, 0]
        want = cv2.warpAffine(src, matrix, (out_w, out_h), flags=cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_CONSTANT, borderValue=(fill,) * 3)
        got = _native_warp(image, matrix, out_h, out_w, fill, lanes)
        np.testing.assert_array_equal(got, want.reshape(out_h, out_w, channels),
                                      err_msg=f"case {case}: {matrix.tolist()}")


@needs_avx2_cv2
def test_a_wrong_block_width_is_caught():
    """The probes tell OpenCV's block width: the other widths differ from cv2 on them (the
    parity test above would see an OpenCV that dispatched otherwise)."""
    lanes = LANES
    probes = list(warp_probes())
    for other in {8, 16, 32} - {lanes}:
        assert not all(
            _native_warp(image, forward, out_h, out_w, 9, other).tobytes()
            == cv2.warpAffine(image, forward, (out_w, out_h), flags=cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_CONSTANT, borderValue=(9, 9, 9)).tobytes()
            for image, forward, out_h, out_w in probes)


def _records(path, count=12, seed=7):
    rng = np.random.default_rng(seed)
    with recpipe.RecordWriter(str(path)) as writer:
        for i in range(count):
            h, w = int(rng.integers(40, 300)), int(rng.integers(40, 300))
            if i % 4 == 0:  # photo-sized
                h, w = int(rng.integers(230, 420)), int(rng.integers(230, 420))
            img = cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (5, 5), 0)
            flags = [cv2.IMWRITE_JPEG_QUALITY, 90]
            if i % 3 == 1:
                flags += [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]
            if i % 5 == 2:
                img = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
            data = cv2.imencode(".jpg", img, flags)[1].tobytes()
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), data))
    return str(path)


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    return _records(tmp_path_factory.mktemp("affine") / "affine.rec")


def _python_and_native(reader, config, seed, epoch):
    """(the Python path's batch, the native run's batch, C's status per sample)."""
    records = RecordDecoder(reader, get_decoder("auto"), Augmenter(config), seed=seed)
    positions = np.arange(len(reader))
    samples = positions * 13 + epoch
    shape = (len(positions),) + records.augmenter.out_shape
    expected = np.zeros(shape, records.augmenter.dtype)
    for position, sample in zip(positions, samples):
        records.decode_into(expected[position], int(position), int(sample), epoch)
    images = np.full(shape, 3, records.augmenter.dtype)
    failures = records.fill(images, np.zeros(len(positions), np.float32), positions, positions,
                            samples, epoch)
    assert failures == []
    return records, expected, images, _native_status(records, reader, seed, epoch, samples)


def _native_status(records, reader, seed, epoch, samples):
    """C's own status per sample (1: rendered in C) of one run over every record."""
    options = run_options(records.augmenter, records.decoder)
    if options is None:
        return None
    positions = np.arange(len(reader))
    starts, ends = reader.spans(positions)
    images = np.zeros((len(positions),) + records.augmenter.out_shape, records.augmenter.dtype)
    status = np.zeros(len(positions), np.uint8)
    key = seed & ((1 << 128) - 1)
    with open(reader.url, "rb") as f:
        batch.fill(f.fileno(), reader.size, np.asarray(starts, np.int64),
                   np.asarray(ends, np.int64), np.asarray(samples, np.int64),
                   positions.astype(np.int64), images, np.zeros(len(positions), np.float32),
                   status, key & ((1 << 64) - 1), key >> 64, epoch, options)
    return status


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_recipes_give_the_python_paths_pixels_natively(rec, name):
    config = AugmentConfig.from_kwargs(**RECIPES[name])
    assert augment_is_native(config)
    with RecordReader(rec) as reader:
        for seed, epoch in ((3, 0), (11, 2)):
            records, expected, images, status = _python_and_native(reader, config, seed, epoch)
            if not records.native:
                pytest.skip("the decoder does not decode regions with recpipe._jpegroi")
            np.testing.assert_array_equal(images, expected, err_msg=name)
            assert status.all(), name  # every sample is C's, upscaled ones included


@pytest.mark.parametrize("extra", [dict(resize=256), dict(inter_method=0),
                                   dict(inter_method=2), dict(inter_method=9),
                                   dict(pca_noise=0.1)],
                         ids=["resize", "nearest", "cubic", "auto", "pca"])
def test_resize_steps_other_interpolations_and_pca_are_native(rec, extra):
    """A resize step before the warp and PCA lighting render in C; a warp with another
    interpolation is left to the Python path sample by sample (OpenCV's warp, then the same
    kernels): the loader's pixels are the Python path's either way."""
    config = AugmentConfig.from_kwargs(**dict(AUG_LEVEL_3, **extra))
    assert augment_is_native(config)
    with RecordReader(rec) as reader:
        records, expected, images, status = _python_and_native(reader, config, 5, 1)
        np.testing.assert_array_equal(images, expected)
        if records.native and extra.get("inter_method", 1) == 1:
            assert status.all()


def test_a_rotate_list_longer_than_c_takes_stays_python():
    from recpipe.decode.native import MAX_ROTATE_LIST
    angles = tuple(range(MAX_ROTATE_LIST + 1))
    assert not augment_is_native(AugmentConfig.from_kwargs(data_shape=(3, 32, 32),
                                                           rotate_list=angles))
    assert augment_is_native(AugmentConfig.from_kwargs(data_shape=(3, 32, 32),
                                                       rotate_list=angles[:-1]))


def test_run_options_carry_the_affine_keywords():
    config = AugmentConfig.from_kwargs(**dict(AUG_LEVEL_3, pad=3, rotate_list=(5, -5)))
    options = run_options(Augmenter(config), get_decoder("auto"))
    if options is None:
        pytest.skip("no native path for this decoder or machine")
    assert (options.affine, options.max_rotate_angle, options.max_shear_ratio, options.pad,
            options.fill_value, options.rotate_list) == (True, 10, 0.1, 3, 127, (5, -5))
    assert (options.aspect_low, options.aspect_high) == (0.75, 1.25)


def test_pad_with_random_resized_crop_is_native(rec):
    config = AugmentConfig.from_kwargs(data_shape=(3, 32, 32), pad=4, random_resized_crop=True,
                                       min_random_area=0.3)
    assert augment_is_native(config)
    with RecordReader(rec) as reader:
        records, expected, images, status = _python_and_native(reader, config, 5, 1)
        np.testing.assert_array_equal(images, expected)
        assert status is None or status.all()


def _random_configuration(rng):
    h, w = int(rng.integers(8, 80)), int(rng.integers(8, 80))
    dtype = str(rng.choice(["uint8", "float32", "float16"]))
    config = dict(data_shape=(3, h, w), dtype=dtype, layout=str(rng.choice(["NCHW", "NHWC"])),
                  rand_crop=bool(rng.integers(2)), rand_mirror=bool(rng.integers(2)),
                  fill_value=int(rng.integers(256)), pad=int(rng.integers(3)) * int(
                      rng.integers(0, 9)))
    if rng.integers(4):
        config.update(max_rotate_angle=int(rng.integers(0, 180)),
                      max_shear_ratio=float(rng.uniform(0, 0.5)) * int(rng.integers(2)),
                      max_aspect_ratio=float(rng.uniform(0, 0.5)) * int(rng.integers(2)))
        if rng.integers(3) == 0:
            low = float(rng.uniform(0.3, 1.0))
            config.update(min_random_scale=low, max_random_scale=float(rng.uniform(low, 2.0)))
        if rng.integers(4) == 0:
            config.update(rotate=int(rng.integers(1, 360)))
        if rng.integers(4) == 0:
            config.update(rotate_list=tuple(int(v) for v in rng.integers(-180, 180, 3)))
        if rng.integers(5) == 0:
            config.update(min_img_size=float(rng.integers(20, 100)),
                          max_img_size=float(rng.integers(100, 300)))
    if dtype != "float16" and rng.integers(2):
        config.update(brightness=float(rng.uniform(0, 0.5)), saturation=float(rng.uniform(0, 0.5)))
    if dtype != "uint8":
        config.update(mean_g=float(rng.uniform(0, 255)), std_b=float(rng.uniform(1, 90)),
                      scale=float(10.0 ** rng.uniform(-3, 1)))
    try:
        return AugmentConfig.from_kwargs(**config)
    except ValueError:
        return None


def test_random_affine_configurations_give_the_python_paths_pixels(rec):
    rng = np.random.default_rng(2027)
    checked = 0
    with RecordReader(rec) as reader:
        for _ in range(60):
            config = _random_configuration(rng)
            if config is None or not (config.affine_active or config.pad):
                continue
            assert augment_is_native(config), config
            records, expected, images, status = _python_and_native(
                reader, config, int(rng.integers(99)), int(rng.integers(3)))
            if not records.native:
                pytest.skip("the decoder does not decode regions with recpipe._jpegroi")
            np.testing.assert_array_equal(images, expected, err_msg=str(config))
            checked += 1
    assert checked > 30
