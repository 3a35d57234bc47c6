"""The C extensions refuse sizes whose product overflows instead of writing out of bounds."""

import numpy as np
import pytest

BIG = 1 << 62
WRAPS = BIG + 1  # WRAPS * 4 * 3 == 12 modulo 2**64: matched a 12-byte buffer before the check


def test_resize_refuses_overflowing_sizes():
    resize = pytest.importorskip("recpipe._resize")
    src = np.zeros(12, np.uint8)
    dst = np.zeros(12, np.uint8)
    axis = (0, 2, 0.0, 1.0)
    for shape in ((WRAPS, 4, 3, 2, 2), (2, 2, 3, WRAPS, 4), (BIG, BIG, 3, 2, 2)):
        h, w, c, out_h, out_w = shape
        with pytest.raises(ValueError):
            resize.linear(src, h, w, c, dst, out_h, out_w, axis, axis, False, True,
                          None, None)


def test_colour_refuses_overflowing_sizes():
    colour = pytest.importorskip("recpipe._colour")
    src = np.zeros(12, np.uint8)
    dst = np.zeros(12, np.uint8)
    scratch = np.zeros(12, np.float32)
    for h, w in ((WRAPS, 4), (BIG, BIG), (-2, -2)):
        with pytest.raises(ValueError):
            colour.jitter(src, h, w, dst, [], None, False, True, None, None, scratch)
