"""Geometry: which DCT scale and which pixels of a decode a plan needs. The answers are the C
planner's (csrc/plan/geometry.h, through ``recpipe._plan``), the same that ``recpipe._batch``
and the renderer (``recpipe._kernels``) use: this module only translates."""

from ..._optional import native

__all__ = ["PAYING_SCALES", "decode_box", "decode_scale", "scale_bits"]

# DCT scales worth decoding at: libjpeg-turbo's other M/8 scales use unvectorised scaled IDCTs
# and decode no faster (7/8 and 3/4 slower) than full size (BENCHMARKS.md)
PAYING_SCALES = frozenset({(1, 2), (1, 4), (1, 8)})
# the bits of the scales the planner is offered (RunOptions.scales)
_SCALE_BITS = {(1, 2): 1, (1, 4): 2, (1, 8): 4}


def scale_bits(scales):
    """The bits of ``scales`` (``(num, den)`` pairs) the planner considers: 1/2, 1/4, 1/8."""
    return sum(bit for scale, bit in _SCALE_BITS.items() if scale in {tuple(s) for s in scales})


def decode_scale(config, plan, scales):
    """Smallest DCT scale (num, den) in ``scales`` keeping the planned crop at >= output
    resolution; (1, 1) when dct_scaling is off, the plan warps/pads, or none qualifies."""
    out_h, out_w = config.out_hw
    den, _ = native("_plan").geometry(plan.native, out_h, out_w, config.pad, scale_bits(scales),
                                      config.dct_scaling, False)
    return (1, den)


def decode_box(config, plan, scale, linear_resize):
    """Integer box ``(x0, y0, x1, y1)`` of the image decoded at ``scale`` that rendering reads
    for ``plan`` when given a window, or None when it needs the whole image (an affine warp,
    ``pad`` or upscaling, or a resize step with ``dct_scaling`` off: MXNet's full-image
    resize-then-crop, kept exact). ``linear_resize``: bilinear resizes run in the C kernel."""
    num, den = scale
    if num != 1 or den not in (1, 2, 4, 8):
        raise ValueError(f"decode_box: scale {scale} is not 1/1, 1/2, 1/4 or 1/8")
    out_h, out_w = config.out_hw
    return native("_plan").geometry(plan.native, out_h, out_w, config.pad, 0,
                                    config.dct_scaling, linear_resize, den)[1]
