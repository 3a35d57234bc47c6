"""ImageRecordIter's augmentations, planned up front per sample and written straight into a batch.

``AugmentConfig`` holds ImageRecordIter's augmentation keywords with MXNet 1.9.1's names and
defaults. ``Augmenter(config)`` then works in two steps per sample:

1. ``plan(height, width, rng)`` makes every random draw for the sample (crop box, mirror, colour
   factors and their order, PCA alpha, normalisation jitter, random interpolation) in a fixed
   order from one block of uniforms, so a sample's result depends only on its RNG, not on
   threads. ``decode_scale(plan, scales)`` then says how small a JPEG DCT scale the decode may
   use without losing output resolution, and ``decode_box(plan, scale)`` which pixels of that
   decode the sample reads; ``decode(decoder, data, plan)`` decodes just that (only the crop
   region with a region-decoding backend) and returns ``(pixels, window)``.
2. ``apply(img, plan, out, window=None)`` crops, resizes, mirrors, jitters, normalises and writes into
   ``out`` (a view into the batch buffer, ``(C, H, W)`` or ``(H, W, C)``), with OpenCV calls
   writing into ``out`` or small per-thread scratch buffers.

Order of operations (MXNet ``DefaultImageAugmenter::Process`` then the iterator's normalise):
resize the shorter edge to ``resize`` (other edge ``resize * long // short``) -> affine warp
(rotate/shear/random scale/aspect/img size clamps) -> ``pad`` -> crop: random-resized crop (up to
10 tries of area x aspect, each box resized to the output; if all fail, the final crop below),
or a random-size square crop (``min/max_crop_size``) resized to the output, or the final crop:
an image smaller than the output is first upscaled keeping its aspect, then the center (random
with ``rand_crop``) window of the output size is cut -> HLS shift -> brightness / contrast /
saturation in random order -> PCA lighting noise -> mirror -> ``(x - mean) * scale / std``
(with the optional ``max_random_contrast`` / ``max_random_illumination`` of ImageNormalizeParam)
-> RGB channel order. ``uint8`` output is raw pixels (like ImageRecordUInt8Iter), so mean/std/
scale must stay at their defaults then.

Where recpipe differs from MXNet (documented choices, RNG streams are ours anyway):
- the random-resized-crop aspect ratio is drawn log-uniformly in its range (torchvision / Gluon
  style); colour jitter runs in float32 with clipping to [0, 255] after each step instead of
  rounding to uint8 between steps;
- when the image was decoded at a reduced DCT scale, the planned crop box is mapped onto the
  smaller image and resized to the output in one step (instead of resize-then-crop), which is
  not bit-identical to the full-size path (the full-size path is, to OpenCV's own results).
- with ``dct_scaling`` on (the default), bilinear resizes go through ``recpipe._resize``
  (``resize.py``): one C call resizes, crops, mirrors, lays out and normalises straight into the
  batch, with OpenCV's sampling positions and weights but float32 arithmetic, so pixels equal
  OpenCV's within 1 level (about 1 value in 8 differs, by 1). A resize step followed by a plain
  crop (val: resize 256 + center crop) samples the crop's part of the whole image's resize grid,
  so the decoder only decodes the pixels the crop needs. Without the extension, that case
  resizes a part starting where the resize grid meets a source pixel to within ~0.01-0.08 px
  (at most a few levels off). ``dct_scaling=False`` keeps every step on OpenCV: MXNet's pixels.
- colour jitter, PCA noise, mirror and normalisation run in one C call (``recpipe._colour``,
  ``colour.py``) when it is built, equal to the NumPy path here to float rounding.
- misspelled or unsupported keywords raise instead of being silently ignored.
"""

import functools
import math
import threading
from dataclasses import dataclass, fields
from typing import NamedTuple, Optional, Tuple

import numpy as np

from ..errors import DecodeError
from . import colour
from . import resize as fast_resize

__all__ = [
    "AugmentConfig",
    "Augmenter",
    "SamplePlan",
    "sample_rng",
    "AUGMENT_KEYWORDS",
    "UNSUPPORTED_KEYWORDS",
    "PAYING_SCALES",
    "resize_shorter_size",
]

_MASK64 = (1 << 64) - 1
_RRC_TRIES = 10
_DTYPES = ("uint8", "float32", "float16")
_LAYOUTS = ("NCHW", "NHWC")
_INTER_METHODS = (0, 1, 2, 3, 4, 9, 10)
# AlexNet PCA lighting (RGB), as in mx.image.LightingAug / gluoncv
_PCA_EIGVAL = np.array([55.46, 4.794, 1.148], dtype=np.float32)
_PCA_EIGVEC = np.array([[-0.5675, 0.7192, 0.4009],
                        [-0.5808, -0.0045, -0.8140],
                        [-0.5836, -0.6948, 0.4203]], dtype=np.float32)
# DCT scales worth decoding at (see decode_scale)
PAYING_SCALES = frozenset({(1, 2), (1, 4), (1, 8)})
_GRAY_WEIGHTS = np.array([0.299, 0.587, 0.114], dtype=np.float32)

# ImageRecordIter keywords we know but do not implement: raise, never ignore
UNSUPPORTED_KEYWORDS = {
    "mean_img": "a mean image file is not supported; use mean_r/mean_g/mean_b",
    "mean_a": "4-channel output is not supported (data_shape C must be 1 or 3)",
    "std_a": "4-channel output is not supported (data_shape C must be 1 or 3)",
    "aug_seq": "only the default augmenter (aug_default) exists",
}


# ------------------------------------------------------------------------------------------------
# per-sample RNG


def sample_rng(seed, epoch, index):
    """The RNG of one sample: Philox keyed by ``seed`` with the counter at ``(index, epoch)``.

    Creating it costs a few microseconds (no SeedSequence hashing); streams of different
    samples do not overlap unless one sample draws 2**128 blocks.
    """
    if seed < 0 or epoch < 0 or index < 0:
        raise ValueError(f"seed, epoch and index must be >= 0, got {seed}, {epoch}, {index}")
    bits = np.random.Philox(key=seed & ((1 << 128) - 1),
                            counter=[0, 0, index & _MASK64, epoch & _MASK64])
    return np.random.Generator(bits)


class _ThreadRng(threading.local):
    """One Philox generator per thread, re-keyed per sample (see Augmenter.sample_rng)."""

    def __init__(self):
        self.bits = np.random.Philox(key=0)
        self.generator = np.random.Generator(self.bits)
        self.state = self.bits.state


_THREAD_RNG = _ThreadRng()


def _thread_sample_rng(seed, epoch, index):
    if seed < 0 or epoch < 0 or index < 0:
        raise ValueError(f"seed, epoch and index must be >= 0, got {seed}, {epoch}, {index}")
    local = _THREAD_RNG
    state = local.state
    key = seed & ((1 << 128) - 1)
    inner = state["state"]
    inner["key"][0], inner["key"][1] = key & _MASK64, key >> 64
    counter = inner["counter"]
    counter[0] = counter[1] = 0
    counter[2], counter[3] = index & _MASK64, epoch & _MASK64
    state["buffer_pos"] = 4  # empty output buffer, as a new Philox has
    state["has_uint32"] = state["uinteger"] = 0
    local.bits.state = state
    return local.generator


# ------------------------------------------------------------------------------------------------
# configuration


# upscaled images up to this size are made as MXNet does (resize all, then crop); larger ones
# are cropped first (Augmenter._upscaled_crop)
_EXACT_UPSCALE_PIXELS = 16 << 20


@dataclass(frozen=True)
class AugmentConfig:
    """ImageRecordIter's augmentation/normalisation keywords (MXNet 1.9.1 names and defaults),
    plus ``dtype``, ``layout`` and ``dct_scaling`` (allow reduced-scale JPEG decode)."""

    data_shape: Tuple[int, int, int]
    resize: int = -1
    rand_crop: bool = False
    random_resized_crop: bool = False
    min_random_area: float = 1.0
    max_random_area: float = 1.0
    min_aspect_ratio: Optional[float] = None
    max_aspect_ratio: float = 0.0
    rand_mirror: bool = False
    mirror: bool = False
    brightness: float = 0.0
    contrast: float = 0.0
    saturation: float = 0.0
    pca_noise: float = 0.0
    pad: int = 0
    fill_value: int = 255
    mean_r: float = 0.0
    mean_g: float = 0.0
    mean_b: float = 0.0
    std_r: float = 1.0
    std_g: float = 1.0
    std_b: float = 1.0
    scale: float = 1.0
    inter_method: int = 1
    # affine / crop-size / HLS options of DefaultImageAugmentParam
    max_rotate_angle: int = 0
    rotate: int = -1
    rotate_list: Tuple[int, ...] = ()
    max_shear_ratio: float = 0.0
    max_random_scale: float = 1.0
    min_random_scale: float = 1.0
    max_img_size: float = 1e10
    min_img_size: float = 0.0
    max_crop_size: int = -1
    min_crop_size: int = -1
    random_h: int = 0
    random_s: int = 0
    random_l: int = 0
    # ImageNormalizeParam jitter
    max_random_contrast: float = 0.0
    max_random_illumination: float = 0.0
    # recpipe
    dtype: str = "float32"
    layout: str = "NCHW"
    dct_scaling: bool = True

    def __post_init__(self):
        shape = tuple(int(v) for v in _parse_tuple(self.data_shape))
        object.__setattr__(self, "data_shape", shape)
        angles = tuple(int(v) for v in _parse_tuple(self.rotate_list))
        object.__setattr__(self, "rotate_list", angles)
        _validate(self)

    @classmethod
    def from_kwargs(cls, **kwargs):
        """Build from ImageRecordIter keywords (values may be strings, as MXNet passes them).

        Unknown keywords raise ValueError naming them (MXNet would silently ignore a typo);
        known-but-unsupported ones raise NotImplementedError; conflicting combinations raise
        ValueError the way MXNet's CHECKs fail.
        """
        known = {f.name: f for f in fields(cls)}
        values = {}
        if kwargs.get("dtype", "") is None:  # the default: float32 when normalising, as MXNet
            del kwargs["dtype"]
            probe = cls.from_kwargs(**kwargs, dtype="float32")
            kwargs["dtype"] = "float32" if probe.normalizes else "uint8"
        for key, value in kwargs.items():
            if key in UNSUPPORTED_KEYWORDS:
                raise NotImplementedError(f"ImageRecordIter keyword {key!r}: "
                                          f"{UNSUPPORTED_KEYWORDS[key]}")
            if key not in known:
                raise ValueError(f"unknown augmentation keyword {key!r}")
            values[key] = _coerce(key, value, cls.__dataclass_fields__[key].default)
        if "data_shape" not in values:
            raise ValueError("data_shape is required")
        return cls(**values)

    @property
    def channels(self):
        return self.data_shape[0]

    @property
    def out_hw(self):
        return self.data_shape[1], self.data_shape[2]

    @property
    def affine_active(self):
        """True when the affine warp step runs (MXNet's condition)."""
        aspect = (not self.random_resized_crop
                  and (self.max_aspect_ratio != 0 or self.min_aspect_ratio is not None))
        return (self.max_rotate_angle > 0 or self.max_shear_ratio > 0 or self.rotate > 0
                or bool(self.rotate_list) or self.max_random_scale != 1
                or self.min_random_scale != 1 or aspect or self.max_img_size != 1e10
                or self.min_img_size != 0)

    @property
    def normalizes(self):
        """True when mean/std/scale or normalise jitter change pixel values."""
        return (any(v != 0 for v in (self.mean_r, self.mean_g, self.mean_b))
                or any(v != 1 for v in (self.std_r, self.std_g, self.std_b))
                or self.scale != 1 or self.max_random_contrast != 0
                or self.max_random_illumination != 0)


AUGMENT_KEYWORDS = frozenset(f.name for f in fields(AugmentConfig))


def _parse_tuple(value):
    if isinstance(value, str):
        text = value.strip().strip("()[]")
        return tuple(float(v) if "." in v else int(v) for v in text.split(",") if v.strip())
    return tuple(value)


def _coerce(key, value, default):
    """Convert MXNet-style string values to the field's type."""
    if not isinstance(value, str) or key in ("dtype", "layout"):
        return value
    text = value.strip()
    if key in ("data_shape", "rotate_list"):
        return _parse_tuple(text)
    if text in ("None", ""):
        return None
    if isinstance(default, bool):
        if text.lower() in ("true", "1"):
            return True
        if text.lower() in ("false", "0"):
            return False
        raise ValueError(f"{key}: expected a boolean, got {value!r}")
    if isinstance(default, int) and not isinstance(default, bool):
        return int(float(text))
    return float(text)


def _validate(c):
    _validate_shape_and_types(c)
    _validate_crop(c)
    _validate_colour(c)


def _validate_shape_and_types(c):
    if len(c.data_shape) != 3 or min(c.data_shape) <= 0:
        raise ValueError(f"data_shape must be (C, H, W) with positive sizes, got {c.data_shape}")
    if c.data_shape[0] not in (1, 3):
        raise ValueError(f"data_shape: channel count C must be 1 or 3, got {c.data_shape[0]} "
                         f"in {c.data_shape}")
    if c.dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {_DTYPES}, got {c.dtype!r}")
    if c.layout not in _LAYOUTS:
        raise ValueError(f"layout must be one of {_LAYOUTS}, got {c.layout!r}")
    if c.inter_method not in _INTER_METHODS:
        raise ValueError(f"inter_method must be one of {_INTER_METHODS}, got {c.inter_method}")
    if c.resize != -1 and c.resize <= 0:
        raise ValueError(f"resize must be -1 (off) or positive, got {c.resize}")
    if c.pad < 0:
        raise ValueError(f"pad must be >= 0, got {c.pad}")
    if not 0 <= c.fill_value <= 255:
        raise ValueError(f"fill_value must be in 0..255, got {c.fill_value}")
    if min(c.std_r, c.std_g, c.std_b) <= 0:
        raise ValueError("std_r, std_g and std_b must be > 0")
    if c.dtype == "uint8" and c.normalizes:
        raise ValueError("dtype='uint8' gives raw pixels (as ImageRecordUInt8Iter): mean_*, std_*, "
                         "scale, max_random_contrast and max_random_illumination need "
                         "dtype='float32' or 'float16'")


def _validate_crop(c):
    if c.random_resized_crop:
        if (c.min_random_scale != 1 or c.max_random_scale != 1 or c.min_crop_size != -1
                or c.max_crop_size != -1 or c.rand_crop):
            raise ValueError("random_resized_crop=True conflicts with min_random_scale, "
                             "max_random_scale, min_crop_size, max_crop_size and rand_crop")
        for key in ("max_rotate_angle", "max_shear_ratio", "rotate", "rotate_list",
                    "max_img_size", "min_img_size"):
            if getattr(c, key) != AugmentConfig.__dataclass_fields__[key].default:
                raise NotImplementedError(f"{key} together with random_resized_crop is not "
                                          "supported")
        if not 0 <= c.min_random_area <= c.max_random_area <= 1:
            raise ValueError("need 0 <= min_random_area <= max_random_area <= 1, got "
                             f"{c.min_random_area}, {c.max_random_area}")
    if c.random_resized_crop or c.affine_active:
        low, high = _aspect_range(c)
        if c.max_aspect_ratio < 0 or low <= 0 or low > high:
            raise ValueError(f"aspect ratio range [{low}, {high}] is invalid: need "
                             "0 < min_aspect_ratio <= max_aspect_ratio (or 0 <= max_aspect_ratio "
                             "< 1 without min_aspect_ratio)")
    if c.min_random_scale > c.max_random_scale or c.min_random_scale <= 0:
        raise ValueError("need 0 < min_random_scale <= max_random_scale")
    if c.max_crop_size != -1 or c.min_crop_size != -1:
        if not 0 < c.min_crop_size <= c.max_crop_size:
            raise ValueError("min_crop_size and max_crop_size must both be set with "
                             f"0 < min_crop_size <= max_crop_size, got {c.min_crop_size}, "
                             f"{c.max_crop_size}")


def _validate_colour(c):
    for key in ("brightness", "contrast", "saturation", "pca_noise", "max_random_contrast",
                "max_random_illumination", "max_shear_ratio"):
        if getattr(c, key) < 0:
            raise ValueError(f"{key} must be >= 0, got {getattr(c, key)}")
    if (c.random_h or c.random_s or c.random_l) and c.channels != 3:
        raise ValueError("random_h/random_s/random_l need 3 channels")
    if (c.saturation or c.pca_noise) and c.channels != 3:
        raise ValueError("saturation and pca_noise need 3 channels")


def _aspect_range(c):
    if c.min_aspect_ratio is not None:
        return c.min_aspect_ratio, c.max_aspect_ratio
    return 1 - c.max_aspect_ratio, 1 + c.max_aspect_ratio


# ------------------------------------------------------------------------------------------------
# the plan


class SamplePlan(NamedTuple):
    """Every decision for one sample. Sizes are (height, width); boxes are (x, y, w, h).

    ``crop`` is in the coordinates of ``crop_from`` (the image after resize/affine/pad, or its
    upscaled version when ``upscale`` is set); ``resize_crop`` says whether the crop is resized
    to the output (random-resized or random-size crop) or is already output-sized.
    """

    source_size: Tuple[int, int]
    resized_size: Tuple[int, int]
    affine: Optional[tuple]          # ((2x3 matrix rows), (height, width)) or None
    work_size: Tuple[int, int]       # after resize, affine and pad
    upscale: Optional[Tuple[int, int]]
    crop: Tuple[int, int, int, int]
    resize_crop: bool
    inter: Tuple[int, int, int]      # (resize step, affine, crop/upscale): 0-4 drawn, or 9
    mirror: bool
    hls: Optional[Tuple[int, int, int]]
    colour: Tuple[Tuple[int, float], ...]  # (op, alpha): 0 brightness, 1 contrast, 2 saturation
    pca: Optional[Tuple[float, float, float]]  # RGB offsets
    contrast: float
    illumination: float

    @property
    def source_box(self):
        """(x0, y0, x1, y1) in source pixels that the output is made of (floats)."""
        if self.affine is not None:
            return 0.0, 0.0, float(self.source_size[1]), float(self.source_size[0])
        x, y, w, h = self.crop
        from_h, from_w = self.upscale or self.work_size
        pad = (self.work_size[0] - self.resized_size[0]) // 2
        sy = self.resized_size[0] / self.source_size[0]
        sx = self.resized_size[1] / self.source_size[1]
        fy = self.work_size[0] / from_h
        fx = self.work_size[1] / from_w
        return ((x * fx - pad) / sx, (y * fy - pad) / sy,
                ((x + w) * fx - pad) / sx, ((y + h) * fy - pad) / sy)


# uniform slots of the per-sample block (fixed order)
_U_INTER = 0            # 3 slots
_U_AFFINE = 3           # shear, angle, scale, ratio, rotate_list index
_U_RRC = 8              # 10 tries x (area, ratio, x, y)
_U_CROP = 48            # crop size, x, y
_U_MIRROR = 51
_U_HLS = 52             # h, s, l
_U_ORDER = 55           # 3 keys
_U_COLOUR = 58          # brightness, contrast, saturation
_U_NORM = 61            # contrast, illumination
_N_UNIFORM = 64


def _mapped_box(plan, full_h, full_w):
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


def _aligned_crop(plan, full_h, full_w):
    """((left, right, kx), (top, bottom, ky)): the part of a ``full_h x full_w`` decode that a
    plain crop of the resized image needs, starting at a pixel that maps (nearly) onto pixel
    (kx, ky) of the resized image."""
    x, y, w, h = plan.crop
    res_h, res_w = plan.resized_size
    return _aligned_axis(x, w, full_w, res_w), _aligned_axis(y, h, full_h, res_h)


@functools.lru_cache(maxsize=4096)
def _aligned_axis(start, length, full, resized, budget=48):
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


def _resize_then_crop_box(plan, full_h, full_w):
    """(x0, y0, x1, y1): the pixels of a ``full_h x full_w`` decode that resizing it to
    ``plan.resized_size`` and keeping ``plan.crop`` samples (``fast_resize`` axes)."""
    x, y, w, h = plan.crop
    res_h, res_w = plan.resized_size
    top, bottom = fast_resize.taps_span(h, y, full_h / res_h, full_h)
    left, right = fast_resize.taps_span(w, x, full_w / res_w, full_w)
    return left, top, right, bottom


def _is_linear(method, old_hw, new_hw):
    return _resolve_inter(method, old_hw, new_hw) == 1  # cv2.INTER_LINEAR


def _randint(u, low, high):
    """Integer uniform in [low, high] from a uniform u in [0, 1)."""
    return min(high, low + int(u * (high - low + 1)))


def _resolve_inter(method, old_hw, new_hw):
    """MXNet's GetInterMethod for 9 (auto); drawn values pass through."""
    if method != 9:
        return method
    if new_hw[0] > old_hw[0] and new_hw[1] > old_hw[1]:
        return 2
    if new_hw[0] < old_hw[0] and new_hw[1] < old_hw[1]:
        return 3
    return 1


def resize_shorter_size(height, width, size):
    """MXNet's resize step: shorter edge -> size, other edge ``size * long // short``."""
    if height > width:
        return size * height // width, size
    return size, size * width // height


class _Scratch(threading.local):
    """Per-thread reusable buffers keyed by (name, shape, dtype)."""

    def __init__(self):
        self.buffers = {}

    def get(self, name, shape, dtype):
        key = (name, shape, dtype)
        buf = self.buffers.get(key)
        if buf is None:
            buf = self.buffers[key] = np.empty(shape, dtype=dtype)
        return buf


class Augmenter:
    """Plans and applies one ``AugmentConfig`` to decoded images; shareable between threads."""

    def __init__(self, config):
        import cv2

        self._cv2 = cv2
        self.config = c = config
        self._out_h, self._out_w = c.out_hw
        self._channels = c.channels
        self._scratch = _Scratch()
        self._has_colour = bool(c.brightness or c.contrast or c.saturation)
        self._has_hls = bool(c.random_h or c.random_s or c.random_l)
        self._needs_float = self._has_colour or c.pca_noise > 0
        self._affine = c.affine_active
        self._crop_size = c.max_crop_size != -1
        self._rrc = c.random_resized_crop and (c.min_random_area != 1 or c.max_random_area != 1
                                               or c.max_aspect_ratio != 0)
        means = (c.mean_r, c.mean_g, c.mean_b)[:self._channels]
        stds = (c.std_r, c.std_g, c.std_b)[:self._channels]
        self._means = tuple(float(m) for m in means)
        self._gains = tuple(float(c.scale) / float(s) for s in stds)
        self._fixed_terms = (list(self._gains),
                             [-m * g for m, g in zip(self._means, self._gains)])
        self._cv_depth = {"uint8": cv2.CV_8U, "float32": cv2.CV_32F, "float16": cv2.CV_16F}[c.dtype]
        self._np_dtype = np.dtype(c.dtype)
        # bilinear resizes in C (see _linear_axes); when nothing but mirror and normalisation
        # follows, straight into the batch (_direct); colour jitter in C (_write_float_path)
        self._fast_resize = (fast_resize.available() and c.dct_scaling and not self._affine
                             and not c.pad)
        self._direct = (self._fast_resize and not self._needs_float and not self._has_hls
                        and c.dtype in ("uint8", "float32"))
        self._fast_colour = (colour.available() and self._channels == 3
                             and c.dtype in ("uint8", "float32"))

    @staticmethod
    def sample_rng(seed, epoch, index):
        """The same stream as ``sample_rng(seed, epoch, index)`` from a generator reused by the
        calling thread (~1 us instead of ~10 us): valid until this thread's next call."""
        return _thread_sample_rng(seed, epoch, index)

    def crop_only_options(self):
        """``(out_h, out_w, nchw, rand_crop, mirror, rand_mirror, gains, offsets)`` when this
        augmentation, for any image at least the output's size, is an output-sized crop
        (centred or random) copied without resampling, then mirrored and normalised: what
        ``recpipe._batch`` writes itself, to the same values. None for anything else (resize,
        random-resized or sized crops, affine, pad, colour, lighting, contrast/illumination,
        float16, gray output, or without the C writers)."""
        c = self.config
        if not (self._direct and self._channels == 3 and colour.available()
                and c.resize == -1 and not self._rrc and not self._crop_size
                and c.max_random_contrast == 0 and c.max_random_illumination == 0):
            return None
        gains, offsets = self._fixed_terms if self._np_dtype != np.uint8 else ((1.0,) * 3,
                                                                             (0.0,) * 3)
        return (self._out_h, self._out_w, c.layout == "NCHW", bool(c.rand_crop),
                bool(c.mirror), bool(c.rand_mirror), tuple(gains), tuple(offsets))

    @property
    def out_shape(self):
        """Shape of one sample in the batch: (C, H, W) or (H, W, C)."""
        c, h, w = self.config.data_shape
        return (c, h, w) if self.config.layout == "NCHW" else (h, w, c)

    @property
    def dtype(self):
        return self._np_dtype

    # -------------------------------------------------------------------------------- planning

    def plan(self, height, width, rng):
        """Draw everything for a ``height`` x ``width`` source image from ``rng``."""
        c = self.config
        if height <= 0 or width <= 0:
            raise DecodeError(f"invalid image size {width}x{height}")
        u = rng.random(_N_UNIFORM).tolist()
        pca = None
        if c.pca_noise > 0:
            alpha = rng.standard_normal(3).astype(np.float32) * np.float32(c.pca_noise)
            pca = tuple(float(v) for v in _PCA_EIGVEC @ (alpha * _PCA_EIGVAL))
        inter = tuple(_randint(u[_U_INTER + i], 0, 4) if c.inter_method == 10 else c.inter_method
                      for i in range(3))
        resized = (resize_shorter_size(height, width, c.resize) if c.resize != -1
                   else (height, width))
        affine, work = None, resized
        if self._affine:
            affine = self._plan_affine(resized, u)
            work = affine[1]
        work = (work[0] + 2 * c.pad, work[1] + 2 * c.pad)
        upscale, crop, resize_crop = self._plan_crop(work, u)
        return SamplePlan(
            source_size=(height, width), resized_size=resized, affine=affine, work_size=work,
            upscale=upscale, crop=crop, resize_crop=resize_crop, inter=inter,
            mirror=c.mirror or (c.rand_mirror and u[_U_MIRROR] < 0.5),
            hls=self._plan_hls(u), colour=self._plan_colour(u), pca=pca,
            contrast=1.0 + c.max_random_contrast * (2 * u[_U_NORM] - 1),
            illumination=c.max_random_illumination * (2 * u[_U_NORM + 1] - 1))

    def _plan_affine(self, size, u):
        c = self.config
        rows, cols = size
        shear = u[_U_AFFINE] * c.max_shear_ratio * 2 - c.max_shear_ratio
        angle = _randint(u[_U_AFFINE + 1], -c.max_rotate_angle, c.max_rotate_angle)
        if c.rotate > 0:
            angle = c.rotate
        if c.rotate_list:
            angle = c.rotate_list[_randint(u[_U_AFFINE + 4], 0, len(c.rotate_list) - 1)]
        a, b = math.cos(angle / 180.0 * math.pi), math.sin(angle / 180.0 * math.pi)
        scale = u[_U_AFFINE + 2] * (c.max_random_scale - c.min_random_scale) + c.min_random_scale
        low, high = _aspect_range(c)
        ratio = u[_U_AFFINE + 3] * (high - low) + low
        hs = 2 * scale / (1 + ratio)
        ws = ratio * hs
        new_w = max(c.min_img_size, min(c.max_img_size, scale * cols))
        new_h = max(c.min_img_size, min(c.max_img_size, scale * rows))
        m00, m01 = hs * a - shear * b * ws, hs * b + shear * a * ws
        m10, m11 = -b * ws, a * ws
        m02 = (new_w - (m00 * cols + m01 * rows)) / 2
        m12 = (new_h - (m10 * cols + m11 * rows)) / 2
        out_size = (max(1, int(new_h)), max(1, int(new_w)))
        return ((m00, m01, m02), (m10, m11, m12)), out_size

    def _plan_crop(self, work, u):
        """(upscale, crop box, resize_crop) in the work image."""
        c = self.config
        rows, cols = work
        if self._rrc:
            box = self._plan_rrc(rows, cols, u)
            if box is not None:
                return None, box, True
        elif self._crop_size:
            if min(rows, cols) < c.max_crop_size:
                raise DecodeError(f"image of {cols}x{rows} after resize/pad is smaller than "
                                  f"max_crop_size={c.max_crop_size}")
            size = _randint(u[_U_CROP], c.min_crop_size, c.max_crop_size)
            x, y = self._place(rows - size, cols - size, u)
            return None, (x, y, size, size), True
        out_h, out_w = self._out_h, self._out_w
        upscale = None
        if rows < out_h or cols < out_w:
            factor = max(out_h / rows, out_w / cols)
            rows = max(out_h, int(rows * factor + 0.5))
            cols = max(out_w, int(cols * factor + 0.5))
            upscale = (rows, cols)
        x, y = self._place(rows - out_h, cols - out_w, u)
        return upscale, (x, y, out_w, out_h), False

    def _place(self, spare_rows, spare_cols, u):
        if self.config.rand_crop:
            return (_randint(u[_U_CROP + 1], 0, spare_cols),
                    _randint(u[_U_CROP + 2], 0, spare_rows))
        return spare_cols // 2, spare_rows // 2

    def _plan_rrc(self, rows, cols, u):
        c = self.config
        low, high = _aspect_range(c)
        log_low, log_high = math.log(low), math.log(high)
        area = rows * cols
        for i in range(_RRC_TRIES):
            base = _U_RRC + 4 * i
            target = area * (c.min_random_area + u[base] * (c.max_random_area - c.min_random_area))
            ratio = math.exp(log_low + u[base + 1] * (log_high - log_low))
            w = int(round(math.sqrt(target * ratio)))
            h = int(round(math.sqrt(target / ratio)))
            if 0 < w <= cols and 0 < h <= rows:
                return _randint(u[base + 2], 0, cols - w), _randint(u[base + 3], 0, rows - h), w, h
        return None

    def _plan_hls(self, u):
        c = self.config
        if not self._has_hls:
            return None
        return tuple(int(u[_U_HLS + i] * v * 2 - v)
                     for i, v in enumerate((c.random_h, c.random_s, c.random_l)))

    def _plan_colour(self, u):
        c = self.config
        if not self._has_colour:
            return ()
        order = sorted(range(3), key=lambda i: u[_U_ORDER + i])
        limits = (c.brightness, c.contrast, c.saturation)
        return tuple((op, 1.0 + limits[op] * (2 * u[_U_COLOUR + op] - 1))
                     for op in order if limits[op] > 0)

    def decode_scale(self, plan, scales):
        """Smallest DCT scale (num, den) in ``scales`` keeping the planned crop at >= output
        resolution; (1, 1) when dct_scaling is off, the plan warps/pads, or none qualifies.

        Only 1/2, 1/4 and 1/8 are considered: libjpeg-turbo's other M/8 scales use unvectorised
        scaled IDCTs and decode no faster (7/8 and 3/4 slower) than full size (BENCHMARKS.md).
        """
        if not self.config.dct_scaling or plan.affine is not None or self.config.pad:
            return (1, 1)
        scales = [s for s in scales if tuple(s) in PAYING_SCALES]
        x0, y0, x1, y1 = plan.source_box
        need_w = self._out_w / (x1 - x0)
        need_h = self._out_h / (y1 - y0)
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

    # -------------------------------------------------------------------------------- applying

    def decode_box(self, plan, scale):
        """Integer box ``(x0, y0, x1, y1)`` of the image decoded at ``scale`` that ``apply``
        reads for ``plan`` when given a window (see ``decode``), or None when it needs the whole
        image: an affine warp, ``pad`` or upscaling, or a resize step with ``dct_scaling`` off
        (MXNet's full-image resize-then-crop, kept exact).

        Without a resize step at full scale the box is the planned crop itself and the result is
        identical to a whole-image decode's. Otherwise the crop is mapped onto the decoded image
        and resized to the output in one step, as for reduced DCT scales.
        """
        if plan.affine is not None or plan.upscale is not None or self.config.pad:
            return None
        if scale[0] == scale[1] and plan.resized_size == plan.source_size:
            x, y, w, h = plan.crop
            return x, y, x + w, y + h
        if not self.config.dct_scaling:
            return None
        src_h, src_w = plan.source_size
        num, den = scale
        full_h, full_w = (src_h * num + den - 1) // den, (src_w * num + den - 1) // den
        if not plan.resize_crop:
            if self._fast_resize and _is_linear(plan.inter[0], (full_h, full_w),
                                                plan.resized_size):
                return _resize_then_crop_box(plan, full_h, full_w)
            (left, right, _), (top, bottom, _) = _aligned_crop(plan, full_h, full_w)
            return left, top, right, bottom
        return _mapped_box(plan, full_h, full_w)

    def decode_planned(self, decoder, data, rng):
        """Plan a sample from its image header, then decode just what the plan needs.

        Returns ``(pixels, plan, window)``: pass them to ``apply(pixels, plan, out, window=window)``.
        """
        height, width = decoder.size(data)
        plan = self.plan(height, width, rng)
        img, window = self.decode(decoder, data, plan)
        return img, plan, window

    def decode(self, decoder, data, plan):
        """Decode ``data`` no more than ``plan`` needs: at ``decode_scale`` and, when the
        decoder decodes regions (``decoder.roi``), only ``decode_box``. Returns ``(pixels,
        window)`` for ``apply(pixels, plan, out, window=window)``; window is None after a
        whole-image decode."""
        scale = self.decode_scale(plan, decoder.scales)
        if decoder.roi:
            box = self.decode_box(plan, scale)
            if box is not None:
                return decoder.decode_region(data, box, scale=scale, channels=self._channels)
        return decoder.decode(data, scale=scale, channels=self._channels), None

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
        axes = self._linear_axes(plan, img, window)
        if axes is not None and self._direct:
            gains, offsets = self._output_terms(plan)
            region = self._unscaled_region(img, axes)
            if region is not None:  # nothing to resample: one pass, no interpolation
                scratch = self._scratch.get("colour", (3 * region.shape[0] * region.shape[1],),
                                            np.float32)
                colour.jitter_into(region, out, (), None, scratch, mirror=plan.mirror,
                                   nchw=self.config.layout == "NCHW", gains=gains,
                                   offsets=offsets)
                return
            fast_resize.linear_into(img, out, *axes, mirror=plan.mirror,
                                    nchw=self.config.layout == "NCHW", gains=gains,
                                    offsets=offsets)
            return
        if axes is not None:
            region = self._region_buffer()
            fast_resize.linear_into(img, region, *axes, nchw=False)
        else:
            region = self._region(img, plan, window)
        if plan.hls is not None:
            region = self._shift_hls(region, plan.hls)
        if self._needs_float:
            self._write_float_path(region, plan, out)
        else:
            self._write(region, plan, out)

    def _unscaled_region(self, img, axes):
        """The part of ``img`` that ``axes`` copy one to one (a crop the size of the output,
        e.g. a 112x112 face), when the fused colour writer can write it; else None."""
        y_axis, x_axis = axes
        if (self._channels != 3 or not colour.available() or y_axis.scale != 1.0
                or x_axis.scale != 1.0 or y_axis.shift or x_axis.shift
                or (y_axis.length, x_axis.length) != (self._out_h, self._out_w)):
            return None
        y, x = int(y_axis.offset), int(x_axis.offset)
        if y != y_axis.offset or x != x_axis.offset or y < 0 or x < 0 \
                or y + self._out_h > img.shape[0] or x + self._out_w > img.shape[1]:
            return None
        return img[y:y + self._out_h, x:x + self._out_w]

    def _linear_axes(self, plan, img, window):
        """``(y_axis, x_axis)`` for ``fast_resize.linear_into`` when what is left to do is a
        bilinear resize of part of the decoded image (then mirror and normalise), else None:

        - resize step (maybe through a DCT scale), then a plain crop (val): the crop's part of
          the resize grid, sampled where resizing the whole image would sample it;
        - a crop resized to the output from a reduced-scale or windowed decode: the crop box
          mapped onto the decode (as ``_scaled_region``);
        - no resize step: the crop box, resized to the output (random-resized crop) or copied.
        MXNet's whole-image resize followed by a resized crop stays on the OpenCV path.
        """
        if not self._fast_resize or plan.affine is not None or plan.upscale is not None:
            return None
        full = img.shape[:2] if window is None else (window[2], window[3])
        wx, wy = (window[0], window[1]) if window is not None else (0, 0)
        out_hw = (self._out_h, self._out_w)
        resized = plan.resized_size != plan.source_size
        if not plan.resize_crop and (resized or full != plan.source_size):
            if not _is_linear(plan.inter[0], full, plan.resized_size):
                return None
            (res_h, res_w), (x, y) = plan.resized_size, plan.crop[:2]
            return (fast_resize.Axis(-wy, full[0], y, full[0] / res_h),
                    fast_resize.Axis(-wx, full[1], x, full[1] / res_w))
        if plan.resize_crop and (full != plan.source_size or (window is not None and resized)):
            left, top, right, bottom = _mapped_box(plan, *full)
            box = (bottom - top, right - left)
            if not _is_linear(plan.inter[2], box, out_hw):
                return None
            return (fast_resize.Axis(top - wy, box[0], 0.0, box[0] / out_hw[0]),
                    fast_resize.Axis(left - wx, box[1], 0.0, box[1] / out_hw[1]))
        if resized:
            return None
        x, y, w, h = plan.crop
        if plan.resize_crop and not _is_linear(plan.inter[2], (h, w), out_hw):
            return None
        return (fast_resize.Axis(y - wy, h, 0.0, h / out_hw[0]),
                fast_resize.Axis(x - wx, w, 0.0, w / out_hw[1]))

    def _region(self, img, plan, window):
        """The output-sized crop (H, W, C) uint8, before colour, mirror and normalisation."""
        full = img.shape[:2] if window is None else (window[2], window[3])
        if plan.affine is None and not self.config.pad and (
                full != plan.source_size
                or (window is not None and plan.resized_size != plan.source_size)):
            region = None
            if not plan.resize_crop and self.config.dct_scaling:
                region = self._aligned_region(img, plan, full, window)
            if region is None:
                region = self._scaled_region(img, plan, full, window)
            return region
        return self._exact_region(img, plan, window)

    def _match_channels(self, img):
        cv2 = self._cv2
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

    def _resize(self, src, size_hw, method, dst=None):
        inter = _resolve_inter(method, src.shape[:2], size_hw)
        out = self._cv2.resize(src, (size_hw[1], size_hw[0]), dst=dst, interpolation=inter)
        return out if out.ndim == 3 else out[:, :, None]

    def _exact_region(self, img, plan, window=None):
        """MXNet's steps on the full-size image: resize, warp, pad, upscale, crop(, resize).
        With a window, only the plain crop(, resize) case is possible (see decode_box)."""
        x, y, w, h = plan.crop
        if window is not None and (window[0] or window[1] or img.shape[:2] != plan.source_size):
            if plan.upscale is not None or plan.resized_size != plan.source_size:
                raise ValueError("this plan needs the whole image, not a window")
            x -= window[0]
            y -= window[1]
            if x < 0 or y < 0 or x + w > img.shape[1] or y + h > img.shape[0]:
                raise ValueError(f"window {tuple(window)} of shape {img.shape[:2]} does not "
                                 f"cover the crop {plan.crop}")
            region = img[y:y + h, x:x + w]
        else:
            region = self._full_image_crop(img, plan)
        if plan.resize_crop:
            region = self._resize(region, (self._out_h, self._out_w), plan.inter[2],
                                  dst=self._region_buffer())
        return region

    def _full_image_crop(self, img, plan):
        cv2 = self._cv2
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
            if up_h * up_w > _EXACT_UPSCALE_PIXELS:
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
        cv2 = self._cv2
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

    def _aligned_region(self, img, plan, full, window=None):
        """Resize-then-crop on part of the image (a plain crop of a resized image, as val's
        resize + center crop): the part starts where the resize grid nearly meets a source
        pixel (_aligned_crop), so resizing it with the whole image's factors samples the same
        positions (to ~0.05 px) as resizing the whole image. None if it does not fit."""
        full_h, full_w = full
        (left, right, kx), (top, bottom, ky) = _aligned_crop(plan, full_h, full_w)
        ox, oy = (window[0], window[1]) if window is not None else (0, 0)
        left, right, top, bottom = left - ox, right - ox, top - oy, bottom - oy
        if left < 0 or top < 0 or right > img.shape[1] or bottom > img.shape[0]:
            return None
        res_h, res_w = plan.resized_size
        inter = _resolve_inter(plan.inter[0], (full_h, full_w), (res_h, res_w))
        part = self._cv2.resize(img[top:bottom, left:right], None, fx=res_w / full_w,
                                fy=res_h / full_h, interpolation=inter)
        part = part if part.ndim == 3 else part[:, :, None]
        x, y, w, h = plan.crop
        x, y = x - kx, y - ky
        if x < 0 or y < 0 or x + w > part.shape[1] or y + h > part.shape[0]:
            return None
        return part[y:y + h, x:x + w]

    def _scaled_region(self, img, plan, full=None, window=None):
        """The planned box mapped onto a reduced-scale (``full`` = its size) decode or a window
        of one, resized to the output at once."""
        full_h, full_w = full or img.shape[:2]
        left, top, right, bottom = _mapped_box(plan, full_h, full_w)
        if window is not None:
            left, right = left - window[0], right - window[0]
            top, bottom = top - window[1], bottom - window[1]
            if left < 0 or top < 0 or right > img.shape[1] or bottom > img.shape[0]:
                raise ValueError(f"window {tuple(window)} of shape {img.shape[:2]} does not "
                                 f"cover the mapped crop")
        method = plan.inter[2] if plan.resize_crop else plan.inter[0]
        return self._resize(img[top:bottom, left:right], (self._out_h, self._out_w), method,
                            dst=self._region_buffer())

    def _region_buffer(self):
        return self._scratch.get("region", (self._out_h, self._out_w, self._channels), np.uint8)

    def _shift_hls(self, region, shifts):
        cv2 = self._cv2
        hls = cv2.cvtColor(region, cv2.COLOR_RGB2HLS).astype(np.int16)
        dh, ds, dl = shifts
        for channel, delta, limit in ((0, dh, 180), (1, dl, 255), (2, ds, 255)):
            if delta:
                np.clip(hls[:, :, channel] + delta, 0, limit, out=hls[:, :, channel])
        return cv2.cvtColor(hls.astype(np.uint8), cv2.COLOR_HLS2RGB)

    # ------------------------------------------------------------------- writing into the batch

    def _planes(self, out):
        return [out[i] for i in range(self._channels)]

    def _write(self, region, plan, out):
        """uint8 region (H, W, C) -> mirror -> normalise -> out."""
        cv2 = self._cv2
        nchw = self.config.layout == "NCHW"
        if plan.mirror:
            flipped = self._scratch.get("flip", region.shape, np.uint8)
            region = cv2.flip(region, 1, dst=flipped)
            region = region if region.ndim == 3 else region[:, :, None]
        elif nchw and not region.flags.c_contiguous:
            # cv2.split on a strided view takes a slow path (~20x): compact the crop first
            compact = self._scratch.get("compact", region.shape, np.uint8)
            np.copyto(compact, region)
            region = compact
        if self._np_dtype == np.uint8:
            if not nchw:
                np.copyto(out, region)
            elif self._channels == 1:
                np.copyto(out[0], region[:, :, 0])
            else:
                cv2.split(region, self._planes(out))
            return
        gains, offsets = self._affine_terms(plan)
        if nchw:
            planes = (cv2.split(region, self._scratch_planes(np.uint8)) if self._channels == 3
                      else [region[:, :, 0]])
            for src, dst, k, b in zip(planes, self._planes(out), gains, offsets):
                cv2.addWeighted(src, k, src, 0.0, b, dst=dst, dtype=self._cv_depth)
        else:
            tmp = self._scratch.get("hwc32", region.shape, np.float32)
            cv2.multiply(region, _scalar(gains), dst=tmp, dtype=cv2.CV_32F)
            cv2.add(tmp, _scalar(offsets), dst=out.reshape(region.shape), dtype=self._cv_depth)

    def _scratch_planes(self, dtype):
        return [self._scratch.get(f"plane{i}", (self._out_h, self._out_w), dtype)
                for i in range(self._channels)]

    def _affine_terms(self, plan):
        """Per-channel k, b with out = x * k + b: (x - mean) * contrast * gain + illum * gain."""
        if plan.contrast == 1.0 and plan.illumination == 0.0:
            return self._fixed_terms
        gains = [g * plan.contrast for g in self._gains]
        offsets = [-m * k + plan.illumination * g
                   for m, k, g in zip(self._means, gains, self._gains)]
        return gains, offsets

    def _output_terms(self, plan):
        """(gains, offsets) for the C writers: the normalisation of float output, none for uint8."""
        return self._affine_terms(plan) if self._np_dtype != np.uint8 else (None, None)

    def _write_float_path(self, region, plan, out):
        """Colour jitter and PCA noise in float32, then mirror, normalise and write."""
        if self._fast_colour:
            gains, offsets = self._output_terms(plan)
            scratch = self._scratch.get("colour", (3 * region.shape[0] * region.shape[1],),
                                        np.float32)
            colour.jitter_into(region, out, plan.colour, plan.pca, scratch, mirror=plan.mirror,
                               nchw=self.config.layout == "NCHW", gains=gains, offsets=offsets)
            return
        cv2 = self._cv2
        pixels = self._scratch.get("jitter", region.shape, np.float32)
        np.copyto(pixels, region)
        for op, alpha in plan.colour:
            self._jitter(pixels, op, alpha)
        if plan.pca is not None:
            pixels += np.asarray(plan.pca, dtype=np.float32)
            np.clip(pixels, 0, 255, out=pixels)
        if plan.mirror:
            pixels = cv2.flip(pixels, 1)
            pixels = pixels if pixels.ndim == 3 else pixels[:, :, None]
        if self._np_dtype == np.uint8:
            rounded = cv2.convertScaleAbs(pixels)
            self._write(rounded if rounded.ndim == 3 else rounded[:, :, None],
                        plan._replace(mirror=False), out)
            return
        gains, offsets = self._affine_terms(plan)
        if self.config.layout == "NCHW":
            planes = (cv2.split(pixels) if self._channels == 3 else [pixels[:, :, 0]])
            for src, dst, k, b in zip(planes, self._planes(out), gains, offsets):
                cv2.addWeighted(src, k, src, 0.0, b, dst=dst, dtype=self._cv_depth)
        else:
            cv2.multiply(pixels, _scalar(gains), dst=pixels)
            cv2.add(pixels, _scalar(offsets), dst=out.reshape(region.shape), dtype=self._cv_depth)

    @staticmethod
    def _jitter(pixels, op, alpha):
        if op == 0:  # brightness
            pixels *= alpha
        else:
            gray = pixels @ _GRAY_WEIGHTS if pixels.shape[2] == 3 else pixels[:, :, 0]
            if op == 1:  # contrast: blend with the mean gray level
                pixels *= alpha
                pixels += (1.0 - alpha) * float(gray.mean())
            else:  # saturation: blend with the per-pixel gray
                pixels *= alpha
                pixels += ((1.0 - alpha) * gray)[:, :, None]
        np.clip(pixels, 0, 255, out=pixels)


def _scalar(values):
    """A cv2 per-channel scalar (4-tuple) from 1 or 3 values."""
    values = [float(v) for v in values]
    return tuple(values + [0.0] * (4 - len(values)))
