"""The contract between the Python path and ``recpipe._batch``, the native run decoder.

``run_options`` is the gate: it decides whether a ``RecordDecoder``'s runs go to C, and returns
the ``RunOptions`` C is given (None: the Python path). ``RunOptions`` is the named run
description; ``recpipe._batch`` parses it field by field from one table and exports the names
in order as ``OPTION_FIELDS`` (and the uniform slots its planner reads as ``DRAW_SLOTS``), which
the tests compare with this module.

The gate is an allow-list: ``NATIVE_AUGMENT_FIELDS`` names the ``AugmentConfig`` fields C
renders. A run goes to C only when every other field is at its default, so a field added to
``AugmentConfig`` takes the Python path until it is added here and to ``recpipe/_batch.c``.
"""

from dataclasses import MISSING, fields
from typing import NamedTuple, Optional, Tuple

import numpy as np

from .._optional import extension
from .augment.config import aspect_range
from .augment.geometry import PAYING_SCALES

__all__ = ["NATIVE_AUGMENT_FIELDS", "NATIVE_DTYPES", "RunOptions", "augment_is_native",
           "native_module", "run_options"]

# AugmentConfig fields recpipe._batch renders (with the value limits of ``augment_is_native``)
NATIVE_AUGMENT_FIELDS = frozenset({
    "data_shape", "resize", "rand_crop", "random_resized_crop", "min_random_area",
    "max_random_area", "min_aspect_ratio", "max_aspect_ratio", "rand_mirror", "mirror",
    "brightness", "contrast", "saturation", "mean_r", "mean_g", "mean_b", "std_r", "std_g",
    "std_b", "scale", "dtype", "layout",
    # nativeinter: every inter_method but bicubic (see augment_is_native), random-size crops
    "inter_method",
    "min_crop_size",
    "max_crop_size",
})
NATIVE_DTYPES = ("uint8", "float32", "float16")
# the DCT scales C may decode at, as the bits of RunOptions.scales
_SCALE_BITS = ((1, (1, 2)), (2, (1, 4)), (4, (1, 8)))


class RunOptions(NamedTuple):
    """What ``recpipe._batch.fill`` is told about a run (in ``OPTION_FIELDS`` order)."""

    out_h: int
    out_w: int
    nchw: bool
    rand_crop: bool
    mirror: bool
    rand_mirror: bool
    gains: Tuple[float, float, float]  # per channel, after scale / std
    offsets: Tuple[float, float, float]  # per channel, -mean * gain
    label_width: int
    fast_dct: bool
    fast_upsample: bool
    strict: bool
    max_pixels: int  # 0: no limit
    max_bytes: int  # largest decoded region
    check_rest: bool  # integrity="strict": entropy-decode the rest of the scan to EOI
    max_scans: int  # JPEGs with more scans are refused, 0: no limit
    resize: int  # shorter-edge resize, -1: none
    rrc: bool  # random-resized crop
    min_area: float
    max_area: float
    aspect_low: float
    aspect_high: float
    brightness: float  # colour jitter limits, 0: off
    contrast: float
    saturation: float
    scales: int  # bits 1, 2, 4: DCT scales 1/2, 1/4, 1/8 offered
    gain_r: float  # the gains unrounded (float16 NHWC output rounds value * gain in double)
    gain_g: float
    gain_b: float
    # nativeinter
    inter_method: int  # ImageRecordIter's: 0-4, 9 auto, 10 drawn per resize
    min_crop_size: int  # random-size square crop, -1: off
    max_crop_size: int
    id_labels: bool  # labels from an id table (an imglist's), passed to fill beside the run


def _default(field):
    if field.default is not MISSING:
        return field.default
    if field.default_factory is not MISSING:
        return field.default_factory()
    return MISSING  # required (data_shape): no default to compare with


def augment_is_native(config):
    """True when ``recpipe._batch`` renders ``config`` (an ``AugmentConfig``) itself: every
    field outside ``NATIVE_AUGMENT_FIELDS`` at its default, 3 channels, uint8, float32 or
    float16 (float16: without colour jitter),
    no affine step (an aspect range without a random-resized crop is MXNet's affine one), and
    not bicubic throughout (``inter_method=2``: OpenCV hands 8-bit bicubic resizes to Intel IPP,
    whose arithmetic C does not reproduce; with 9 or 10 a bicubic sample alone goes to Python)."""
    for field in fields(config):
        if field.name in NATIVE_AUGMENT_FIELDS:
            continue
        default = _default(field)
        if default is MISSING or getattr(config, field.name) != default:
            return False
    # float16 with colour jitter takes the Python path: its reference jitters in numpy, not in
    # the colour kernel C shares with float32
    jitter = config.brightness or config.contrast or config.saturation
    return (config.channels == 3 and config.dtype in NATIVE_DTYPES
            and not (config.dtype == "float16" and jitter) and not config.affine_active
            and config.inter_method != 2)


def native_module():
    """``recpipe._batch``, or None when it is not built."""
    return extension("_batch")


def _per_channel(values) -> Tuple[float, float, float]:
    """Three floats, one per channel (``augment_is_native`` admits 3 channels only)."""
    first, second, third = (float(value) for value in values)
    return first, second, third


def run_options(augmenter, decoder, *, label_width=1, id_labels=False) -> Optional[RunOptions]:
    """The ``RunOptions`` of runs decoded with ``decoder`` and ``augmenter``, or None when they
    take the Python path (no ``recpipe._batch``, no augmenter, an augmentation outside the
    allow-list, a C kernel not built or not chosen, a decoder not decoding regions with
    ``recpipe._jpegroi``). ``id_labels``: labels come from an id table the caller passes to
    ``fill`` (``labels.IdLabels``), not from the record headers."""
    if native_module() is None or augmenter is None:
        return None
    config, renderer, planner = augmenter.config, augmenter.renderer, augmenter.planner
    # float16 (no jitter, see augment_is_native) is written by cv2 in Python, not the colour kernel
    colour_matches = renderer.kernels.colour or config.dtype == "float16"
    if not (augment_is_native(config) and renderer.kernels.resize and colour_matches):
        return None
    region = decoder.region_options()
    if region is None:
        return None
    fast_dct, fast_upsample, strict, max_pixels, max_bytes, check_rest, max_scans = region
    if augmenter.dtype != np.uint8:
        gains, offsets = renderer.fixed_terms
    else:
        gains, offsets = (1.0,) * 3, (0.0,) * 3
    offered = {tuple(scale) for scale in decoder.scales}
    scales = sum(bit for bit, scale in _SCALE_BITS if scale in offered and scale in PAYING_SCALES)
    out_h, out_w = config.out_hw
    low, high = aspect_range(config)
    return RunOptions(
        out_h=out_h, out_w=out_w, nchw=config.layout == "NCHW", rand_crop=bool(config.rand_crop),
        mirror=bool(config.mirror), rand_mirror=bool(config.rand_mirror),
        gains=_per_channel(gains), offsets=_per_channel(offsets),
        label_width=int(label_width), fast_dct=bool(fast_dct),
        fast_upsample=bool(fast_upsample), strict=bool(strict), max_pixels=int(max_pixels),
        max_bytes=int(max_bytes), check_rest=bool(check_rest), max_scans=int(max_scans),
        resize=int(config.resize), rrc=planner.random_resized,
        min_area=float(config.min_random_area), max_area=float(config.max_random_area),
        aspect_low=float(low), aspect_high=float(high), brightness=float(config.brightness),
        contrast=float(config.contrast), saturation=float(config.saturation), scales=scales,
        gain_r=float(gains[0]), gain_g=float(gains[1]), gain_b=float(gains[2]),
        inter_method=int(config.inter_method), min_crop_size=int(config.min_crop_size),
        max_crop_size=int(config.max_crop_size), id_labels=bool(id_labels))
