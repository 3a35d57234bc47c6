"""Geometry: which DCT scale and which pixels of a decode a plan needs, and how its crop maps
onto a reduced-scale or windowed decode (boxes, aligned parts, bilinear axes)."""

import functools
import math

from .. import resize as fast_resize

__all__ = ["PAYING_SCALES", "aligned_crop", "decode_box", "decode_scale", "is_linear",
           "linear_axes", "mapped_box", "resize_then_crop_box", "resolve_inter"]

# DCT scales worth decoding at (see decode_scale)
PAYING_SCALES = frozenset({(1, 2), (1, 4), (1, 8)})


def mapped_box(plan, full_h, full_w):
    """plan.source_box on an image of ``full_h x full_w`` (the source decoded at a DCT scale),
    rounded to whole pixels, at least one pixel, inside the image."""
    x0, y0, x1, y1 = plan.source_box
    src_h, src_w = plan.source_size
    fy, fx = full_h / src_h, full_w / src_w
    left = min(max(0, int(round(x0 * fx))), full_w - 1)
    top = min(max(0, int(round(y0 * fy))), full_h - 1)
    right = max(left + 1, min(full_w, int(round(x1 * fx))))
    bottom = max(top + 1, min(full_h, int(round(y1 * fy))))
    return left, top, right, bottom


def aligned_crop(plan, full_h, full_w):
    """((left, right, kx), (top, bottom, ky)): the part of a ``full_h x full_w`` decode that a
    plain crop of the resized image needs, starting at a pixel that maps (nearly) onto pixel
    (kx, ky) of the resized image."""
    x, y, w, h = plan.crop
    res_h, res_w = plan.resized_size
    return aligned_axis(x, w, full_w, res_w), aligned_axis(y, h, full_h, res_h)


@functools.lru_cache(maxsize=4096)
def aligned_axis(start, length, full, resized, budget=48):
    """(first, end, k) along one axis: the part starts at source pixel ``first`` ~= k * full /
    resized, the candidate k below ``start`` (at most ``budget`` source pixels further out;
    k = 0 is exact) whose grid position is nearest to a whole pixel; ``end`` reaches past the
    interpolation taps of the last needed pixel."""
    step = full / resized
    first, k, best = 0, 0, 1.0
    low = max(0, start - 3 - int(budget / step))
    for cand in range(start - 3, low - 1, -1):
        pos = cand * step
        err = abs(round(pos) - pos)
        if err < best:
            first, k, best = int(round(pos)), cand, err
            if err < 0.01:
                break
    end = min(full, first + int(math.ceil((start - k + length) * step)) + 3)
    return first, end, k


def resize_then_crop_box(plan, full_h, full_w):
    """(x0, y0, x1, y1): the pixels of a ``full_h x full_w`` decode that resizing it to
    ``plan.resized_size`` and keeping ``plan.crop`` samples (``fast_resize`` axes)."""
    x, y, w, h = plan.crop
    res_h, res_w = plan.resized_size
    top, bottom = fast_resize.taps_span(h, y, full_h / res_h, full_h)
    left, right = fast_resize.taps_span(w, x, full_w / res_w, full_w)
    return left, top, right, bottom


def is_linear(method, old_hw, new_hw):
    return resolve_inter(method, old_hw, new_hw) == 1  # cv2.INTER_LINEAR


def resolve_inter(method, old_hw, new_hw):
    """MXNet's GetInterMethod for 9 (auto); drawn values pass through."""
    if method != 9:
        return method
    if new_hw[0] > old_hw[0] and new_hw[1] > old_hw[1]:
        return 2
    if new_hw[0] < old_hw[0] and new_hw[1] < old_hw[1]:
        return 3
    return 1


def decode_scale(config, plan, scales):
    """Smallest DCT scale (num, den) in ``scales`` keeping the planned crop at >= output
    resolution; (1, 1) when dct_scaling is off, the plan warps/pads, or none qualifies.

    Only 1/2, 1/4 and 1/8 are considered: libjpeg-turbo's other M/8 scales use unvectorised
    scaled IDCTs and decode no faster (7/8 and 3/4 slower) than full size (BENCHMARKS.md).
    """
    if not config.dct_scaling or plan.affine is not None or config.pad:
        return (1, 1)
    out_h, out_w = config.out_hw
    scales = [s for s in scales if tuple(s) in PAYING_SCALES]
    x0, y0, x1, y1 = plan.source_box
    need_w = out_w / (x1 - x0)
    need_h = out_h / (y1 - y0)
    src_h, src_w = plan.source_size
    best = (1, 1)
    for num, den in scales:
        if num >= den or num * best[1] >= best[0] * den:
            continue
        f_w = -(-src_w * num // den) / src_w
        f_h = -(-src_h * num // den) / src_h
        if f_w >= need_w and f_h >= need_h:
            best = (num, den)
    return best


def decode_box(config, plan, scale, linear_resize):
    """Integer box ``(x0, y0, x1, y1)`` of the image decoded at ``scale`` that rendering reads
    for ``plan`` when given a window, or None when it needs the whole image: an affine warp,
    ``pad`` or upscaling, or a resize step with ``dct_scaling`` off (MXNet's full-image
    resize-then-crop, kept exact). ``linear_resize``: bilinear resizes run in the C kernel.

    Without a resize step at full scale the box is the planned crop itself and the result is
    identical to a whole-image decode's. Otherwise the crop is mapped onto the decoded image
    and resized to the output in one step, as for reduced DCT scales.
    """
    if plan.affine is not None or plan.upscale is not None or config.pad:
        return None
    if scale[0] == scale[1] and plan.resized_size == plan.source_size:
        x, y, w, h = plan.crop
        return x, y, x + w, y + h
    if not config.dct_scaling:
        return None
    src_h, src_w = plan.source_size
    num, den = scale
    full_h, full_w = (src_h * num + den - 1) // den, (src_w * num + den - 1) // den
    if not plan.resize_crop:
        if linear_resize and is_linear(plan.inter[0], (full_h, full_w), plan.resized_size):
            return resize_then_crop_box(plan, full_h, full_w)
        (left, right, _), (top, bottom, _) = aligned_crop(plan, full_h, full_w)
        return left, top, right, bottom
    return mapped_box(plan, full_h, full_w)


def linear_axes(plan, img, window, out_hw):
    """``(y_axis, x_axis)`` for ``fast_resize.linear_into`` when what is left to do is a
    bilinear resize of part of the decoded image ``img`` (then mirror and normalise) into an
    ``out_hw`` output, else None:

    - resize step (maybe through a DCT scale), then a plain crop (val): the crop's part of
      the resize grid, sampled where resizing the whole image would sample it;
    - a crop resized to the output from a reduced-scale or windowed decode: the crop box
      mapped onto the decode (as the renderer's scaled region);
    - no resize step: the crop box, resized to the output (random-resized crop) or copied.
    MXNet's whole-image resize followed by a resized crop stays on the OpenCV path.
    """
    if plan.affine is not None or plan.upscale is not None:
        return None
    full = img.shape[:2] if window is None else (window[2], window[3])
    wx, wy = (window[0], window[1]) if window is not None else (0, 0)
    resized = plan.resized_size != plan.source_size
    if not plan.resize_crop and (resized or full != plan.source_size):
        if not is_linear(plan.inter[0], full, plan.resized_size):
            return None
        (res_h, res_w), (x, y) = plan.resized_size, plan.crop[:2]
        return (fast_resize.Axis(-wy, full[0], y, full[0] / res_h),
                fast_resize.Axis(-wx, full[1], x, full[1] / res_w))
    if plan.resize_crop and (full != plan.source_size or (window is not None and resized)):
        left, top, right, bottom = mapped_box(plan, *full)
        box = (bottom - top, right - left)
        if not is_linear(plan.inter[2], box, out_hw):
            return None
        return (fast_resize.Axis(top - wy, box[0], 0.0, box[0] / out_hw[0]),
                fast_resize.Axis(left - wx, box[1], 0.0, box[1] / out_hw[1]))
    if resized:
        return None
    x, y, w, h = plan.crop
    if plan.resize_crop and not is_linear(plan.inter[2], (h, w), out_hw):
        return None
    return (fast_resize.Axis(y - wy, h, 0.0, h / out_hw[0]),
            fast_resize.Axis(x - wx, w, 0.0, w / out_hw[1]))
