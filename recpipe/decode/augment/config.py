"""``AugmentConfig``: ImageRecordIter's augmentation keywords with MXNet 1.9.1's names and
defaults (plus ``dtype``, ``layout`` and ``dct_scaling``), parsed from MXNet-style strings and
validated the way MXNet's CHECKs fail (see the package docstring for what each step does)."""

import math
from dataclasses import dataclass, fields
from typing import Optional, Tuple

from ...spelling import did_you_mean

__all__ = ["AugmentConfig", "AUGMENT_KEYWORDS", "UNSUPPORTED_KEYWORDS", "TORCHVISION_CROP",
           "aspect_range", "with_torchvision_crop"]

_DTYPES = ("uint8", "float32", "float16")
_LAYOUTS = ("NCHW", "NHWC")
_INTER_METHODS = (0, 1, 2, 3, 4, 9, 10)
# bounds that keep every size computed from the options inside C's long and double ranges
_ASPECT_LIMITS = (1e-6, 1e6)
_MAX_SIDE = 65535  # JPEG's largest side; outputs, resizes and pads beyond it are mistakes

# ImageRecordIter keywords we know but do not implement: raise, never ignore
UNSUPPORTED_KEYWORDS = {
    "mean_img": "a mean image file is not supported; use mean_r/mean_g/mean_b",
    "mean_a": "4-channel output is not supported (data_shape C must be 1 or 3)",
    "std_a": "4-channel output is not supported (data_shape C must be 1 or 3)",
    "aug_seq": "only the default augmenter (aug_default) exists",
}


# torchvision's RandomResizedCrop defaults (scale=(0.08, 1.0), ratio=(3/4, 4/3)) in
# ImageRecordIter's names: what recpipe.torch takes for random_resized_crop=True
TORCHVISION_CROP = {"min_random_area": 0.08, "max_random_area": 1.0,
                    "min_aspect_ratio": 3 / 4, "max_aspect_ratio": 4 / 3}


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
        if isinstance(self.data_shape, (int, float)):
            size = self.data_shape
            raise ValueError(f"data_shape={size!r}: expected (channels, height, width), "
                             f"e.g. (3, {size}, {size})")
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
                raise ValueError(f"unknown augmentation keyword {key!r}"
                                 f"{did_you_mean(key, known)}")
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
    def random_resized_active(self):
        """True when ``random_resized_crop`` draws crops: its area or aspect range is not
        MXNet's trivial default (area 1, aspect 1), with which ImageRecordIter skips the step."""
        return self.random_resized_crop and (self.min_random_area != 1
                                             or self.max_random_area != 1
                                             or self.max_aspect_ratio != 0)

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
    _validate_finite(c)
    _validate_shape_and_types(c)
    _validate_crop(c)
    _validate_colour(c)


def _validate_finite(c):
    """Every number finite (``nan``/``inf`` pass most comparisons' negations unseen) and the
    sizes within ``_MAX_SIDE``."""
    for f in fields(c):
        value = getattr(c, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{f.name} must be a finite number, got {value}")
    for key in ("resize", "pad", "max_crop_size", "min_crop_size"):
        if getattr(c, key) > _MAX_SIDE:
            raise ValueError(f"{key} must be at most {_MAX_SIDE}, got {getattr(c, key)}")
    if max(c.data_shape) > _MAX_SIDE:
        raise ValueError(f"data_shape sides must be at most {_MAX_SIDE}, got {c.data_shape}")


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
        low, high = aspect_range(c)
        if c.max_aspect_ratio < 0 or low <= 0 or low > high:
            raise ValueError(f"aspect ratio range [{low}, {high}] is invalid: need "
                             "0 < min_aspect_ratio <= max_aspect_ratio (or 0 <= max_aspect_ratio "
                             "< 1 without min_aspect_ratio)")
        if low < _ASPECT_LIMITS[0] or high > _ASPECT_LIMITS[1]:
            raise ValueError(f"aspect ratio range [{low}, {high}] is outside "
                             f"[{_ASPECT_LIMITS[0]}, {_ASPECT_LIMITS[1]}]")
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


def with_torchvision_crop(keywords):
    """``keywords`` with torchvision's ``RandomResizedCrop`` defaults (``TORCHVISION_CROP``)
    filled in where ``random_resized_crop`` is true and they are left out: the area range
    0.08-1 of the image, the aspect range 3/4-4/3 (only when neither aspect keyword is given:
    one alone keeps ImageRecordIter's meaning). MXNet's defaults (area 1, aspect 1) make the
    crop a no-op, which a torch user does not expect; recpipe's MXNet adapters keep them."""
    flag = keywords.get("random_resized_crop", False)
    if not _coerce("random_resized_crop", flag, False):
        return dict(keywords)
    filled = dict(keywords)
    top = float(_coerce("max_random_area", filled.get("max_random_area", 1.0), 1.0))
    filled.setdefault("min_random_area", min(TORCHVISION_CROP["min_random_area"], top))
    if "min_aspect_ratio" not in filled and "max_aspect_ratio" not in filled:
        filled["min_aspect_ratio"] = TORCHVISION_CROP["min_aspect_ratio"]
        filled["max_aspect_ratio"] = TORCHVISION_CROP["max_aspect_ratio"]
    return filled


def aspect_range(c):
    """(low, high) of the aspect-ratio range the affine step and random-resized crop draw from."""
    if c.min_aspect_ratio is not None:
        return c.min_aspect_ratio, c.max_aspect_ratio
    return 1 - c.max_aspect_ratio, 1 + c.max_aspect_ratio
