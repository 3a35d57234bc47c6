"""Rendering: a decoded image and its ``SamplePlan`` -> one slot of the batch (crop, resize,
HLS shift, colour jitter, PCA noise, mirror, normalisation, layout).

Every pixel is recpipe's kernel library's (``recpipe._kernels``, csrc/kernels/render.h), the one
``recpipe._batch`` renders its runs with: this path and the native one differ only in where
the decoded rows come from. The renderer is prepared once from ``RenderOptions`` and called
with the GIL released. Two rare combinations are rendered here with OpenCV up to their
output-sized crop, then finished by the same kernels: an affine warp with an interpolation
other than bilinear, and an upscale to more than ``EXACT_UPSCALE_PIXELS``.
"""

from dataclasses import dataclass
from typing import NamedTuple, Tuple

import numpy as np

from ..._optional import native
from ...image.opencv import load_cv2
from ...image.opencv import resize as cv2_resize

__all__ = ["EXACT_UPSCALE_PIXELS", "Kernels", "RenderOptions", "Renderer", "render_options"]

# upscaled images up to this size are made as MXNet does (resize all, then crop); larger ones
# are cropped first (Renderer._upscaled_crop)
EXACT_UPSCALE_PIXELS = 16 << 20
_INTER_LINEAR, _INTER_AREA = 1, 3


@dataclass(frozen=True)
class Kernels:
    """Which resize rendering uses for bilinear resizes: ``resize`` True (the default, with
    ``dct_scaling`` and without affine warp or pad) the bilinear kernel straight into the batch
    (OpenCV's sampling positions and weights in float32, within 1 level of cv2.resize), False
    cv2.resize's own fixed-point arithmetic (MXNet's pixels). ``colour`` is kept for callers
    that name it: colour jitter always runs in the colour kernel."""

    resize: bool = True
    colour: bool = True

    @classmethod
    def available(cls):
        return cls(resize=True, colour=True)

    @classmethod
    def none(cls):
        return cls(resize=False, colour=False)


class RenderOptions(NamedTuple):
    """What the renderer (``recpipe._kernels.prepare``) is told about a configuration, in
    ``recpipe._kernels.OPTION_FIELDS`` order: the planner's options (``Planner.options``), then
    the renderer's own. ``recpipe.decode.native.RunOptions`` starts with these."""

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
    pca_noise: float  # PCA lighting, 0: off
    random_h: int  # HLS shift limits, 0: off
    random_s: int
    random_l: int
    affine: bool  # the affine warp runs (AugmentConfig.affine_active)
    max_shear_ratio: float
    max_rotate_angle: int
    rotate: int
    rotate_list: tuple  # of ints
    min_random_scale: float
    max_random_scale: float
    min_img_size: float
    max_img_size: float
    pad: int
    inter_method: int  # ImageRecordIter's: 0-4, 9 auto, 10 drawn per resize
    min_crop_size: int  # random-size square crop, -1: off
    max_crop_size: int
    # the renderer's (csrc/kernels/render_fields.h's RENDER_FIELDS)
    nchw: bool
    gains: Tuple[float, float, float]  # per channel, after scale / std
    offsets: Tuple[float, float, float]  # per channel, -mean * gain
    gain_r: float  # the gains unrounded (NHWC arithmetic, per-sample normalisation jitter)
    gain_g: float
    gain_b: float
    channels: int  # 1 (gray) or 3
    mean_r: float  # the means unrounded (per-sample offsets: -mean * gain * contrast + ...)
    mean_g: float
    mean_b: float
    fill_value: int  # the pad's and the affine warp's border
    dct_scaling: bool  # reduced-scale decodes (and decoding a window after a resize step)
    resize_kernel: bool  # bilinear resizes by the kernel straight into the batch


def _per_channel(values, fill=0.0) -> Tuple[float, float, float]:
    """Three floats, one per channel (gray: the one, then ``fill``)."""
    values = [float(value) for value in values]
    first, second, third = values + [float(fill)] * (3 - len(values))
    return first, second, third


def normalisation(config):
    """``(gains, offsets)``: ``value * gain + offset`` per output channel of float output."""
    means = (config.mean_r, config.mean_g, config.mean_b)[:config.channels]
    stds = (config.std_r, config.std_g, config.std_b)[:config.channels]
    gains = [float(config.scale) / float(s) for s in stds]
    return gains, [-float(m) * g for m, g in zip(means, gains)]


def render_options(config, planner_options, *, resize_kernel=True) -> RenderOptions:
    """The ``RenderOptions`` of ``config`` (an ``AugmentConfig``) and its planner's options;
    ``resize_kernel``: whether bilinear resizes may use the kernel straight into the batch
    (it does only with ``dct_scaling`` and without affine warp or pad)."""
    if config.dtype != "uint8":
        gains, offsets = normalisation(config)
    else:
        gains, offsets = [1.0] * 3, [0.0] * 3
    exact = _per_channel(gains, 1.0)
    means = _per_channel((config.mean_r, config.mean_g, config.mean_b)[:config.channels])
    kernel = bool(resize_kernel and config.dct_scaling and not config.affine_active
                  and not config.pad)
    planned = dict(zip(RenderOptions._fields, planner_options))
    return RenderOptions(**planned, nchw=config.layout == "NCHW",
                         gains=_per_channel(gains, 1.0), offsets=_per_channel(offsets),
                         gain_r=exact[0], gain_g=exact[1], gain_b=exact[2],
                         channels=int(config.channels), mean_r=means[0], mean_g=means[1],
                         mean_b=means[2], fill_value=int(config.fill_value),
                         dct_scaling=bool(config.dct_scaling), resize_kernel=kernel)


class Renderer:
    """Writes planned samples of one ``AugmentConfig`` into batch slots; shareable between
    threads. ``planner_options``: the planner's packed options (``Planner.options``);
    ``kernels``: ``Kernels`` (default: the bilinear kernel where it applies)."""

    def __init__(self, config, planner_options, kernels=None):
        kernels = Kernels.available() if kernels is None else kernels
        self.config = c = config
        self._out_h, self._out_w = c.out_hw
        self._channels = c.channels
        self._np_dtype = np.dtype(c.dtype)
        self.out_shape = (c.channels,) + c.out_hw if c.layout == "NCHW" else \
            c.out_hw + (c.channels,)
        self.options = render_options(c, planner_options, resize_kernel=kernels.resize)
        self.kernels = Kernels(resize=self.options.resize_kernel, colour=True)
        self._kernels = native("_kernels")
        self._prepared = self._kernels.prepare(self.options)

    def apply(self, img, plan, out, window=None):
        """Write the augmented sample into ``out`` (shape ``out_shape``, config dtype).

        ``img`` is the whole decoded image, or with ``window = (x, y, full_height, full_width)``
        (a ``decoders.Window``) the part of a ``full_height x full_width`` decode starting at
        (x, y) that covers ``decode_box``.
        """
        if out.shape != self.out_shape or out.dtype != self._np_dtype:
            raise ValueError(f"out must have shape {self.out_shape} and dtype {self._np_dtype}, "
                             f"got {out.shape} {out.dtype}")
        img = self._match_channels(img)
        x, y, full_h, full_w = (0, 0, -1, -1) if window is None else (int(v) for v in window)
        if not self._kernels.render(self._prepared, plan.native, img, x, y, full_h, full_w,
                                    out):
            self._finish(self._opencv_region(img, plan), plan, out)

    def _finish(self, region, plan, out):
        self._kernels.finish(self._prepared, plan.native, np.ascontiguousarray(region), out)

    def _match_channels(self, img):
        cv2 = load_cv2()
        if img.ndim == 2:
            img = img[:, :, None]
        have = img.shape[2]
        if have == self._channels:
            return img
        if self._channels == 1:
            code = cv2.COLOR_RGBA2GRAY if have == 4 else cv2.COLOR_RGB2GRAY
            return cv2.cvtColor(img, code)[:, :, None]
        if have == 1:
            return cv2.cvtColor(img, cv2.COLOR_GRAY2RGB)
        return np.ascontiguousarray(img[:, :, :3])

    # -- the two combinations the kernels leave here: made with OpenCV up to the region ---------

    def _resize(self, src, size_hw, method):
        inter = _resolve_inter(method, src.shape[:2], size_hw)
        out = cv2_resize(src, (size_hw[1], size_hw[0]), interpolation=inter)
        return out if out.ndim == 3 else out[:, :, None]

    def _opencv_region(self, img, plan):
        """MXNet's steps on the whole image (resize, warp, pad, upscale, crop, crop resize)."""
        region = self._full_image_crop(img, plan)
        if plan.resize_crop:
            region = self._resize(region, (self._out_h, self._out_w), plan.inter[2])
        return region

    def _full_image_crop(self, img, plan):
        cv2 = load_cv2()
        work = img
        if work.shape[:2] != plan.resized_size:
            work = self._resize(work, plan.resized_size, plan.inter[0])
        if plan.affine is not None:
            matrix, (new_h, new_w) = plan.affine
            inter = _resolve_inter(plan.inter[1], work.shape[:2], (new_h, new_w))
            fill = (self.config.fill_value,) * 3
            work = cv2.warpAffine(work, np.array(matrix, dtype=np.float32), (new_w, new_h),
                                  flags=inter, borderMode=cv2.BORDER_CONSTANT, borderValue=fill)
            work = work if work.ndim == 3 else work[:, :, None]
        if self.config.pad:
            pad, fill = self.config.pad, (self.config.fill_value,) * 3
            work = cv2.copyMakeBorder(work, pad, pad, pad, pad, cv2.BORDER_CONSTANT, value=fill)
            work = work if work.ndim == 3 else work[:, :, None]
        if plan.upscale is not None:
            up_h, up_w = plan.upscale
            if up_h * up_w > EXACT_UPSCALE_PIXELS:
                return self._upscaled_crop(work, plan)
            work = self._resize(work, plan.upscale, plan.inter[2])
        x, y, w, h = plan.crop
        return work[y:y + h, x:x + w]

    def _upscaled_crop(self, work, plan):
        """The crop of the upscaled image, computed from the source alone: each output pixel
        samples the source where ``cv2.resize`` to ``plan.upscale`` would (``(d + 0.5) / f -
        0.5``), so work and memory are the output's, not the upscaled image's (a 1x65500 image
        upscaled to 224 rows would be 3.3 gigapixels). Values are within a level or two of the
        full resize (warpAffine's 5-bit interpolation weights)."""
        cv2 = load_cv2()
        (up_h, up_w), (h, w) = plan.upscale, work.shape[:2]
        x, y, out_w, out_h = plan.crop
        fx, fy = w / up_w, h / up_h
        matrix = np.array([[fx, 0.0, (x + 0.5) * fx - 0.5], [0.0, fy, (y + 0.5) * fy - 0.5]],
                          dtype=np.float64)
        inter = plan.inter[2] if plan.inter[2] in (cv2.INTER_NEAREST, cv2.INTER_CUBIC) else \
            cv2.INTER_LINEAR
        out = cv2.warpAffine(work, matrix, (out_w, out_h), flags=inter | cv2.WARP_INVERSE_MAP,
                             borderMode=cv2.BORDER_REPLICATE)
        return out if out.ndim == 3 else out[:, :, None]


def _resolve_inter(method, old_hw, new_hw):
    """MXNet's choice for inter_method 9 (auto) by the sizes (the planner's, in C)."""
    return native("_plan").resolve_inter(method, *old_hw, *new_hw)
