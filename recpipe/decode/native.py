"""The contract between the Python path and ``recpipe._batch``, the native run decoder.

``run_options`` is the gate: it decides whether a ``RecordDecoder``'s runs go to C, and returns
the ``RunOptions`` C is given (None: the Python path). ``RunOptions`` is the named run
description: the planner's options first (``Planner.options``; C plans every sample with the
same planner the Python path calls, csrc/plan/plan.h, parsed by its one table), then the run's;
``recpipe._batch`` parses it field by field and exports the names in order as ``OPTION_FIELDS``
(and the planner's uniform slots as ``DRAW_SLOTS``), which the tests compare with this module.

The gate is an allow-list: ``NATIVE_AUGMENT_FIELDS`` names the ``AugmentConfig`` fields C
renders. A run goes to C only when every other field is at its default, so a field added to
``AugmentConfig`` takes the Python path until it is added here and to ``csrc/batch/batch.c``.
"""

import functools
import math
from dataclasses import MISSING, fields
from typing import NamedTuple, Optional, Tuple

import numpy as np

from .._optional import extension
from .augment.geometry import PAYING_SCALES

__all__ = ["MAX_ROTATE_LIST", "NATIVE_AUGMENT_FIELDS", "NATIVE_DTYPES", "RunOptions",
           "augment_is_native", "cubic_matches", "cubic_probes", "cv2_hls_is_native",
           "float_writer_matches",
           "geometric_is_native", "interp_is_native", "native_module",
           "run_options", "warp_lanes", "warp_probes"]

# AugmentConfig fields recpipe._batch renders (with the value limits of ``augment_is_native``)
NATIVE_AUGMENT_FIELDS = frozenset({
    "data_shape", "resize", "rand_crop", "random_resized_crop", "min_random_area",
    "max_random_area", "min_aspect_ratio", "max_aspect_ratio", "rand_mirror", "mirror",
    "brightness", "contrast", "saturation", "mean_r", "mean_g", "mean_b", "std_r", "std_g",
    "std_b", "scale", "dtype", "layout",
    # gray output (data_shape C=1), MXNet's contrast/illumination, PCA lighting,
    # HLS shift (csrc/batch/colour_steps.h)
    "max_random_contrast", "max_random_illumination",
    "pca_noise",
    "random_h", "random_s", "random_l",
    # MXNet's affine step and pad (csrc/kernels/warp.h; limits in augment_is_native)
    "max_rotate_angle", "rotate", "rotate_list", "max_shear_ratio", "max_random_scale",
    "min_random_scale", "max_img_size", "min_img_size", "pad", "fill_value",
    # every inter_method (see augment_is_native), random-size crops
    "inter_method",
    "min_crop_size",
    "max_crop_size",
})
# the most rotate_list angles C takes (MAX_ROTATE_LIST in csrc/batch/options.h)
MAX_ROTATE_LIST = 64
NATIVE_DTYPES = ("uint8", "float32", "float16")
# the DCT scales C may decode at, as the bits of RunOptions.scales
_SCALE_BITS = ((1, (1, 2)), (2, (1, 4)), (4, (1, 8)))


class RunOptions(NamedTuple):
    """What ``recpipe._batch.fill`` is told about a run (in ``OPTION_FIELDS`` order): first the
    planner's options (``recpipe._plan.OPTION_FIELDS``: ``Planner.options``, which C's one
    planner reads for every sample, csrc/plan/plan.h), then the run's."""

    # the planner's (csrc/plan/plan.h's PLAN_FIELDS; Planner.options)
    out_h: int
    out_w: int
    resize: int  # shorter-edge resize, -1: none
    rand_crop: bool
    mirror: bool
    rand_mirror: bool
    rrc: bool  # random-resized crop
    min_area: float
    max_area: float
    aspect_low: float
    aspect_high: float
    brightness: float  # colour jitter limits, 0: off
    contrast: float
    saturation: float
    max_contrast: float  # MXNet's max_random_contrast / max_random_illumination, 0: off
    max_illumination: float
    pca_noise: float  # PCA lighting, 0: off (needs recpipe._batch.PCA_NATIVE)
    random_h: int  # HLS shift limits, 0: off
    random_s: int
    random_l: int
    affine: bool  # the affine warp runs (AugmentConfig.affine_active)
    max_shear_ratio: float
    max_rotate_angle: int
    rotate: int
    rotate_list: tuple  # of ints, at most MAX_ROTATE_LIST
    min_random_scale: float
    max_random_scale: float
    min_img_size: float
    max_img_size: float
    pad: int
    inter_method: int  # ImageRecordIter's: 0-4, 9 auto, 10 drawn per resize
    min_crop_size: int  # random-size square crop, -1: off
    max_crop_size: int
    # the run's
    nchw: bool
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
    scales: int  # bits 1, 2, 4: DCT scales 1/2, 1/4, 1/8 offered
    gain_r: float  # the gains unrounded (float16 NHWC output rounds value * gain in double)
    gain_g: float
    gain_b: float
    # the output's channels, the means (MXNet's contrast/illumination)
    channels: int  # 1 (gray) or 3
    mean_r: float  # the means unrounded (per-sample offsets: -mean * gain * contrast + ...)
    mean_g: float
    mean_b: float
    # MXNet's affine step and pad (csrc/kernels/warp.h)
    fill_value: int
    warp_lanes: int  # OpenCV's warp block width on this machine (warp_lanes()), 0: no warp
    # labels
    id_labels: bool  # labels from an id table (an imglist's), passed to fill beside the run


def _default(field):
    if field.default is not MISSING:
        return field.default
    if field.default_factory is not MISSING:
        return field.default_factory()
    return MISSING  # required (data_shape): no default to compare with


def augment_is_native(config):
    """True when ``recpipe._batch`` renders ``config`` (an ``AugmentConfig``) itself: every
    field outside ``NATIVE_AUGMENT_FIELDS`` at its default, uint8, float32 or float16, 3
    channels or gray (gray: without colour jitter, PCA lighting or HLS shift), not float16 with
    both colour jitter and an HLS shift, not an HLS shift with MXNet's contrast/illumination,
    and, with MXNet's affine step or ``pad`` (geometric_is_native): 3 channels without PCA,
    MXNet's contrast/illumination or float16 jitter, no resize step, no random-resized crop,
    and a warp C reproduces on this machine (warp_lanes),
    and a non-bilinear interpolation (bicubic included: the Python path's bicubic resizes run
    with Intel IPP off, OpenCV's own arithmetic, which C reproduces) only for 3-channel output
    without HLS, PCA, MXNet's
    contrast/illumination or float16 jitter (interp_is_native)."""
    for field in fields(config):
        if field.name in NATIVE_AUGMENT_FIELDS:
            continue
        default = _default(field)
        if default is MISSING or getattr(config, field.name) != default:
            return False
    jitter = config.brightness or config.contrast or config.saturation or config.pca_noise > 0
    hls = config.random_h or config.random_s or config.random_l
    # float16 with colour jitter after an HLS shift: one value in ~10^4 lands one half-ulp off
    # the Python path's (found by tests/decode/test_native_random.py): Python renders it
    half_hls_jitter = config.dtype == "float16" and bool(jitter) and bool(hls)
    # an HLS shift with MXNet's per-sample illumination: float32 values one ulp off (same test)
    hls_norm_jitter = bool(hls) and bool(config.max_random_contrast
                                         or config.max_random_illumination)
    return (config.channels in (1, 3) and not (config.channels == 1 and (jitter or hls))
            and config.dtype in NATIVE_DTYPES and geometric_is_native(config)
            and interp_is_native(config) and not half_hls_jitter and not hls_norm_jitter)


def geometric_is_native(config):
    """True when C renders ``config``'s affine step and pad as
    ``Renderer._full_image_crop`` does, or there are none. C has cv2.warpAffine's bilinear
    kernel (uint8, BORDER_CONSTANT) but not cv2.resize's: the resize step before the warp or
    pad, the crop resize of a random-resized crop and non-bilinear warps stay on the Python
    path (upscaled samples are left to it one by one)."""
    if not (config.affine_active or config.pad):
        return True
    if (config.resize != -1 or config.random_resized_crop or config.inter_method != 1
            or config.max_crop_size != -1):  # (random-size crops: the planner's, not here)
        return False
    if config.affine_active and (warp_lanes() == 0
                                 or len(config.rotate_list) > MAX_ROTATE_LIST):
        return False
    # (the HLS shift is wired into the geometric path: MXNet's aug level 3)
    return _side_path_renders(config, hls=True)


@functools.lru_cache(maxsize=1)
def float_writer_matches():
    """True when this process's cv2.addWeighted (Renderer._write's float32 NCHW writer) computes
    as csrc/kernels/warp.h's float_table assumes: a fused multiply-add in blocks of 256 values but
    a last block shorter than 8, which it multiplies and adds in two roundings."""
    try:
        import cv2
    except ImportError:
        return False
    rng = np.random.default_rng(8)
    gain, offset = 0.4212780230587512, -99.88173
    f_gain, f_offset = np.float32(gain), np.float32(offset)
    for length in (7, 13, 257, 263, 264, 513, 1024, 1030, 1032, 2053, 3332):
        values = rng.integers(0, 256, (1, length), dtype=np.uint8)
        out = np.empty((1, length), np.float32)
        cv2.addWeighted(values, gain, values, 0.0, offset, dst=out, dtype=cv2.CV_32F)
        fused = (values.astype(np.float64) * np.float64(f_gain)
                 + np.float64(f_offset)).astype(np.float32)  # exact product: one rounding
        rest = length % 256
        if 0 < rest < 8:
            fused[:, length - rest:] = values[:, length - rest:].astype(np.float32) * f_gain \
                + f_offset
        if out.tobytes() != fused.tobytes():
            return False
    return True


def warp_probes(count=24):
    """warp_lanes' seeded (image, forward float32 matrix, out_h, out_w) cases whose rows end in
    a long scalar tail, where a wrong block width shows."""
    rng = np.random.default_rng(21)
    for _ in range(count):
        rows, cols = (int(v) for v in rng.integers(48, 96, 2))
        image = rng.integers(0, 256, (rows, cols, 3), dtype=np.uint8)
        angle, scale = math.radians(rng.uniform(-45, 45)), rng.uniform(0.7, 1.4)
        shear = rng.uniform(-0.3, 0.3)
        a, b = math.cos(angle) * scale, math.sin(angle) * scale
        forward = np.array([[a - shear * b, b + shear * a, rng.uniform(-9, 9)],
                            [-b, a, rng.uniform(-9, 9)]], dtype=np.float32)
        out_w = 32 * int(rng.integers(1, 3)) + int(rng.integers(17, 32))
        yield image, forward, int(rng.integers(48, 96)), out_w


@functools.lru_cache(maxsize=1)
def warp_lanes():
    """The block width (8, 16 or 32 columns) with which ``recpipe._batch``'s warp equals this
    process's cv2.warpAffine on seeded probes (OpenCV's SIMD dispatch decides it), or 0 when
    none does or either is missing: the affine step then stays on the Python path."""
    module = native_module()
    try:
        import cv2
    except ImportError:
        return 0
    if module is None or not hasattr(module, "warp_affine"):
        return 0
    probes = list(warp_probes())
    wanted = [cv2.warpAffine(image, forward, (out_w, out_h), flags=cv2.INTER_LINEAR,
                             borderMode=cv2.BORDER_CONSTANT, borderValue=(9, 9, 9))
              for image, forward, out_h, out_w in probes]
    for lanes in (16, 32, 8):
        if all(_native_warp(module, image, forward, out_h, out_w, 9, lanes) == want.tobytes()
               for (image, forward, out_h, out_w), want in zip(probes, wanted)):
            return lanes
    return 0


def _native_warp(module, image, forward, out_h, out_w, fill, lanes):
    rows, cols, channels = image.shape
    return module.warp_affine(np.ascontiguousarray(image), rows, cols, channels,
                              tuple(float(v) for v in np.asarray(forward).reshape(6)), out_h,
                              out_w, fill, lanes)


def interp_is_native(config):
    """True when C renders ``config``'s resizes: bilinear ones always, the others
    (csrc/kernels/interp.h, cv2.resize's arithmetic; bicubic as with IPP off,
    recpipe.image.opencv.resize, where cubic_matches) for 3-channel output without the colour
    recipes of csrc/batch/colour_steps.h, which are not wired into that path."""
    if config.inter_method == 1:
        return True
    if config.inter_method in (2, 9, 10) and not cubic_matches():  # resizes that may be bicubic
        return False
    return _side_path_renders(config, hls=False)


def cubic_probes():
    """cubic_matches' seeded (image, output h, w) cases: up and down, 1 and 3 channels, rows
    whose length leaves every remainder of OpenCV's 8-value blocks, tiny sources."""
    rng = np.random.default_rng(2)
    for case in range(16):
        h, w = (int(v) for v in rng.integers(1, 5 if case % 4 == 0 else 90, 2))
        out_h, out_w = int(rng.integers(1, 70)), 8 * int(rng.integers(1, 9)) + case % 8
        channels = 1 if case % 3 == 0 else 3
        yield rng.integers(0, 256, (h, w, channels), dtype=np.uint8), out_h, out_w


@functools.lru_cache(maxsize=1)
def cubic_matches():
    """True when ``recpipe._batch``'s bicubic resize equals this process's Python path's
    (cv2.resize with Intel IPP off, recpipe.image.opencv.resize) on seeded probes: OpenCV's own
    8-bit bicubic as its x86 build computes it; elsewhere (another OpenCV, another CPU family)
    bicubic and inter_method 9 and 10 stay on the Python path."""
    module = native_module()
    try:
        import cv2  # noqa: F401 (the probe needs OpenCV itself)

        from ..image.opencv import resize
    except ImportError:
        return False
    if module is None or not hasattr(module, "interp"):
        return False
    for image, out_h, out_w in cubic_probes():
        rows, cols, channels = image.shape
        want = resize(image, (out_w, out_h), interpolation=2).reshape(out_h, out_w, channels)
        got = np.zeros_like(want)
        if not (module.interp((rows, cols, channels), image, (out_h, out_w), got, out_w / cols,
                              out_h / rows, 2) and np.array_equal(got, want)):
            return False
    return True


def _side_path_renders(config, *, hls):
    """What the geometric and the interpolation paths share: 3-channel output without PCA
    lighting, MXNet's contrast/illumination, float16 jitter (or, unless ``hls``, an HLS shift),
    which csrc/batch/colour_steps.h renders on the main path only; float32 NCHW written through
    csrc/kernels/warp.h's tables only where they reproduce cv2's writer here."""
    jitter = config.brightness or config.contrast or config.saturation
    shifted = config.random_h or config.random_s or config.random_l
    if (config.channels != 3 or config.pca_noise > 0 or config.max_random_contrast
            or config.max_random_illumination or (config.dtype == "float16" and jitter)
            or (shifted and not hls)):
        return False
    if config.dtype == "float32" and config.layout == "NCHW" and not jitter:
        return float_writer_matches()
    return True


def native_module():
    """``recpipe._batch``, or None when it is not built."""
    return extension("_batch")


def _per_channel(values, fill=0.0) -> Tuple[float, float, float]:
    """Three floats, one per channel (gray: the one, then ``fill``)."""
    values = [float(value) for value in values]
    first, second, third = values + [float(fill)] * (3 - len(values))
    return first, second, third


def cv2_hls_is_native():
    """True when this host's OpenCV converts RGB<->HLS as ``recpipe._batch`` does: its AVX2
    build (8 float32 lanes, fused multiply-adds), which OpenCV dispatches to on any x86-64 CPU
    with AVX2 and FMA3; elsewhere the HLS shift stays on the Python path."""
    import cv2

    # "SSE SSE2 SSE3 *SSE4.1 ... *AVX2 *AVX512-SKX?": baseline, *dispatched, ?: not on this CPU
    return "AVX2" in (token.lstrip("*") for token in cv2.getCPUFeaturesLine().split())


@functools.lru_cache(maxsize=None)
def _normals_match(module):
    """True when ``module``'s normal draws (numpy's sampler, linked at build time) equal the
    numpy imported now: another numpy version might sample otherwise."""
    from .augment.rng import sample_rng

    for sample in range(16):
        rng = sample_rng(12345, 1, sample)
        rng.random(64)
        if tuple(rng.standard_normal(3)) != tuple(module.normals(12345, 0, sample, 1)):
            return False
    return True


def _colour_is_native(config, module):
    """The colour steps ``module`` (``recpipe._batch``) can render for ``config`` here."""
    if config.pca_noise > 0 and not (getattr(module, "PCA_NATIVE", 0) and _normals_match(module)):
        return False  # built without numpy's normal sampler, or another numpy's
    shifts = (config.random_h, config.random_s, config.random_l)
    if any(shifts) and (not cv2_hls_is_native() or max(abs(int(v)) for v in shifts) >= 1 << 30):
        return False  # (C holds the limits as int)
    return True


def run_options(augmenter, decoder, *, label_width=1, id_labels=False) -> Optional[RunOptions]:
    """The ``RunOptions`` of runs decoded with ``decoder`` and ``augmenter``, or None when they
    take the Python path (no ``recpipe._batch``, no augmenter, an augmentation outside the
    allow-list, a C kernel not chosen (``Kernels.none()``), a decoder not decoding regions with
    ``recpipe._batch``). The caller checks what is not about the augmentation: a local file.
    ``id_labels``: labels come from an id table the caller passes to ``fill``
    (``labels.IdLabels``), not from the record headers."""
    module = native_module()
    if module is None or augmenter is None:
        return None
    config, renderer, planner = augmenter.config, augmenter.renderer, augmenter.planner
    # the colour kernel C shares: for colour jitter and PCA lighting (any dtype), and for
    # 3-channel uint8/float32 crops taken one to one; float16 without jitter is written by cv2
    # in Python, gray output by the resize kernel alone
    jitter = config.brightness or config.contrast or config.saturation or config.pca_noise > 0
    colour_matches = (renderer.kernels.colour or config.channels == 1
                      or (config.dtype == "float16" and not jitter))
    geometric = bool(config.affine_active or config.pad)  # MXNet's affine step and pad: no resize kernel used
    if not (augment_is_native(config) and (renderer.kernels.resize or geometric)
            and colour_matches
            and _colour_is_native(config, module)):
        return None
    region = decoder.region_options()
    if region is None:
        return None
    fast_dct, fast_upsample, strict, max_pixels, max_bytes, check_rest, max_scans = region
    if augmenter.dtype != np.uint8:
        gains, offsets = renderer.fixed_terms
    else:
        gains, offsets = (1.0,) * 3, (0.0,) * 3
    exact_gains = _per_channel(gains, 1.0)
    means = _per_channel((config.mean_r, config.mean_g, config.mean_b)[:config.channels])
    offered = {tuple(scale) for scale in decoder.scales}
    scales = sum(bit for bit, scale in _SCALE_BITS if scale in offered and scale in PAYING_SCALES)
    planned = dict(zip(RunOptions._fields, planner.options))  # packed once (Planner.options)
    return RunOptions(
        **planned,
        nchw=config.layout == "NCHW", gains=_per_channel(gains, 1.0),
        offsets=_per_channel(offsets), label_width=int(label_width), fast_dct=bool(fast_dct),
        fast_upsample=bool(fast_upsample), strict=bool(strict), max_pixels=int(max_pixels),
        max_bytes=int(max_bytes), check_rest=bool(check_rest), max_scans=int(max_scans),
        scales=scales, gain_r=exact_gains[0], gain_g=exact_gains[1], gain_b=exact_gains[2],
        channels=int(config.channels), mean_r=means[0], mean_g=means[1], mean_b=means[2],
        fill_value=int(config.fill_value),
        warp_lanes=warp_lanes() if config.affine_active else 0, id_labels=bool(id_labels))
