"""recpipe's pixels (the kernel library, csrc/kernels/render.h, which both decode paths render
with) equal OpenCV's on this machine: random configurations over the whole option space
(``native_diff.random_config``), each sample decoded once (a region at a DCT scale, or the
whole image, or a PNG) and rendered by ``Augmenter.apply`` and by the OpenCV reference renderer
(``opencv_reference.py``: cv2.resize, cv2.warpAffine, cv2.cvtColor's HLS, cv2.addWeighted,
NumPy's gray jitter, as the Python path rendered before). This is where cv2 parity is checked:
nothing checks it at run time.

``RECPIPE_PARITY_CONFIGS`` sets the number of configurations (default 2000, a few seconds)."""

import os

import cv2
import numpy as np
import pytest

from recpipe._optional import extension
from recpipe.decode.augment import Augmenter, sample_rng
from recpipe.decode.decoders import get_decoder
from recpipe.decode.native import NATIVE_AUGMENT_FIELDS
from recpipe.errors import DecodeError

from .native_diff import random_config
from .opencv_reference import ReferenceRenderer

CONFIGURATIONS = int(os.environ.get("RECPIPE_PARITY_CONFIGS", "2000"))
needs_kernels = pytest.mark.skipif(extension("_kernels") is None,
                                   reason="recpipe._kernels is not built")


def _images(rng, count=10):
    """(bytes, is_png): JPEGs of several kinds and sizes (tiny ones too), and PNGs."""
    out = []
    for i in range(count):
        tiny = i % 5 == 4
        h, w = (int(v) for v in rng.integers(1, 12, 2)) if tiny else \
            (int(v) for v in rng.integers(17, 200, 2))
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        if min(h, w) >= 5:
            img = cv2.GaussianBlur(img, (5, 5), 0)
        if i % 5 == 3:
            out.append((cv2.imencode(".png", img)[1].tobytes(), True))
            continue
        flags = [cv2.IMWRITE_JPEG_QUALITY, 90]
        if i % 3 == 1:
            flags += [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444]
        if i % 4 == 2:
            flags += [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]
        out.append((cv2.imencode(".jpg", img, flags)[1].tobytes(), False))
    return out


def _render_both(augmenter, reference, decoder, data, seed, whole):
    """(ours, theirs), or None when the sample cannot be planned (both paths raise that)."""
    rng = sample_rng(seed, 1, 3)
    try:
        plan = augmenter.plan(*decoder.size(data), rng)
    except DecodeError:
        return None
    if whole:  # a decoder without regions: the whole image at the planned scale
        img = decoder.decode(data, scale=augmenter.decode_scale(plan, decoder.scales),
                             channels=augmenter.config.channels)
        window = None
    else:
        img, window = augmenter.decode(decoder, data, plan)
    ours = np.full(augmenter.out_shape, 7, augmenter.dtype)
    theirs = np.full(augmenter.out_shape, 9, augmenter.dtype)
    augmenter.apply(img, plan, ours, window=window)
    reference.apply(img, plan, theirs, window=window)
    return ours, theirs


@needs_kernels
def test_random_configurations_render_opencvs_pixels():
    rng = np.random.default_rng(20261201)
    images = _images(rng)
    decoder = get_decoder("auto")
    compared, mismatches = 0, []
    for index in range(CONFIGURATIONS):
        values, config = random_config(rng, NATIVE_AUGMENT_FIELDS)
        if config is None:
            continue
        augmenter, reference = Augmenter(config), ReferenceRenderer(config)
        for number, (data, is_png) in enumerate(images):
            whole = is_png or bool(rng.integers(2))
            try:
                both = _render_both(augmenter, reference, decoder, data,
                                    int(rng.integers(1 << 30)), whole)
            except Exception as exc:  # noqa: BLE001 - a render that raises: a mismatch
                mismatches.append((index, number, values, f"raised {exc!r}"))
                continue
            if both is None:
                continue
            ours, theirs = both
            compared += 1
            if ours.tobytes() != theirs.tobytes():
                diff = np.flatnonzero(ours.ravel() != theirs.ravel())
                mismatches.append((index, number, values, f"{len(diff)} values differ, first "
                                   f"at {diff[:4].tolist()}"))
    assert not mismatches, f"{len(mismatches)} of {compared}: {mismatches[:3]}"
    assert compared > CONFIGURATIONS * 5
