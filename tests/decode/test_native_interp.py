"""Every ``inter_method`` on the native path, random-size crops and labels that do not come from
the record header (an imglist's id table, ``label_width`` > 1).

The resize kernels (csrc/kernels/interp.h) are checked against cv2.resize on thousands of seeded
random images and sizes (bicubic with Intel IPP off in the test's thread: OpenCV's own
arithmetic, which the Python path uses); the loader's native runs against the Python path
(pixels equal, with ``status`` proving which samples C rendered)."""

import cv2
import numpy as np
import pytest

import recpipe
from recpipe._optional import extension
from recpipe.decode.augment import AugmentConfig, Augmenter
from recpipe.decode.decoders import get_decoder
from recpipe.decode.labels import IdLabels
from recpipe.decode.loader import ImageLoader
from recpipe.decode.native import augment_is_native, run_options
from recpipe.decode.records import RecordDecoder
from recpipe.errors import DecodeError, RecordFormatError
from recpipe.image.opencv import ipp_off
from recpipe.io.reader import RecordReader

from .native_diff import native_and_python, pack_basic_kinds, pack_kinds

batch = extension("_batch")
kernels = extension("_kernels")
pytestmark = pytest.mark.skipif(batch is None, reason="recpipe._batch is not built")

METHODS = (0, 1, 2, 3, 4)  # nearest, bilinear (cv2's own), bicubic, area, Lanczos-4
KERNEL_CASES = 3000


def _ours(img, out_h, out_w, inv_x, inv_y, method):
    """csrc/kernels/interp.h's resize, with its SIMD loops (where the CPU has them) and with its
    scalar
    ones alone (the two must agree: they compute the same integers)."""
    h, w, c = img.shape
    out = np.zeros((out_h, out_w, c), np.uint8)
    assert kernels.interp((h, w, c), np.ascontiguousarray(img), (out_h, out_w), out, inv_x,
                          inv_y, method)
    scalar = np.zeros_like(out)
    assert kernels.interp((h, w, c), np.ascontiguousarray(img), (out_h, out_w), scalar, inv_x,
                          inv_y, method, False)
    np.testing.assert_array_equal(scalar, out, err_msg="scalar loops")
    return out


def _sizes(rng, kind):
    """(source h, w), (output h, w) for a kind of resize."""
    if kind == 0:  # tiny sources (1-4 px: every tap clamped), any output
        high = 5 if rng.integers(2) else 12
        return tuple(rng.integers(1, high, 2)), tuple(rng.integers(1, 40, 2))
    if kind == 1:  # downscale
        return tuple(rng.integers(20, 300, 2)), tuple(rng.integers(5, 80, 2))
    if kind == 2:  # upscale
        return tuple(rng.integers(5, 60, 2)), tuple(rng.integers(20, 200, 2))
    if kind == 3:  # integer factors (area's fast path), sometimes a pixel over
        out = rng.integers(3, 60, 2)
        factor = int(rng.integers(2, 6))
        return tuple(out * factor + rng.integers(0, 2, 2)), tuple(out)
    if kind == 4:  # large ratios: one side shrunk or grown tenfold and more, the other not
        side, big = rng.integers(2, 12), rng.integers(120, 400)
        if rng.integers(2):
            return (side, big), (big // 2, side * 3)
        return (big, side), (side * 2, big // 3)
    return tuple(rng.integers(10, 200, 2)), tuple(rng.integers(10, 200, 2))  # mixed


def _cv2_resize(img, size, fx, fy, method):
    """cv2.resize, bicubic with IPP off in this thread (as the Python path resizes)."""
    with ipp_off():
        return cv2.resize(img, size, fx=fx, fy=fy, interpolation=method)


def test_kernels_equal_cv2_resize_bit_for_bit():
    rng = np.random.default_rng(21)
    for case in range(KERNEL_CASES):
        method = METHODS[case % len(METHODS)]
        (h, w), (out_h, out_w) = _sizes(rng, (case // len(METHODS)) % 6)
        h, w, out_h, out_w = int(h), int(w), int(out_h), int(out_w)
        channels = int(rng.choice([1, 3]))
        img = rng.integers(0, 256, (h, w, channels), dtype=np.uint8)
        if case % 3 == 0:  # smooth images too (ties and near-ties in the fixed point)
            img = cv2.GaussianBlur(img, (5, 5), 0).reshape(h, w, channels)
        if case % 2:  # cv2.resize(fx=, fy=): the scale is not the sizes' ratio
            fx = out_w / w * float(rng.uniform(0.97, 1.03))
            fy = out_h / h * float(rng.uniform(0.97, 1.03))
            want = _cv2_resize(img, None, fx, fy, method)
            want = want.reshape(want.shape[0], want.shape[1], channels)
            got = _ours(img, want.shape[0], want.shape[1], fx, fy, method)
        else:
            want = _cv2_resize(img, (out_w, out_h), 0, 0, method)
            want = want.reshape(out_h, out_w, channels)
            got = _ours(img, out_h, out_w, out_w / w, out_h / h, method)
        how = "fx" if case % 2 else "size"
        message = f"method {method} {img.shape} -> {want.shape} ({how})"
        np.testing.assert_array_equal(got, want, err_msg=message)


def test_bicubic_is_a_kernel_and_native_because_the_python_path_turns_ipp_off():
    """cv2.resize's 8-bit bicubic is Intel IPP's where the wheel has it (its own arithmetic,
    CPU-dependent); the Python path resizes with IPP off (recpipe.image.opencv.resize), whose
    pixels csrc/kernels/interp.h reproduces: recpipe's bicubic is that arithmetic on every
    CPU."""
    img = cv2.GaussianBlur(np.random.default_rng(0).integers(0, 256, (30, 41, 3), np.uint8),
                           (3, 3), 0)
    with ipp_off():
        generic = cv2.resize(img, (70, 50), interpolation=cv2.INTER_CUBIC)
    np.testing.assert_array_equal(_ours(img, 50, 70, 70 / 41, 50 / 30, 2), generic)
    config = AugmentConfig(data_shape=(3, 32, 32), resize=40, inter_method=2)
    assert augment_is_native(config)
    if get_decoder("auto").region_options() is not None:
        assert run_options(Augmenter(config), get_decoder("auto")) is not None
    if cv2.ipp.useIPP():  # the reason for the switch: IPP's pixels are not OpenCV's own
        ipp = cv2.resize(img, (70, 50), interpolation=cv2.INTER_CUBIC)
        assert not np.array_equal(generic, ipp)


# --------------------------------------------------------------------------- loader runs


def _photos(path, sizes=((72, 96), (120, 90), (64, 64), (131, 77), (90, 140), (57, 61),
                         (300, 220), (81, 120), (40, 44), (250, 180))):
    rng = np.random.default_rng(7)
    with recpipe.RecordWriter(str(path)) as writer:
        for i, (h, w) in enumerate(sizes):
            img = cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (7, 7), 0)
            data = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes()
            header = recpipe.IRHeader(3, [float(i), i + 0.5, -1.0], 1000 + i, 0)
            writer.write(recpipe.pack(header, data), i)
    return str(path)


def _native_run(records, reader, epoch=1):
    """(images, labels, status) of one native run over every record, and the Python path's
    (images, labels) of the same samples."""
    n = len(reader)
    positions = np.arange(n, dtype=np.int64)
    samples = positions * 7 + 3
    starts, ends = reader.spans(positions)
    shape = (n,) + records.augmenter.out_shape
    width = records.label_width
    images = np.full(shape, 7, records.augmenter.dtype)
    labels = np.zeros((n, width), np.float32)
    status = np.zeros(n, np.uint8)
    rule = records.label_rule
    table = (rule.ids, rule.values) if isinstance(rule, IdLabels) else ()
    options = run_options(records.augmenter, records.decoder, label_width=width,
                          id_labels=bool(table))
    assert options is not None
    key = records.seed & ((1 << 128) - 1)
    batch.fill(reader.local_descriptor(), reader.size, starts, ends, samples, positions, images,
               labels, status, key & ((1 << 64) - 1), key >> 64, epoch, options, b"", *table)
    expected = np.zeros(shape, records.augmenter.dtype)
    expected_labels = np.zeros((n, width), np.float32)
    for i in range(n):
        expected_labels[i] = records.decode_into(expected[i], i, int(samples[i]), epoch)
    return images, labels, status, expected, expected_labels


GEOMETRIES = {
    "resize_crop": dict(resize=56, rand_crop=True),  # _aligned_region (the resize step)
    "resize_up": dict(resize=150),  # the resize step upscales every photo
    "rrc": dict(random_resized_crop=True, min_random_area=0.1, min_aspect_ratio=0.6,
                max_aspect_ratio=1.6),  # the crop box resized (_scaled_region)
    "random_size": dict(resize=64, rand_crop=True, min_crop_size=30, max_crop_size=60),
    "plain": dict(rand_crop=True),  # nothing resized: the method does not matter
}
OUTPUTS = {
    "uint8": dict(dtype="uint8"),
    "float32_nchw": dict(dtype="float32", mean_r=120.0, std_g=50.0, scale=0.5),
    "float32_nhwc": dict(dtype="float32", layout="NHWC", mean_b=90.0, std_r=60.0),
    "float16": dict(dtype="float16", mean_g=100.0, std_b=55.0),
    "jitter": dict(dtype="float32", brightness=0.3, saturation=0.4, rand_mirror=True),
}


@pytest.mark.parametrize("inter", [0, 1, 2, 3, 4, 9, 10])
@pytest.mark.parametrize("geometry", sorted(GEOMETRIES))
@pytest.mark.parametrize("output", sorted(OUTPUTS))
def test_native_runs_equal_the_python_path(tmp_path, inter, geometry, output):
    config = AugmentConfig.from_kwargs(data_shape=(3, 40, 36), inter_method=inter, mirror=True,
                                       **GEOMETRIES[geometry], **OUTPUTS[output])
    decoder = get_decoder("auto")
    if decoder.region_options() is None:
        pytest.skip("the decoder does not decode regions with recpipe._jpegroi")
    with RecordReader(_photos(tmp_path / "photos.rec")) as reader:
        records = RecordDecoder(reader, decoder, Augmenter(config), seed=5)
        assert records.native
        images, _, status, expected, _ = _native_run(records, reader)
    assert status.all()  # bicubic samples too (2; 9's upscales; 10's draws)
    np.testing.assert_array_equal(images, expected)


def test_auto_renders_bicubic_and_area_samples_natively(tmp_path):
    """inter_method=9 upscales with bicubic and downscales with area: C renders both."""
    decoder = get_decoder("auto")
    if decoder.region_options() is None:
        pytest.skip("the decoder does not decode regions with recpipe._jpegroi")
    sizes = ((120, 160), (30, 40), (200, 150), (35, 35))
    with RecordReader(_photos(tmp_path / "mixed.rec", sizes)) as reader:
        records = RecordDecoder(reader, decoder,
                                Augmenter(AugmentConfig(data_shape=(3, 48, 48), resize=64,
                                                        inter_method=9, dtype="uint8")))
        images, _, status, expected, _ = _native_run(records, reader)
    assert status.tolist() == [1, 1, 1, 1]
    np.testing.assert_array_equal(images, expected)


# bicubic resizes of every kind: the resize step (up and down), the random-resized crop's,
# inter_method 9's upscales and 10's draws, uint8 and float output
BICUBIC = {
    "cubic_resize_up": dict(data_shape=(3, 40, 36), resize=260, inter_method=2),
    "cubic_resize_down": dict(data_shape=(3, 40, 36), resize=52, rand_crop=True, inter_method=2,
                              rand_mirror=True),
    "cubic_rrc": dict(data_shape=(3, 16, 16), random_resized_crop=True, min_random_area=0.1,
                      inter_method=2, dtype="float32", mean_g=110.0, std_r=60.0),
    "auto_upscales": dict(data_shape=(3, 40, 36), resize=300, inter_method=9, layout="NHWC"),
    "auto_rrc": dict(data_shape=(3, 16, 16), random_resized_crop=True, min_random_area=0.05,
                     inter_method=9),
    "drawn": dict(data_shape=(3, 16, 14), random_resized_crop=True, min_random_area=0.1,
                  inter_method=10, rand_mirror=True, dtype="float16", mean_r=90.0, std_b=50.0),
}


@pytest.mark.parametrize("recipe", sorted(BICUBIC))
def test_bicubic_recipes_render_natively_over_jpeg_kinds(tmp_path, recipe):
    """inter_method 2, 9 and 10 over every JPEG kind: C renders every sample whose image is not
    smaller than the output (tiny ones upscaled: the Python path's), pixels equal."""
    decoder = get_decoder("auto")
    if decoder.region_options() is None:
        pytest.skip("the decoder does not decode regions with recpipe._jpegroi")
    rec, kinds = pack_kinds(tmp_path / "kinds.rec", np.random.default_rng(21), per_kind=3)
    config = AugmentConfig.from_kwargs(**BICUBIC[recipe])
    assert augment_is_native(config)
    with RecordReader(rec) as reader:
        for epoch in (0, 5):
            rendered = native_and_python(reader, decoder, config, seed=8, epoch=epoch)
            assert rendered.mismatches() == []
            big = np.array([kind != "tiny" for kind in kinds])
            assert rendered.done[big].all(), [k for k, d in zip(kinds, rendered.done) if not d]


@pytest.mark.parametrize("recipe", ["cubic_rrc", "auto_upscales", "drawn"])
def test_loader_batches_equal_the_python_paths_with_bicubic(tmp_path, monkeypatch, recipe):
    """End to end: an ImageLoader's batches (2 threads) with bicubic resizes equal those of a
    loader refused the native path, whose workers resize with cv2 (IPP on by default in
    those threads: the Python path turns it off for each bicubic resize)."""
    if get_decoder("auto").region_options() is None:
        pytest.skip("the decoder does not decode regions with recpipe._jpegroi")
    rec, _ = pack_kinds(tmp_path / "kinds.rec", np.random.default_rng(4), per_kind=3)
    settings = dict(BICUBIC[recipe], shuffle=True, seed=12, threads=2)
    batches = {}
    for path in ("native", "python"):
        if path == "python":
            monkeypatch.setattr("recpipe.decode.records.native_module", lambda: None)
        with ImageLoader(rec, 8, **settings) as loader:
            assert loader.records.native == (path == "native")
            batches[path] = [(images.copy(), labels.copy()) for images, labels in loader]
    assert len(batches["native"]) == len(batches["python"]) > 1
    for (images, labels), (want, want_labels) in zip(batches["native"], batches["python"]):
        np.testing.assert_array_equal(labels, want_labels)
        np.testing.assert_array_equal(images, want)


def test_random_size_crop_too_small_is_pythons_error(tmp_path):
    decoder = get_decoder("auto")
    if decoder.region_options() is None:
        pytest.skip("the decoder does not decode regions with recpipe._jpegroi")
    config = AugmentConfig(data_shape=(3, 32, 32), min_crop_size=20, max_crop_size=50,
                           dtype="uint8")
    with RecordReader(_photos(tmp_path / "small.rec", ((45, 70), (80, 60)))) as reader:
        records = RecordDecoder(reader, decoder, Augmenter(config))
        images = np.zeros((2, 3, 32, 32), np.uint8)
        failures = records.fill(images, np.zeros(2, np.float32), [0, 1], [0, 1], [0, 1], 0)
    assert [slot for slot, _ in failures] == [0]
    assert isinstance(failures[0][1], DecodeError)


# ------------------------------------------------------------------------------------ labels


@pytest.mark.parametrize("width", [1, 3])
def test_id_table_labels_are_native_and_equal_the_python_rule(tmp_path, width):
    decoder = get_decoder("auto")
    if decoder.region_options() is None:
        pytest.skip("the decoder does not decode regions with recpipe._jpegroi")
    table = {1000 + i: (np.float32(10 * i) if width == 1 else
                        np.array([i, -i, 0.25 * i], np.float32)) for i in range(10)}
    table[-5] = np.float32(1)  # no header has a negative id
    rule = IdLabels(table, width, source="list.lst")
    with RecordReader(_photos(tmp_path / "photos.rec")) as reader:
        rule.path = reader.url
        records = RecordDecoder(reader, decoder,
                                Augmenter(AugmentConfig(data_shape=(3, 32, 32), resize=40,
                                                        inter_method=3, dtype="uint8")),
                                label_width=width, label_rule=rule)
        assert records.native
        images, labels, status, expected, expected_labels = _native_run(records, reader)
    assert status.all()
    np.testing.assert_array_equal(labels, expected_labels)
    np.testing.assert_array_equal(labels[:, 0], (np.arange(10) * (10 if width == 1 else 1)))
    np.testing.assert_array_equal(images, expected)


def test_an_id_missing_from_the_table_is_pythons_error(tmp_path):
    decoder = get_decoder("auto")
    if decoder.region_options() is None:
        pytest.skip("the decoder does not decode regions with recpipe._jpegroi")
    rule = IdLabels({1000: np.float32(4), 1002: np.float32(6)}, 1, source="list.lst")
    with RecordReader(_photos(tmp_path / "photos.rec")) as reader:
        records = RecordDecoder(reader, decoder,
                                Augmenter(AugmentConfig(data_shape=(3, 32, 32), dtype="uint8")),
                                label_rule=rule)
        labels = np.zeros(3, np.float32)
        failures = records.fill(np.zeros((3, 3, 32, 32), np.uint8), labels, [0, 1, 2],
                                [0, 1, 2], [0, 1, 2], 0)
    assert [slot for slot, _ in failures] == [1]
    assert isinstance(failures[0][1], RecordFormatError)
    assert "image id 1001 is not in list.lst" in str(failures[0][1])
    assert labels.tolist() == [4, 0, 6]


def test_label_width_3_from_headers_is_native(tmp_path):
    decoder = get_decoder("auto")
    if decoder.region_options() is None:
        pytest.skip("the decoder does not decode regions with recpipe._jpegroi")
    with RecordReader(_photos(tmp_path / "photos.rec")) as reader:
        records = RecordDecoder(reader, decoder,
                                Augmenter(AugmentConfig(data_shape=(3, 36, 36),
                                                        rand_mirror=True, dtype="uint8")),
                                label_width=3)
        images, labels, status, expected, expected_labels = _native_run(records, reader)
    assert status.all()
    np.testing.assert_array_equal(labels, expected_labels)
    np.testing.assert_array_equal(images, expected)


# ------------------------------------------------------------------------- the recipes' gate

RECIPES = {
    "nearest": dict(resize=48, inter_method=0),
    "bicubic": dict(resize=48, inter_method=2),
    "area interpolation": dict(resize=48, inter_method=3),
    "lanczos4": dict(resize=48, inter_method=4),
    "auto": dict(resize=48, inter_method=9),
    "random inter": dict(random_resized_crop=True, min_random_area=0.2, inter_method=10),
    "random size": dict(resize=64, rand_crop=True, min_crop_size=30, max_crop_size=60),
}


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_each_recipe_takes_the_native_path(recipe):
    decoder = get_decoder("auto")
    if decoder.region_options() is None:
        pytest.skip("the decoder does not decode regions with recpipe._jpegroi")
    config = AugmentConfig(data_shape=(3, 40, 40), **RECIPES[recipe])
    assert augment_is_native(config)
    assert run_options(Augmenter(config), decoder) is not None
    options = run_options(Augmenter(config), decoder, label_width=3, id_labels=True)
    assert options.id_labels and options.label_width == 3


def test_fill_refuses_a_bad_label_table_and_bad_new_options(tmp_path):
    decoder = get_decoder("auto")
    if decoder.region_options() is None:
        pytest.skip("the decoder does not decode regions with recpipe._jpegroi")
    config = AugmentConfig(data_shape=(3, 32, 32), resize=40, inter_method=3, dtype="uint8")
    options = run_options(Augmenter(config), decoder, label_width=2, id_labels=True)
    with RecordReader(_photos(tmp_path / "photos.rec")) as reader:
        starts, ends = reader.spans(np.arange(2, dtype=np.int64))
        args = (reader.local_descriptor(), reader.size, starts, ends, np.arange(2), np.arange(2),
                np.zeros((2, 3, 32, 32), np.uint8), np.zeros((2, 2), np.float32),
                np.zeros(2, np.uint8), 0, 0, 0)
        ids = np.array([1000, 1001], np.uint64)
        with pytest.raises(ValueError, match="label_values"):
            batch.fill(*args, options, b"", ids, np.zeros(3, np.float32))  # 2 ids x 2 labels
        assert batch.fill(*args, options, b"", ids, np.zeros(4, np.float32)) == 2
        for bad in (dict(inter_method=7), dict(min_crop_size=0, max_crop_size=5),
                    dict(min_crop_size=9, max_crop_size=5)):
            with pytest.raises(ValueError, match="inter_method or the crop size"):
                batch.fill(*args, options._replace(**bad), b"", ids, np.zeros(4, np.float32))


# --------------------------------------------------------------- seeded random configurations



def _kinds(path):
    """8 JPEGs of random sizes (40-260 px), two of each kind."""
    return pack_basic_kinds(path, seed=9, copies=2, sides=(40, 260), keyed=True)


def _random_configuration(rng):
    h, w = int(rng.integers(8, 72)), int(rng.integers(8, 72))
    dtype = str(rng.choice(["uint8", "float32", "float16"]))
    config = dict(data_shape=(3, h, w), dtype=dtype,
                  inter_method=int(rng.choice([0, 1, 2, 3, 4, 9, 10])),
                  layout=str(rng.choice(["NCHW", "NHWC"])), rand_mirror=bool(rng.integers(2)))
    geometry = rng.integers(4)
    if geometry == 0:  # a resize step, smaller or larger than the images, then a crop
        config.update(resize=int(rng.integers(max(h, w), 3 * max(h, w) + 2)),
                      rand_crop=bool(rng.integers(2)))
    elif geometry == 1:
        low = float(rng.uniform(0.3, 1.0))
        config.update(random_resized_crop=True, min_random_area=float(rng.uniform(0.05, 0.9)),
                      min_aspect_ratio=low, max_aspect_ratio=float(rng.uniform(1.0, 1 / low)))
    elif geometry == 2:  # random-size square crops, maybe after a resize step
        low = int(rng.integers(4, 40))
        config.update(min_crop_size=low, max_crop_size=low + int(rng.integers(0, 30)),
                      rand_crop=bool(rng.integers(2)))
        if rng.integers(2):
            config["resize"] = int(rng.integers(70, 200))
    if dtype != "uint8":
        config.update(mean_r=float(rng.uniform(0, 200)), std_b=float(rng.uniform(0.5, 90)))
    if dtype != "float16" and rng.integers(3) == 0:
        config["brightness"] = float(rng.uniform(0.0, 0.5))
    try:
        return AugmentConfig.from_kwargs(**config)
    except ValueError:
        return None


def test_random_configurations_give_the_python_paths_pixels(tmp_path):
    decoder = get_decoder("auto")
    if decoder.region_options() is None:
        pytest.skip("the decoder does not decode regions with recpipe._jpegroi")
    rng = np.random.default_rng(2121)
    checked = rendered = 0
    with RecordReader(_kinds(tmp_path / "kinds.rec")) as reader:
        for _ in range(200):
            config = _random_configuration(rng)
            if config is None:
                continue
            records = RecordDecoder(reader, decoder, Augmenter(config), seed=int(rng.integers(99)))
            assert records.native, config
            try:
                images, _, status, expected, _ = _native_run(records, reader,
                                                             epoch=int(rng.integers(4)))
            except DecodeError:  # an image smaller than max_crop_size: Python's error
                continue
            for i in np.flatnonzero(status):
                np.testing.assert_array_equal(images[i], expected[i],
                                              err_msg=f"sample {i} of {config}")
            checked += 1
            rendered += int(status.sum())
    assert checked > 100 and rendered > checked * 4
