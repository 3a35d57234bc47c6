"""Colour jitter, PCA lighting, mirror, normalisation and layout in one C call
(``recpipe._colour``), straight into a batch slot.

Same steps and order as ``Augmenter``'s NumPy path (float32, clipped to [0, 255] after each
step; see augment/render.py): ``ops`` are ``(op, alpha)`` pairs with op 0 brightness, 1
contrast (blend with the image's mean gray), 2 saturation (blend with each pixel's gray);
``pca`` is None or three RGB offsets. Results equal the NumPy path's to float rounding.
"""

import numpy as np

from .._optional import native

__all__ = ["jitter_into"]


def jitter_into(region, out, ops, pca, scratch, *, mirror=False, nchw=True, gains=None,
                offsets=None):
    """Jitter ``region`` (uint8 ``(H, W, 3)``) into ``out`` (uint8 or float32, ``(3, H, W)``
    when ``nchw`` else ``(H, W, 3)``); ``scratch`` is a float32 array of at least 3 x H x W
    values (reuse one per thread); float32 output is ``value * gains[c] + offsets[c]``."""
    if not region.flags.c_contiguous:
        region = np.ascontiguousarray(region)
    height, width = region.shape[:2]
    native("_colour").jitter(region, height, width, out, tuple(ops),
                             None if pca is None else tuple(float(v) for v in pca),
                             mirror, nchw, (1.0,) * 3 if gains is None else tuple(gains),
                             (0.0,) * 3 if offsets is None else tuple(offsets), scratch)
