"""Bilinear resize of part of a decoded image straight into a batch slot (``recpipe._resize``).

One C call replaces OpenCV's resize, the crop, the mirror, the HWC -> CHW split and the float
normalisation of the common augmentation paths, and can start the output anywhere on the resize
grid (resize-then-crop without resizing the cropped-away part, which lets the decoder skip it).
Sampling positions and weights are OpenCV's INTER_LINEAR ones; the arithmetic is float32 with
one rounding, so pixel values equal ``cv2.resize``'s within 1.

An axis is ``Axis(offset, length, shift, scale)``: output index ``i`` samples the source at
``(i + shift + 0.5) * scale - 0.5``, clamped to ``[0, length - 1]`` and moved by ``offset``
(where that line starts in the array given). ``cv2.resize(src[a:b], n)`` along one axis is
``Axis(a, b - a, 0, (b - a) / n)``; resizing a whole ``length``-pixel line to ``size`` and
keeping pixels ``[k, k + n)`` is ``Axis(0, length, k, length / size)``.
"""

import math
from typing import NamedTuple

import numpy as np

from .._optional import native

__all__ = ["Axis", "linear_into", "taps_span"]


class Axis(NamedTuple):
    offset: int
    length: int
    shift: float
    scale: float


def linear_into(src, out, y_axis, x_axis, *, mirror=False, nchw=True, gains=None, offsets=None):
    """Resize part of ``src`` (uint8 ``(H, W, C)``, C 1 or 3) into ``out`` (uint8 or float32,
    ``(C, h, w)`` when ``nchw`` else ``(h, w, C)``, C-contiguous), mirrored when asked; float32
    output is ``value * gains[c] + offsets[c]``. Raises ValueError when a sampled pixel lies
    outside ``src``."""
    channels = src.shape[2]
    out_h, out_w = (out.shape[1], out.shape[2]) if nchw else (out.shape[0], out.shape[1])
    gains = (1.0,) * channels if gains is None else tuple(gains)
    offsets = (0.0,) * channels if offsets is None else tuple(offsets)
    if not src.flags.c_contiguous:
        src = np.ascontiguousarray(src)
    native("_resize").linear(src, src.shape[0], src.shape[1], channels, out, out_h, out_w,
                             tuple(y_axis), tuple(x_axis), mirror, nchw, gains, offsets)


def taps_span(size, shift, scale, length):
    """``(first, end)``: the source pixels ``[first, end)`` of a ``length``-pixel line that
    ``size`` outputs of ``Axis(0, length, shift, scale)`` read, one pixel of margin included."""
    first = math.floor((shift + 0.5) * scale - 0.5)
    last = math.floor((size - 1 + shift + 0.5) * scale - 0.5) + 1
    return max(0, first - 1), min(length, last + 2)
