"""recpipe._resize (through recpipe.decode.resize) against OpenCV's INTER_LINEAR resize."""

import cv2
import numpy as np
import pytest

from recpipe.decode import resize as fast_resize
from recpipe.decode.augment import AugmentConfig, Augmenter, Kernels, sample_rng
from recpipe.decode.decoders import get_decoder, roi_available

from .test_augment import photo_jpeg, smooth_image

Axis = fast_resize.Axis


def resize_box(src, box, out_hw, **kw):
    """Ours for cv2.resize(src[top:bottom, left:right], out) written as (h, w, C)."""
    left, top, right, bottom = box
    out = np.empty(out_hw + (src.shape[2],), np.uint8)
    fast_resize.linear_into(src, out, Axis(top, bottom - top, 0.0, (bottom - top) / out_hw[0]),
                            Axis(left, right - left, 0.0, (right - left) / out_hw[1]),
                            nchw=False, **kw)
    return out


def assert_within_one(ours, ref):
    diff = np.abs(ours.astype(int) - ref.astype(int))
    assert diff.max() <= 1
    assert (diff == 0).mean() > 0.7  # OpenCV's fixed-point rounding differs on a few values


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("box,out_hw", [
    ((10, 5, 110, 95), (40, 50)),      # downscale, different factors per axis
    ((0, 0, 120, 100), (224, 224)),    # upscale
    ((3, 7, 40, 20), (13, 37)),        # tiny, odd sizes
    ((50, 40, 51, 41), (8, 8)),        # one source pixel
])
def test_box_resize_matches_cv2(channels, box, out_hw):
    img = smooth_image(100, 120, channels=channels, seed=1, cell=3)
    left, top, right, bottom = box
    ref = cv2.resize(img[top:bottom, left:right], (out_hw[1], out_hw[0]),
                     interpolation=cv2.INTER_LINEAR)
    assert_within_one(resize_box(img, box, out_hw), ref.reshape(out_hw + (channels,)))


def test_identity_scale_is_an_exact_copy():
    img = smooth_image(60, 70, seed=2)
    assert np.array_equal(resize_box(img, (5, 6, 37, 30), (24, 32)), img[6:30, 5:37])


def test_resize_then_crop_samples_the_whole_image_grid():
    img = smooth_image(391, 378, seed=3, cell=4)
    res_h, res_w, x, y = 264, 256, 16, 20
    ref = cv2.resize(img, (res_w, res_h), interpolation=cv2.INTER_LINEAR)[y:y + 224, x:x + 224]
    out = np.empty((224, 224, 3), np.uint8)
    fast_resize.linear_into(img, out, Axis(0, 391, y, 391 / res_h), Axis(0, 378, x, 378 / res_w),
                            nchw=False)
    assert_within_one(out, ref)
    # the same from just the pixels taps_span names, passed as a window
    top, bottom = fast_resize.taps_span(224, y, 391 / res_h, 391)
    left, right = fast_resize.taps_span(224, x, 378 / res_w, 378)
    assert top > 0 and left > 0 and bottom < 391 and right < 378
    window = np.ascontiguousarray(img[top:bottom, left:right])
    from_window = np.empty_like(out)
    fast_resize.linear_into(window, from_window, Axis(-top, 391, y, 391 / res_h),
                            Axis(-left, 378, x, 378 / res_w), nchw=False)
    assert np.array_equal(from_window, out)


def test_mirror_layout_and_normalisation():
    img = smooth_image(80, 90, seed=4)
    axes = (Axis(4, 70, 0.0, 70 / 32), Axis(2, 80, 0.0, 80 / 40))
    hwc = np.empty((32, 40, 3), np.uint8)
    fast_resize.linear_into(img, hwc, *axes, nchw=False)
    chw = np.empty((3, 32, 40), np.uint8)
    fast_resize.linear_into(img, chw, *axes, mirror=True)
    assert np.array_equal(chw, hwc[:, ::-1].transpose(2, 0, 1))
    gains, offsets = (0.5, 2.0, -1.0), (-3.0, 1.0, 0.25)
    for nchw in (True, False):
        f32 = np.empty((3, 32, 40) if nchw else (32, 40, 3), np.float32)
        fast_resize.linear_into(img, f32, *axes, nchw=nchw, gains=gains, offsets=offsets)
        planes = f32 if nchw else f32.transpose(2, 0, 1)
        for c in range(3):
            assert np.allclose(planes[c], hwc[:, :, c] * gains[c] + offsets[c], atol=1e-5)


def test_bad_arguments_raise():
    img = smooth_image(20, 20, seed=5)
    out = np.empty((3, 8, 8), np.uint8)
    inside = (Axis(0, 20, 0.0, 2.5), Axis(0, 20, 0.0, 2.5))
    with pytest.raises(ValueError, match="cover"):
        fast_resize.linear_into(img[:10].copy(), out, *inside)
    with pytest.raises(ValueError, match="cover"):
        fast_resize.linear_into(img, out, Axis(5, 20, 0.0, 2.5), inside[1])
    with pytest.raises(ValueError, match="dst"):
        fast_resize.linear_into(img, np.empty((3, 8, 8), np.int16), *inside)
    with pytest.raises(ValueError, match="channels"):
        fast_resize.linear_into(np.zeros((20, 20, 2), np.uint8), np.empty((2, 8, 8), np.uint8),
                                *inside)
    with pytest.raises(ValueError, match="scale"):
        fast_resize.linear_into(img, out, Axis(0, 20, 0.0, 0.0), inside[1])


VAL_KW = dict(data_shape=(3, 64, 64), resize=72, dtype="uint8", layout="NHWC")


def sample(aug, dec, data, index):
    img, plan, window = aug.decode_planned(dec, data, sample_rng(0, 0, index))
    out = np.empty(aug.out_shape, aug.dtype)
    aug.apply(img, plan, out, window=window)
    return out.astype(np.float64)


@pytest.mark.skipif(not roi_available(), reason="region decoding (recpipe._batch) not built")
def test_val_region_path_equals_full_image_path_within_one():
    """resize + center crop from a tight region decode vs MXNet's exact whole-image path."""
    dec = get_decoder("turbojpeg")
    fast = Augmenter(AugmentConfig(**VAL_KW))
    exact = Augmenter(AugmentConfig(**VAL_KW, dct_scaling=False))
    for i in range(6):
        data = photo_jpeg(101 + 13 * i, 140 - 7 * i, seed=20 + i)
        plan = fast.plan(*dec.size(data), sample_rng(0, 0, i))
        box = fast.decode_box(plan, (1, 1))
        assert box[0] > 0 and box[1] > 0  # only the part the crop needs is decoded
        assert np.abs(sample(fast, dec, data, i) - sample(exact, dec, data, i)).max() <= 1


def test_fused_and_opencv_paths_agree_on_train_samples():
    dec = get_decoder("opencv")
    kw = dict(data_shape=(3, 48, 48), random_resized_crop=True, min_random_area=0.2,
              rand_mirror=True, dtype="float32", mean_r=120.0, std_g=50.0, scale=0.5)
    fused = Augmenter(AugmentConfig(**kw))
    assert fused.kernels.resize
    plain = Augmenter(AugmentConfig(**kw), kernels=Kernels(resize=False))
    assert not plain.kernels.resize
    for i in range(8):
        data = photo_jpeg(90 + 11 * i, 120, seed=40 + i)
        a, b = sample(fused, dec, data, i), sample(plain, dec, data, i)
        assert np.abs(a - b).max() <= 2  # <= 1 pixel level, times the gain of 2 on green
