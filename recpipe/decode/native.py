"""The contract between the Python path and ``recpipe._batch``, the native run decoder.

``run_options`` is the gate: it decides whether a ``RecordDecoder``'s runs go to C, and returns
the ``RunOptions`` C is given (None: the Python path). ``RunOptions`` is the named run
description: the renderer's options first (``RenderOptions``: the planner's, then the
renderer's; the Python path's ``Renderer`` is prepared from the same, so both paths plan and
render with the same C), then the run's; ``recpipe._batch`` parses it field by field and
exports the names in order as ``OPTION_FIELDS`` (and the planner's uniform slots as
``DRAW_SLOTS``), which the tests compare with this module.

The gate is an allow-list: ``NATIVE_AUGMENT_FIELDS`` names the ``AugmentConfig`` fields C
knows. A run goes to C only when every other field is at its default, so a field added to
``AugmentConfig`` takes the Python path until it is added here and to the C.
"""

from dataclasses import MISSING, fields
from typing import NamedTuple, Optional

from .._optional import extension
from .augment.geometry import scale_bits
from .augment.render import RenderOptions

__all__ = ["NATIVE_AUGMENT_FIELDS", "NATIVE_DTYPES", "RenderOptions", "RunOptions",
           "augment_is_native", "native_module", "run_options"]

# AugmentConfig fields recpipe's C plans and renders (csrc/kernels/render.h)
NATIVE_AUGMENT_FIELDS = frozenset({
    "data_shape", "resize", "rand_crop", "random_resized_crop", "min_random_area",
    "max_random_area", "min_aspect_ratio", "max_aspect_ratio", "rand_mirror", "mirror",
    "brightness", "contrast", "saturation", "mean_r", "mean_g", "mean_b", "std_r", "std_g",
    "std_b", "scale", "dtype", "layout", "dct_scaling",
    # gray output (data_shape C=1), MXNet's contrast/illumination, PCA lighting, HLS shift
    "max_random_contrast", "max_random_illumination", "pca_noise", "random_h", "random_s",
    "random_l",
    # MXNet's affine step and pad
    "max_rotate_angle", "rotate", "rotate_list", "max_shear_ratio", "max_random_scale",
    "min_random_scale", "max_img_size", "min_img_size", "pad", "fill_value",
    # every inter_method, random-size crops
    "inter_method", "min_crop_size", "max_crop_size",
})
NATIVE_DTYPES = ("uint8", "float32", "float16")
# the most rotate_list angles a run takes (MAX_ROTATE_LIST in csrc/batch/options.h)
MAX_ROTATE_LIST = 64


class RunOptions(NamedTuple):
    """What ``recpipe._batch.fill`` is told about a run (in ``OPTION_FIELDS`` order): the
    ``RenderOptions`` fields, then the run's (csrc/batch/options.h's RUN_FIELDS)."""

    # the planner's (csrc/plan/plan.h's PLAN_FIELDS; Planner.options)
    out_h: int
    out_w: int
    resize: int
    rand_crop: bool
    mirror: bool
    rand_mirror: bool
    rrc: bool
    min_area: float
    max_area: float
    aspect_low: float
    aspect_high: float
    brightness: float
    contrast: float
    saturation: float
    max_contrast: float
    max_illumination: float
    pca_noise: float
    random_h: int
    random_s: int
    random_l: int
    affine: bool
    max_shear_ratio: float
    max_rotate_angle: int
    rotate: int
    rotate_list: tuple
    min_random_scale: float
    max_random_scale: float
    min_img_size: float
    max_img_size: float
    pad: int
    inter_method: int
    min_crop_size: int
    max_crop_size: int
    # the renderer's (csrc/kernels/render_fields.h's RENDER_FIELDS; RenderOptions)
    nchw: bool
    gains: tuple  # (float, float, float) per channel, after scale / std
    offsets: tuple  # (float, float, float) per channel, -mean * gain
    gain_r: float
    gain_g: float
    gain_b: float
    channels: int
    mean_r: float
    mean_g: float
    mean_b: float
    fill_value: int
    dct_scaling: bool
    resize_kernel: bool
    # the run's (csrc/batch/options.h's RUN_FIELDS)
    label_width: int
    fast_dct: bool
    fast_upsample: bool
    strict: bool
    max_pixels: int  # 0: no limit
    max_bytes: int  # largest decoded region
    check_rest: bool  # integrity="strict": entropy-decode the rest of the scan to EOI
    max_scans: int  # JPEGs with more scans are refused, 0: no limit
    scales: int  # bits 1, 2, 4: DCT scales 1/2, 1/4, 1/8 offered
    id_labels: bool  # labels from an id table (an imglist's), passed to fill beside the run


def _default(field):
    if field.default is not MISSING:
        return field.default
    if field.default_factory is not MISSING:
        return field.default_factory()
    return MISSING  # required (data_shape): no default to compare with


def augment_is_native(config):
    """True when ``recpipe._batch`` renders ``config`` (an ``AugmentConfig``) itself: every
    field outside ``NATIVE_AUGMENT_FIELDS`` at its default, 1 or 3 channels, uint8, float32 or
    float16, at most ``MAX_ROTATE_LIST`` rotate_list angles. (A sample C leaves, e.g. one
    whose affine warp is not bilinear, is rendered by the Python path one by one.)"""
    for field in fields(config):
        if field.name in NATIVE_AUGMENT_FIELDS:
            continue
        default = _default(field)
        if default is MISSING or getattr(config, field.name) != default:
            return False
    shifts = (config.random_h, config.random_s, config.random_l)
    return (config.channels in (1, 3) and config.dtype in NATIVE_DTYPES
            and len(config.rotate_list) <= MAX_ROTATE_LIST
            and max(abs(int(v)) for v in shifts) < 1 << 30)  # (C holds the limits as int)


def native_module():
    """``recpipe._batch``, or None when it is not built."""
    return extension("_batch")


def run_options(augmenter, decoder, *, label_width=1, id_labels=False) -> Optional[RunOptions]:
    """The ``RunOptions`` of runs decoded with ``decoder`` and ``augmenter``, or None when they
    take the Python path (no ``recpipe._batch``, no augmenter, an augmentation outside the
    allow-list, PCA lighting without numpy's own sampler linked in C, a decoder not decoding regions
    with ``recpipe._batch``). The caller checks what is not about the augmentation: a local
    file. ``id_labels``: labels come from an id table the caller passes to ``fill``
    (``labels.IdLabels``), not from the record headers."""
    module = native_module()
    if module is None or augmenter is None or not augment_is_native(augmenter.config):
        return None
    if augmenter.config.pca_noise > 0 and not getattr(module, "PCA_NATIVE", 0):
        return None  # built without numpy's normal sampler: the Python path draws with numpy
    region = decoder.region_options()
    if region is None:
        return None
    fast_dct, fast_upsample, strict, max_pixels, max_bytes, check_rest, max_scans = region
    rendered = augmenter.renderer.options._asdict()  # the planner's fields, then its own
    rendered.update(zip(RenderOptions._fields, augmenter.planner.options))
    return RunOptions(
        **rendered, label_width=int(label_width), fast_dct=bool(fast_dct),
        fast_upsample=bool(fast_upsample), strict=bool(strict), max_pixels=int(max_pixels),
        max_bytes=int(max_bytes), check_rest=bool(check_rest), max_scans=int(max_scans),
        scales=scale_bits(decoder.scales), id_labels=bool(id_labels))
