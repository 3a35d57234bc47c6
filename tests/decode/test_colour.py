"""recpipe._colour (through recpipe.decode.colour) against the Augmenter's NumPy path."""

import numpy as np
import pytest

from recpipe.decode import colour
from recpipe.decode.augment import AugmentConfig, Augmenter, Kernels, sample_rng

from .test_augment import smooth_image


JITTER = dict(brightness=0.4, contrast=0.4, saturation=0.4)


def both_paths(config, img, index):
    """(C path output, NumPy path output) for one sample."""
    outs = []
    for fast in (True, False):
        aug = Augmenter(config, kernels=Kernels(colour=fast))
        plan = aug.plan(img.shape[0], img.shape[1], sample_rng(5, 0, index))
        out = np.empty(aug.out_shape, aug.dtype)
        aug.apply(img, plan, out)
        outs.append(out.astype(np.float64))
    return outs


@pytest.mark.parametrize("dtype", ["uint8", "float32"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("extra", [JITTER, dict(JITTER, pca_noise=0.1), dict(brightness=0.9)])
def test_c_path_equals_numpy_path(dtype, layout, extra):
    normalise = dict(mean_r=120.0, mean_g=110.0, std_b=50.0, scale=0.5) if dtype != "uint8" else {}
    config = AugmentConfig(data_shape=(3, 40, 48), random_resized_crop=True, rand_mirror=True,
                           dtype=dtype, layout=layout, **extra, **normalise)
    img = smooth_image(90, 110, seed=7)
    mirrored = 0
    for index in range(6):
        fast, slow = both_paths(config, img, index)
        # float rounding only; uint8 may round a .5 the other way
        assert np.abs(fast - slow).max() <= (1.0 if dtype == "uint8" else 1e-3)
        if dtype == "uint8":
            assert np.mean(fast == slow) > 0.99
        mirrored += Augmenter(config).plan(90, 110, sample_rng(5, 0, index)).mirror
    assert 0 < mirrored < 6  # both mirror branches ran


def test_ops_apply_in_the_given_order_with_clipping():
    region = smooth_image(16, 20, seed=8)
    scratch = np.empty(3 * 16 * 20, np.float32)
    out = np.empty((16, 20, 3), np.float32)
    colour.jitter_into(region, out, [(0, 3.0), (0, 0.5)], None, scratch, nchw=False)
    # brightness x3 clips at 255 before the x0.5: not the same as x1.5
    expected = np.clip(np.clip(region * 3.0, 0, 255) * 0.5, 0, 255)
    assert np.allclose(out, expected, atol=1e-3)
    gray = region.astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32)
    colour.jitter_into(region, out, [(1, 0.0)], None, scratch, nchw=False)
    assert np.allclose(out, gray.mean(), atol=1e-2)  # contrast 0: the mean gray everywhere
    colour.jitter_into(region, out, [(2, 0.0)], (10.0, -300.0, 0.0), scratch, nchw=False)
    assert np.allclose(out[:, :, 0], np.clip(gray + 10.0, 0, 255), atol=1e-2)
    assert (out[:, :, 1] == 0).all()  # PCA offset clipped at 0


def test_bad_arguments_raise():
    region = smooth_image(8, 8, seed=9)
    out = np.empty((3, 8, 8), np.uint8)
    scratch = np.empty(3 * 64, np.float32)
    with pytest.raises(ValueError, match="op must be"):
        colour.jitter_into(region, out, [(3, 1.0)], None, scratch)
    with pytest.raises(ValueError, match="scratch"):
        colour.jitter_into(region, out, [], None, scratch[:10])
    with pytest.raises(ValueError, match="dst"):
        colour.jitter_into(region, np.empty((3, 8, 7), np.uint8), [], None, scratch)
    with pytest.raises(ValueError, match="pca"):
        colour.jitter_into(region, out, [], (1.0, 2.0), scratch)
