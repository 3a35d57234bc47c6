"""recpipe._batch's colour recipes (csrc/batch/colour_steps.h): gray output, MXNet's
contrast/illumination, PCA lighting and the HLS shift, each proved against what the Python
path uses: OpenCV's uint8 RGB<->HLS over every input (all 2^24 RGB triples, every valid HLS
triple, at every place in a row where cv2 switches formula), numpy's normals, and loader
batches native == Python in both layouts and every output type, on the native path for real."""

import cv2
import numpy as np
import pytest

from recpipe._optional import extension
from recpipe.decode.augment import AugmentConfig, Augmenter, sample_rng
from recpipe.decode.decoders import get_decoder
from recpipe.decode.native import augment_is_native, run_options
from recpipe.decode.records import RecordDecoder
from recpipe.decode.stats import StageClock
from recpipe.io.reader import RecordReader

from .native_diff import pack_basic_kinds

batch = extension("_batch")
kernels = extension("_kernels")
pytestmark = pytest.mark.skipif(batch is None, reason="recpipe._batch is not built")
# recpipe's HLS is OpenCV's AVX2 build's arithmetic, on every CPU; where this OpenCV dispatches
# otherwise its pixels differ from recpipe's and there is nothing to compare them with
needs_hls = pytest.mark.skipif(
    "AVX2" not in (t.lstrip("*") for t in cv2.getCPUFeaturesLine().split()),
    reason="OpenCV's HLS conversion here is not its AVX2 build")
needs_pca = pytest.mark.skipif(batch is None or not getattr(batch, "PCA_NATIVE", 0),
                               reason="recpipe._batch was built without numpy's normal sampler")
RGB2HLS, HLS2RGB = 0, 1
# row widths: all vector (256), all scalar (7, below 8 lanes), tails (40, 300: a second block)
WIDTHS = (256, 7, 45, 300)


def _all_rgb():
    code = np.arange(1 << 24, dtype=np.uint32)
    return np.stack([code >> 16, (code >> 8) & 255, code & 255], -1).astype(np.uint8)


def _all_hls():
    h, lightness, s = np.meshgrid(np.arange(181), np.arange(256), np.arange(256), indexing="ij")
    return np.stack([h, lightness, s], -1).reshape(-1, 3).astype(np.uint8)


def _convert_both(pixels, width, code, cv_code):
    count = len(pixels) // width * width
    image = np.ascontiguousarray(pixels[:count].reshape(-1, width, 3))
    ours = np.frombuffer(kernels.colour_convert(code, image.tobytes(), width), np.uint8)
    return ours.reshape(image.shape), cv2.cvtColor(image, cv_code)


@needs_hls
@pytest.mark.parametrize("width", WIDTHS)
def test_rgb_to_hls_equals_opencv_for_every_rgb_triple(width):
    pixels = _all_rgb()
    if width != WIDTHS[0]:  # every pixel at a vector-loop place first, then the others rolled
        pixels = np.roll(pixels, width // 2, axis=0)
    ours, theirs = _convert_both(pixels, width, RGB2HLS, cv2.COLOR_RGB2HLS)
    np.testing.assert_array_equal(ours, theirs)


@needs_hls
@pytest.mark.parametrize("width", WIDTHS)
def test_hls_to_rgb_equals_opencv_for_every_valid_hls_triple(width):
    ours, theirs = _convert_both(_all_hls(), width, HLS2RGB, cv2.COLOR_HLS2RGB)
    np.testing.assert_array_equal(ours, theirs)


@needs_hls
def test_every_rgb_triple_at_every_scalar_place_of_a_row():
    """A 7-pixel row is all scalar loop; shifted copies put every triple at each of its places."""
    pixels = _all_rgb()
    for shift in range(1, 7):
        ours, theirs = _convert_both(np.roll(pixels, shift, axis=0), 7, RGB2HLS,
                                     cv2.COLOR_RGB2HLS)
        np.testing.assert_array_equal(ours, theirs)


@needs_pca
def test_pca_normals_are_numpys_after_the_sample_uniforms():
    for sample in range(0, 20000, 7):
        seed, epoch = (sample * 7919) % (1 << 70), sample % 5
        rng = sample_rng(seed, epoch, sample)
        rng.random(64)
        expected = tuple(rng.standard_normal(3))
        key = seed & ((1 << 128) - 1)
        assert batch.normals(key & (2**64 - 1), key >> 64, sample, epoch) == expected


# --- loader batches native == Python ------------------------------------------------------------



def _records(path):
    return pack_basic_kinds(path, seed=8, copies=3, sides=(60, 200))


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    return _records(tmp_path_factory.mktemp("colour") / "kinds.rec")


NORM = dict(mean_r=123.68, mean_g=116.78, mean_b=103.94, std_r=58.4, std_g=57.12, std_b=57.38)
GEOMETRIES = {
    "val": dict(resize=72),
    "train": dict(random_resized_crop=True, min_random_area=0.08, max_random_area=1.0,
                  min_aspect_ratio=0.75, max_aspect_ratio=4 / 3),
    "crop": dict(rand_crop=True),
}
RECIPES = {
    "gray": dict(data_shape=(1, 48, 40), rand_mirror=True),
    "gray_contrast": dict(data_shape=(1, 48, 40), max_random_contrast=0.3,
                          max_random_illumination=20, mean_r=100, std_r=60),
    "contrast_illumination": dict(max_random_contrast=0.4, max_random_illumination=25, **NORM),
    "pca": dict(pca_noise=0.1, rand_mirror=True),
    "pca_jitter": dict(pca_noise=0.1, brightness=0.3, contrast=0.3, saturation=0.3, **NORM),
    "hls": dict(random_h=36, random_s=50, random_l=50, rand_mirror=True),
    "hls_negative": dict(random_h=-30, random_s=-40, random_l=7),  # (the config allows it)
    # (with MXNet's contrast/illumination an HLS shift takes the Python path: see the gate test)
    "hls_norm": dict(random_h=10, random_s=20, random_l=15, **NORM),
    "hls_pca_jitter": dict(random_h=20, random_s=30, random_l=30, pca_noise=0.2,
                           saturation=0.4, brightness=0.2, **NORM),
    "everything": dict(random_h=20, random_s=30, random_l=30, pca_noise=0.1, brightness=0.3,
                       contrast=0.3, saturation=0.3, rand_mirror=True, **NORM),
}


def _config(recipe, geometry, dtype, layout):
    kwargs = dict(data_shape=(3, 40, 48), dtype=dtype, layout=layout)
    kwargs.update(GEOMETRIES[geometry])
    kwargs.update(RECIPES[recipe])
    if dtype == "uint8":  # raw pixels: no normalisation (nor MXNet's contrast/illumination)
        kwargs = {name: value for name, value in kwargs.items()
                  if not name.startswith(("mean_", "std_", "max_random_"))}
    return AugmentConfig.from_kwargs(**kwargs)


def _skip_unless_available(recipe):
    if "pca" in recipe or recipe == "everything":
        if not getattr(batch, "PCA_NATIVE", 0):
            pytest.skip("recpipe._batch was built without numpy's normal sampler")


def _native_and_python(rec, config, seed=3, epoch=1):
    """(native batch, Python batch, samples the native path did) for every record of rec."""
    with RecordReader(rec) as reader:
        records = RecordDecoder(reader, get_decoder("auto"), Augmenter(config), seed=seed)
        if not records.native:
            return None
        positions = np.arange(len(reader))
        samples = positions * 13 + 5
        shape = (len(positions),) + records.augmenter.out_shape
        expected = np.zeros(shape, records.augmenter.dtype)
        for position, sample in zip(positions, samples):
            records.decode_into(expected[position], int(position), int(sample), epoch)
        images = np.full(shape, 7, records.augmenter.dtype)
        clock = StageClock("test")
        failures = records.fill(images, np.zeros(len(positions), np.float32), positions,
                                positions, samples, epoch, clock)
        assert failures == []
        return images, expected, clock.samples


@pytest.mark.parametrize("dtype", ["uint8", "float32", "float16"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("geometry", sorted(GEOMETRIES))
@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_native_batches_equal_the_python_paths(rec, recipe, geometry, dtype, layout):
    _skip_unless_available(recipe)
    config = _config(recipe, geometry, dtype, layout)
    assert augment_is_native(config)
    result = _native_and_python(rec, config)
    if result is None:
        pytest.skip("the decoder does not decode regions with recpipe._jpegroi")
    images, expected, native_samples = result
    np.testing.assert_array_equal(images, expected, err_msg=f"{recipe} {geometry}")
    assert native_samples == len(images)  # none left to the Python path


@needs_hls
@pytest.mark.parametrize("out_hw", [(36, 57), (38, 27), (41, 25), (68, 49), (19, 27), (9, 29),
                                    (1, 13), (33, 8)])
@pytest.mark.parametrize("geometry", sorted(GEOMETRIES))
def test_hls_float32_planes_ending_in_a_short_block_equal_the_python_path(rec, geometry, out_hw):
    """cv2.addWeighted writes a float32 NCHW plane in blocks of 256 values; a last block shorter
    than one register (8 values: planes of 2052, 1026, 1025, 3332, 513, 261 values) it multiplies
    and adds in two roundings, the others (13, 264 values) fused. The HLS path's float writer
    (values staged as uint8, then written) once fused those too, and the rule had blocks of 1024
    (one ulp apart in the last values of a plane with a per-channel mean, e.g.
    RECPIPE_DIFF_SEED=5150, 424242, 2)."""
    kwargs = dict(data_shape=(3,) + out_hw, dtype="float32", layout="NCHW", random_h=40,
                  rand_mirror=True, mean_r=100.1, mean_b=25.97, std_g=43.6, std_b=79.09,
                  scale=6067.96)
    kwargs.update(GEOMETRIES[geometry])
    config = AugmentConfig.from_kwargs(**kwargs)
    assert augment_is_native(config)
    result = _native_and_python(rec, config)
    if result is None:
        pytest.skip("the decoder does not decode regions with recpipe._jpegroi")
    images, expected, native_samples = result
    np.testing.assert_array_equal(images, expected)
    assert native_samples == len(images)


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_each_recipe_takes_the_native_path(recipe):
    _skip_unless_available(recipe)
    options = run_options(Augmenter(_config(recipe, "val", "float32", "NCHW")),
                          get_decoder("auto"))
    if get_decoder("auto").region_options() is None:
        pytest.skip("the decoder does not decode regions with recpipe._jpegroi")
    assert options is not None
    assert options.channels == RECIPES[recipe].get("data_shape", (3,))[0]


def test_gray_with_colour_steps_is_native(rec):
    for extra in (dict(brightness=0.2), dict(contrast=0.3)):  # (HLS, PCA: 3 channels only)
        config = AugmentConfig.from_kwargs(data_shape=(1, 32, 32), **extra)
        assert augment_is_native(config), extra
        result = _native_and_python(rec, config)
        if result is None:
            pytest.skip("the decoder does not decode regions with recpipe._jpegroi")
        images, expected, native_samples = result
        np.testing.assert_array_equal(images, expected)
        assert native_samples == len(images)


def test_c_refuses_colour_options_it_cannot_render(tmp_path):
    options = run_options(Augmenter(AugmentConfig(data_shape=(1, 32, 32))), get_decoder("auto"))
    if options is None:
        pytest.skip("the decoder does not decode regions with recpipe._jpegroi")
    path = tmp_path / "empty.rec"
    path.write_bytes(b"")
    column = np.zeros(1, np.int64)
    with open(path, "rb") as f:
        for bad in (dict(channels=2), dict(saturation=0.5), dict(random_h=3)):
            with pytest.raises(ValueError):
                batch.fill(f.fileno(), 0, column, column, column, column,
                           np.zeros((1, 1, 32, 32), np.uint8), np.zeros(1, np.float32),
                           np.zeros(1, np.uint8), 0, 0, 0, options._replace(**bad))


def test_pca_lighting_takes_the_python_path_without_numpys_sampler():
    """A build without numpy's libnpyrandom (PCA_NATIVE 0) leaves PCA lighting to Python."""
    config = _config("pca", "val", "float32", "NCHW")
    options = run_options(Augmenter(config), get_decoder("auto"))
    if batch.PCA_NATIVE:
        assert options is not None or get_decoder("auto").region_options() is None
    else:
        assert options is None


def test_hls_limits_past_cs_int_take_the_python_path():
    config = AugmentConfig.from_kwargs(data_shape=(3, 32, 32), random_h=1 << 31)
    assert not augment_is_native(config)  # C holds the limits as int
    assert run_options(Augmenter(config), get_decoder("auto")) is None


@pytest.mark.parametrize("extra", [dict(dtype="float16", brightness=0.4, random_h=20),
                                   dict(dtype="float32", random_s=77, max_random_illumination=10),
                                   dict(dtype="float32", random_s=77, max_random_contrast=0.2)],
                         ids=["float16-hls-jitter", "hls-illumination", "hls-contrast"])
def test_hls_with_jitter_or_mxnet_normalisation_is_native(rec, extra):
    """float16 with colour jitter after an HLS shift, and an HLS shift with MXNet's per-sample
    contrast/illumination, were left to the Python path while its pixels were OpenCV's (C was a
    half-ulp or an ulp off in rare values); the kernels now define both paths' pixels."""
    config = AugmentConfig.from_kwargs(data_shape=(3, 57, 36), resize=64, rand_crop=True,
                                       **extra)
    assert augment_is_native(config)
    result = _native_and_python(rec, config)
    if result is None:
        pytest.skip("the decoder does not decode regions with recpipe._jpegroi")
    images, expected, native_samples = result
    np.testing.assert_array_equal(images, expected)
    assert native_samples == len(images)
