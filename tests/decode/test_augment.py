import dataclasses
import math
import threading

import cv2
import numpy as np
import pytest

from recpipe import DecodeError
from recpipe.decode.augment import (
    AugmentConfig,
    Augmenter,
    resize_shorter_size,
    sample_rng,
)
from recpipe.decode.decoders import available_decoders, get_decoder
from recpipe.image.opencv import ipp_off

MEANS = dict(mean_r=123.68, mean_g=116.28, mean_b=103.53)
STDS = dict(std_r=58.4, std_g=57.1, std_b=57.4)


def smooth_image(h, w, channels=3, seed=0, cell=8):
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (max(1, h // cell), max(1, w // cell), channels), dtype=np.uint8)
    img = cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)
    return img if img.ndim == 3 else img[:, :, None]


def run(config, img, seed=0, index=0):
    aug = Augmenter(config)
    plan = aug.plan(img.shape[0], img.shape[1], sample_rng(seed, 0, index))
    out = np.empty(aug.out_shape, aug.dtype)
    aug.apply(img, plan, out)
    return out, plan


def cfg(**kw):
    kw.setdefault("data_shape", (3, 32, 32))
    return AugmentConfig(**kw)


# ------------------------------------------------------------------------------------ config


def test_defaults_follow_imagerecorditer():
    c = cfg()
    assert (c.resize, c.rand_crop, c.random_resized_crop, c.max_aspect_ratio, c.fill_value,
            c.inter_method, c.scale, c.dtype, c.layout) == (-1, False, False, 0, 255, 1, 1,
                                                            "float32", "NCHW")


@pytest.mark.parametrize("shape", [(4, 32, 32), (2, 8, 8), (3, 0, 8)])
def test_bad_data_shape(shape):
    with pytest.raises(ValueError, match="data_shape"):
        AugmentConfig(data_shape=shape)


@pytest.mark.parametrize("kw", [dict(rand_crop=True), dict(max_random_scale=1.2),
                                dict(min_crop_size=10, max_crop_size=20)])
def test_random_resized_crop_conflicts(kw):
    with pytest.raises(ValueError, match="random_resized_crop"):
        cfg(random_resized_crop=True, **kw)


@pytest.mark.parametrize("kw,match", [
    (dict(min_random_area=0.5, max_random_area=0.2, random_resized_crop=True), "random_area"),
    (dict(inter_method=7), "inter_method"),
    (dict(dtype="int8"), "dtype"),
    (dict(layout="CHWN"), "layout"),
    (dict(dtype="uint8", mean_r=1.0), "uint8"),
    (dict(min_crop_size=30, max_crop_size=20), "crop_size"),
    (dict(max_crop_size=20), "crop_size"),
    (dict(min_aspect_ratio=2.0, max_aspect_ratio=1.0, random_resized_crop=True), "aspect"),
    (dict(resize=0), "resize"),
    (dict(std_g=0), "std"),
])
def test_invalid_values(kw, match):
    with pytest.raises(ValueError, match=match):
        cfg(**kw)


def test_from_kwargs_strings_and_errors():
    c = AugmentConfig.from_kwargs(data_shape="(3, 224, 224)", rand_mirror="True", resize="256",
                                  mean_r="123.5", min_aspect_ratio="None")
    assert c.data_shape == (3, 224, 224) and c.rand_mirror is True and c.resize == 256
    assert c.mean_r == 123.5 and c.min_aspect_ratio is None
    with pytest.raises(ValueError, match="and_mirror"):
        AugmentConfig.from_kwargs(data_shape=(3, 8, 8), and_mirror=True)
    with pytest.raises(NotImplementedError, match="mean_img"):
        AugmentConfig.from_kwargs(data_shape=(3, 8, 8), mean_img="mean.bin")
    with pytest.raises(ValueError, match="data_shape"):
        AugmentConfig.from_kwargs(resize=10)
    with pytest.raises(NotImplementedError, match="max_rotate_angle"):
        AugmentConfig.from_kwargs(data_shape=(3, 8, 8), random_resized_crop=True,
                                  max_rotate_angle=10)


def test_out_shape_and_dtype():
    assert Augmenter(cfg(data_shape=(3, 20, 30))).out_shape == (3, 20, 30)
    aug = Augmenter(cfg(data_shape=(1, 20, 30), layout="NHWC", dtype="float16"))
    assert aug.out_shape == (20, 30, 1) and aug.dtype == np.float16
    with pytest.raises(ValueError, match="out must have shape"):
        img = smooth_image(40, 40)
        aug.apply(img, aug.plan(40, 40, sample_rng(0, 0, 0)), np.empty((3, 20, 30), np.float16))


# ------------------------------------------------------------------------------------ RNG / plan


def test_sample_rng_is_deterministic_and_distinct():
    a = sample_rng(3, 1, 7).random(8)
    assert np.array_equal(a, sample_rng(3, 1, 7).random(8))
    assert not np.array_equal(a, sample_rng(3, 1, 8).random(8))
    assert not np.array_equal(a, sample_rng(3, 2, 7).random(8))
    assert not np.array_equal(a, sample_rng(4, 1, 7).random(8))
    with pytest.raises(ValueError):
        sample_rng(-1, 0, 0)


def test_plan_is_deterministic_for_a_seed():
    aug = Augmenter(cfg(data_shape=(3, 64, 64), random_resized_crop=True, min_random_area=0.1,
                        max_aspect_ratio=0.5, rand_mirror=True, brightness=0.3, contrast=0.3,
                        saturation=0.3, pca_noise=0.1, max_random_illumination=5.0))
    plans = [aug.plan(300, 200, sample_rng(9, 0, i)) for i in range(20)]
    again = [aug.plan(300, 200, sample_rng(9, 0, i)) for i in range(20)]
    assert plans == again
    assert len({p.crop for p in plans}) > 10
    assert {p.mirror for p in plans} == {True, False}
    orders = {tuple(op for op, _ in p.colour) for p in plans}
    assert len(orders) > 1 and all(sorted(o) == [0, 1, 2] for o in orders)


def test_rrc_boxes_inside_and_in_range():
    low_area, high_area, low_ar, high_ar = 0.08, 1.0, 3 / 4, 4 / 3
    aug = Augmenter(cfg(data_shape=(3, 224, 224), random_resized_crop=True,
                        min_random_area=low_area, max_random_area=high_area,
                        min_aspect_ratio=low_ar, max_aspect_ratio=high_ar))
    rows, cols = 300, 400
    areas, ratios = [], []
    for i in range(2000):
        plan = aug.plan(rows, cols, sample_rng(1, 0, i))
        x, y, w, h = plan.crop
        assert plan.resize_crop
        assert 0 <= x and 0 <= y and x + w <= cols and y + h <= rows
        areas.append(w * h / (rows * cols))
        ratios.append(w / h)
    areas, ratios = np.array(areas), np.array(ratios)
    tol = 0.02
    assert areas.min() >= low_area - tol and areas.max() <= high_area + tol
    assert ratios.min() >= low_ar * (1 - tol) and ratios.max() <= high_ar * (1 + tol)
    # log-uniform aspect: about half of the ratios below 1
    assert 0.4 < np.mean(ratios < 1) < 0.6
    # retries reject big boxes, so the mean area is below the midpoint but not far
    assert 0.35 < areas.mean() < high_area / 2 + low_area / 2 + tol


def test_rrc_falls_back_to_center_crop():
    # an aspect range that never fits a 100x100 image at full area
    aug = Augmenter(cfg(data_shape=(3, 50, 50), random_resized_crop=True, min_random_area=1.0,
                        max_random_area=1.0, min_aspect_ratio=3.0, max_aspect_ratio=4.0))
    plan = aug.plan(100, 100, sample_rng(0, 0, 0))
    assert plan.crop == (25, 25, 50, 50) and not plan.resize_crop


def test_resize_rule():
    assert resize_shorter_size(300, 200, 256) == (256 * 300 // 200, 256)
    assert resize_shorter_size(200, 301, 256) == (256, 256 * 301 // 200)
    plan = Augmenter(cfg(resize=100)).plan(300, 200, sample_rng(0, 0, 0))
    assert plan.resized_size == (150, 100)


# ------------------------------------------------------------------------------------ exactness


def test_center_crop_after_resize_matches_cv2():
    img = smooth_image(300, 220, seed=1)
    out, plan = run(cfg(data_shape=(3, 224, 200), resize=256, dtype="uint8", layout="NHWC",
                        dct_scaling=False), img)
    new_h, new_w = 256 * 300 // 220, 256
    resized = cv2.resize(img, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    y, x = (new_h - 224) // 2, (new_w - 200) // 2
    assert np.array_equal(out, resized[y:y + 224, x:x + 200])


def test_rrc_is_crop_then_resize():
    img = smooth_image(120, 160, seed=2)
    config = cfg(data_shape=(3, 40, 40), random_resized_crop=True, min_random_area=0.2,
                 max_aspect_ratio=0.3, dtype="uint8", layout="NHWC", inter_method=2)
    out, plan = run(config, img, index=5)
    x, y, w, h = plan.crop
    with ipp_off():  # the Python path's bicubic: OpenCV's own arithmetic, not Intel IPP's
        ref = cv2.resize(img[y:y + h, x:x + w], (40, 40), interpolation=cv2.INTER_CUBIC)
    assert np.array_equal(out, ref)


def test_small_image_is_upscaled_then_cropped():
    img = smooth_image(50, 40, seed=3)  # data_shape 64x64 must still work
    out, plan = run(cfg(data_shape=(3, 64, 64), dtype="uint8", layout="NHWC"), img)
    assert plan.upscale == (80, 64)
    ref = cv2.resize(img, (64, 80), interpolation=cv2.INTER_LINEAR)[8:72]
    assert np.array_equal(out, ref)


def test_mirror_flips_horizontally():
    img = smooth_image(50, 60, seed=4)
    plain, _ = run(cfg(data_shape=(3, 40, 40), dtype="uint8"), img)
    mirrored, plan = run(cfg(data_shape=(3, 40, 40), dtype="uint8", mirror=True), img)
    assert plan.mirror
    assert np.array_equal(mirrored, plain[:, :, ::-1])


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-4), ("float16", 2e-2)])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_normalisation_formula(dtype, tol, layout):
    img = smooth_image(40, 40, seed=5)
    raw, _ = run(cfg(dtype="uint8", layout="NHWC"), img)
    out, _ = run(cfg(dtype=dtype, layout=layout, scale=0.5, **MEANS, **STDS), img)
    mean = np.array([MEANS["mean_r"], MEANS["mean_g"], MEANS["mean_b"]])
    std = np.array([STDS["std_r"], STDS["std_g"], STDS["std_b"]])
    ref = (raw - mean) * 0.5 / std
    got = out.astype(np.float64)
    got = got.transpose(1, 2, 0) if layout == "NCHW" else got
    assert out.dtype == np.dtype(dtype)
    assert np.abs(got - ref).max() < tol


def test_output_is_rgb_in_nchw_planes():
    img = np.zeros((32, 32, 3), np.uint8)
    img[:, :, 0] = 200  # red (RGB input)
    out, _ = run(cfg(dtype="uint8"), img)
    assert (out[0] == 200).all() and (out[1:] == 0).all()


def test_single_channel():
    gray = smooth_image(48, 48, channels=1, seed=6)
    out, _ = run(cfg(data_shape=(1, 32, 32), dtype="float32", mean_r=10.0, std_r=2.0), gray)
    assert out.shape == (1, 32, 32)
    assert np.allclose(out[0], (gray[8:40, 8:40, 0] - 10.0) / 2.0, atol=1e-4)
    rgb = smooth_image(48, 48, seed=6)  # colour input converted to gray
    out, _ = run(cfg(data_shape=(1, 32, 32), dtype="uint8", layout="NHWC"), rgb)
    assert np.array_equal(out[:, :, 0], cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)[8:40, 8:40])


def test_pad_fills_border():
    img = smooth_image(32, 32, seed=7)
    out, _ = run(cfg(data_shape=(3, 40, 40), pad=4, fill_value=17, dtype="uint8", layout="NHWC"),
                 img)
    assert (out[:4] == 17).all() and (out[:, -4:] == 17).all()
    assert np.array_equal(out[4:36, 4:36], img)


def test_brightness_and_pca_follow_plan():
    img = smooth_image(32, 32, seed=8)
    out, plan = run(cfg(brightness=0.5), img)
    (op, alpha), = plan.colour
    assert op == 0
    ref = np.clip(img.astype(np.float32) * alpha, 0, 255).transpose(2, 0, 1)
    assert np.abs(out - ref).max() < 1e-3
    out, plan = run(cfg(pca_noise=0.5), img, index=3)
    ref = np.clip(img.astype(np.float32) + np.array(plan.pca, np.float32), 0, 255)
    assert np.abs(out - ref.transpose(2, 0, 1)).max() < 1e-3


def test_other_augmentations_are_deterministic():
    img = smooth_image(80, 90, seed=9)
    config = cfg(data_shape=(3, 48, 48), max_rotate_angle=20, max_shear_ratio=0.1,
                 max_random_scale=1.2, min_random_scale=0.8, random_h=10, random_s=20,
                 random_l=20, contrast=0.3, saturation=0.3, rand_mirror=True, inter_method=10,
                 **MEANS)
    outs = [run(config, img, index=i)[0] for i in range(3)]
    assert np.array_equal(outs[0], run(config, img, index=0)[0])
    assert not np.array_equal(outs[0], outs[1])
    assert all(np.isfinite(o).all() for o in outs)


def test_random_size_square_crop():
    img = smooth_image(100, 120, seed=10)
    config = cfg(data_shape=(3, 30, 30), min_crop_size=40, max_crop_size=80, rand_crop=True,
                 dtype="uint8", layout="NHWC")
    out, plan = run(config, img, index=2)
    x, y, w, h = plan.crop
    assert w == h and 40 <= w <= 80 and x + w <= 120 and y + h <= 100
    ref = cv2.resize(img[y:y + h, x:x + w], (30, 30))
    assert np.abs(out.astype(int) - ref).max() <= 1  # recpipe._resize: OpenCV's within 1
    exact, _ = run(dataclasses.replace(config, dct_scaling=False), img, index=2)
    assert np.array_equal(exact, ref)
    with pytest.raises(DecodeError, match="max_crop_size"):
        run(config, smooth_image(60, 60))


# ------------------------------------------------------------------------------------ DCT scale


def test_decode_scale_choice():
    aug = Augmenter(cfg(data_shape=(3, 224, 224), resize=256))
    scales = [(1, 1), (7, 8), (3, 4), (5, 8), (1, 2), (3, 8), (1, 4), (1, 8)]
    plan = aug.plan(1000, 1000, sample_rng(0, 0, 0))
    # the 224 crop covers 875 source pixels: 1/2 keeps 437 >= 224, 1/4 gives 218 < 224
    assert aug.decode_scale(plan, scales) == (1, 2)
    small = aug.plan(300, 300, sample_rng(0, 0, 0))
    assert aug.decode_scale(small, scales) == (1, 1)
    off = Augmenter(cfg(data_shape=(3, 224, 224), resize=256, dct_scaling=False))
    assert off.decode_scale(off.plan(1000, 1000, sample_rng(0, 0, 0)), scales) == (1, 1)


def test_scaled_decode_path_close_to_full():
    # features ~64 px wide: the comparison checks geometry, not aliasing of the linear resize
    img = smooth_image(800, 640, seed=11, cell=64)
    data = cv2.imencode(".jpg", img[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()
    dec = get_decoder("auto")
    config = cfg(data_shape=(3, 96, 96), random_resized_crop=True, min_random_area=0.3,
                 max_aspect_ratio=0.25, dtype="float32")
    aug = Augmenter(config)
    used = set()
    for i in range(6):
        plan = aug.plan(800, 640, sample_rng(2, 0, i))
        scale = aug.decode_scale(plan, dec.scales)
        used.add(scale)
        full, scaled = np.empty(aug.out_shape, np.float32), np.empty(aug.out_shape, np.float32)
        aug.apply(dec.decode(data), plan, full)
        aug.apply(dec.decode(data, scale=scale), plan, scaled)
        assert np.abs(full - scaled).mean() < 3
    assert used - {(1, 1)}


# ------------------------------------------------------------------------------------ threads


def test_apply_from_many_threads_matches_serial():
    images = [smooth_image(90 + i, 100, seed=i) for i in range(6)]
    config = cfg(data_shape=(3, 48, 48), random_resized_crop=True, min_random_area=0.3,
                 max_aspect_ratio=0.25, rand_mirror=True, brightness=0.2, **MEANS, **STDS)
    aug = Augmenter(config)

    def sample(i):
        img = images[i % len(images)]
        plan = aug.plan(img.shape[0], img.shape[1], sample_rng(5, 0, i))
        out = np.empty(aug.out_shape, aug.dtype)
        aug.apply(img, plan, out)
        return out

    expected = [sample(i) for i in range(24)]
    mismatches, errors = [], []

    def work(start):
        try:
            for i in range(start, 24, 4):
                if not np.array_equal(sample(i), expected[i]):
                    mismatches.append(i)
        except Exception as e:  # noqa: BLE001 - a thread's error, reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and not mismatches


def test_float_and_uint8_paths_agree():
    img = smooth_image(64, 64, seed=12)
    raw, _ = run(cfg(data_shape=(3, 40, 40), rand_mirror=True, dtype="uint8"), img, index=1)
    flt, _ = run(cfg(data_shape=(3, 40, 40), rand_mirror=True), img, index=1)
    assert math.isclose(float(np.abs(flt - raw).max()), 0.0, abs_tol=1e-6)


# ------------------------------------------------------------------------------------ regions

TRAIN_KW = dict(data_shape=(3, 64, 64), random_resized_crop=True, min_random_area=0.08,
                max_random_area=1.0, min_aspect_ratio=3 / 4, max_aspect_ratio=4 / 3,
                rand_mirror=True, dtype="uint8")


def photo_jpeg(h, w, seed, cell=6):
    img = smooth_image(h, w, seed=seed, cell=cell)
    return cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 92])[1].tobytes()


def roi_and_full(aug, dec, data, plan):
    via_roi = np.empty(aug.out_shape, aug.dtype)
    img, window = aug.decode(dec, data, plan)
    aug.apply(img, plan, via_roi, window=window)
    full = np.empty(aug.out_shape, aug.dtype)  # the whole image at the same DCT scale
    aug.apply(dec.decode(data, scale=aug.decode_scale(plan, dec.scales)), plan, full)
    return via_roi, full, window


def test_decode_box_is_the_crop_without_a_resize_step():
    aug = Augmenter(cfg(**TRAIN_KW))
    plan = aug.plan(300, 200, sample_rng(0, 0, 3))
    x, y, w, h = plan.crop
    assert aug.decode_box(plan, (1, 1)) == (x, y, x + w, y + h)


def test_decode_box_none_when_the_whole_image_is_needed():
    plan_of = lambda aug: aug.plan(120, 100, sample_rng(0, 0, 0))  # noqa: E731
    for kw in (dict(max_rotate_angle=10), dict(pad=4), dict(data_shape=(3, 200, 200)),
               dict(resize=80, dct_scaling=False)):
        aug = Augmenter(cfg(**{"data_shape": (3, 64, 64), **kw}))
        assert aug.decode_box(plan_of(aug), (1, 1)) is None, kw


@pytest.mark.parametrize("layout,dtype,dct", [("NCHW", "uint8", True), ("NHWC", "float32", True),
                                              ("NCHW", "uint8", False)])
def test_region_path_equals_full_decode_path_for_random_resized_crop(layout, dtype, dct):
    dec = get_decoder("auto")
    extra = MEANS if dtype != "uint8" else {}
    aug = Augmenter(cfg(**{**TRAIN_KW, "layout": layout, "dtype": dtype}, dct_scaling=dct,
                        **extra))
    scales = set()
    for i in range(8):
        data = photo_jpeg(150 + 7 * i, 190 - 5 * i, seed=i)
        plan = aug.plan(*dec.size(data), sample_rng(1, 0, i))
        scales.add(aug.decode_scale(plan, dec.scales))
        via_roi, full, window = roi_and_full(aug, dec, data, plan)
        if dec.roi:
            assert window is not None
        # libjpeg's column crop is widened so its upsampling seam stays outside the crop:
        # the pixels the crop reads are the full decode's, so the outputs are the same
        assert np.abs(via_roi.astype(np.float64) - full).max() <= 1e-3
    assert (1, 1) in scales and (len(scales) > 1) == dct  # both the exact and the scaled case


def test_region_path_close_to_resize_then_crop():
    """val (resize + center crop): the part is resized with the whole image's factors from a
    start on the resize grid, so sample positions match the full path to ~0.02 px."""
    dec = get_decoder("auto")
    aug = Augmenter(cfg(data_shape=(3, 64, 64), resize=80, dtype="uint8"))
    for i in range(8):
        data = photo_jpeg(130 + 9 * i, 170 - 4 * i, seed=10 + i)
        plan = aug.plan(*dec.size(data), sample_rng(2, 0, i))
        via_roi, full, window = roi_and_full(aug, dec, data, plan)
        diff = np.abs(via_roi.astype(int) - full)
        assert diff.mean() < 0.5 and diff.max() <= 16


def test_apply_checks_the_window_covers_the_crop():
    aug = Augmenter(cfg(**TRAIN_KW))
    img = smooth_image(100, 120, seed=3)
    plan = aug.plan(100, 120, sample_rng(0, 0, 1))
    x, y, w, h = plan.crop
    out = np.empty(aug.out_shape, aug.dtype)
    part = np.ascontiguousarray(img[y:y + h, x:x + w])
    aug.apply(part, plan, out, window=(x, y, 100, 120))
    ref = np.empty(aug.out_shape, aug.dtype)
    aug.apply(img, plan, ref)
    assert np.array_equal(out, ref)
    with pytest.raises(ValueError, match="cover"):
        aug.apply(part[1:], plan, out, window=(x, y, 100, 120))


def test_thread_reused_rng_matches_sample_rng():
    for args in ((0, 0, 0), (7, 3, 12345), (2 ** 90 + 1, 5, 2 ** 40)):
        fresh = sample_rng(*args)
        reused = Augmenter.sample_rng(*args)
        assert np.array_equal(fresh.random(64), reused.random(64))
        assert np.array_equal(fresh.standard_normal(3), reused.standard_normal(3))
    aug = Augmenter(cfg(**TRAIN_KW, brightness=0.2, pca_noise=0.1))
    assert aug.plan(90, 70, Augmenter.sample_rng(4, 1, 9)) == aug.plan(90, 70, sample_rng(4, 1, 9))


@pytest.mark.parametrize("name", ["opencv", "libjpeg"])
def test_a_random_crop_of_an_upscaled_small_resize_decodes(name):
    """resize below the output size, then a random crop: the crop lies in the upscaled image,
    not in the resized one. The plain-crop shortcut of reduced-scale decodes used to cut an
    empty part there and cv2.resize raised (found by tests/decode/test_native_random.py)."""
    if name not in available_decoders():
        pytest.skip(f"decoder {name} is not available")
    dec = get_decoder(name)
    aug = Augmenter(cfg(data_shape=(3, 24, 21), resize=10, rand_crop=True, dtype="uint8"))
    exact = Augmenter(cfg(data_shape=(3, 24, 21), resize=10, rand_crop=True, dtype="uint8",
                          dct_scaling=False))
    data = photo_jpeg(89, 233, seed=4)
    upscaled = 0
    for sample in range(24):
        plan = aug.plan(*dec.size(data), sample_rng(729, 3, sample))
        upscaled += plan.upscale is not None and plan.crop[0] > plan.resized_size[1]
        out = np.empty(aug.out_shape, aug.dtype)
        img, window = aug.decode(dec, data, plan)
        aug.apply(img, plan, out, window=window)
        ref = np.empty(exact.out_shape, exact.dtype)
        img, window = exact.decode(dec, data, plan)
        exact.apply(img, plan, ref, window=window)
        assert np.abs(out.astype(int) - ref).mean() < 12  # the same part of the image
    assert upscaled  # the case that failed: a crop starting right of the resized width
