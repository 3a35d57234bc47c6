"""ImageRecordIter's keywords (MXNet 1.9.1) -> ``ImageLoader``'s: what ``recpipe.mx.record_iter``
accepts, how MXNet-style values (strings, ``preprocess_threads``, ``prefetch_buffer``, ``seed_aug``,
``shuffle_chunk_size``, ``mean_img``) map onto ``LoaderOptions``, and what has no effect.
Unknown keywords warn with a "did you mean"; unsupported ones raise."""

import logging
import warnings
from dataclasses import fields as dataclass_fields
from typing import NamedTuple, Optional

from ..decode.augment import AUGMENT_KEYWORDS, AugmentConfig
from ..decode.options import LOADER_KEYWORDS
from ..spelling import did_you_mean

__all__ = ["IterOptions", "LOADER_EXTRAS", "MXNET_KEYWORDS", "UnknownKeywordWarning",
           "is_validation", "translate"]

log = logging.getLogger(__name__)

# every keyword of mx.io.ImageRecordIter in MXNet 1.9.1 (its registry docstring), plus the
# undocumented rotate_list and the Python wrapper's data_name/label_name
MXNET_KEYWORDS = frozenset("""
path_imglist path_imgrec path_imgidx aug_seq label_width data_shape preprocess_threads verbose
num_parts part_index device_id shuffle_chunk_size shuffle_chunk_seed seed_aug shuffle seed
batch_size round_batch prefetch_buffer ctx dtype resize rand_crop random_resized_crop
max_rotate_angle max_aspect_ratio min_aspect_ratio max_shear_ratio max_crop_size min_crop_size
max_random_scale min_random_scale max_random_area min_random_area max_img_size min_img_size
brightness contrast saturation pca_noise random_h random_s random_l rotate fill_value
inter_method pad mirror rand_mirror mean_img mean_r mean_g mean_b mean_a std_r std_g std_b std_a
scale max_random_contrast max_random_illumination rotate_list data_name label_name
""".split())

# recpipe keywords passed straight to ImageLoader: its own (LoaderOptions) but those set from
# ImageRecordIter's (threads from preprocess_threads, prefetch from prefetch_buffer, aug_seed
# from seed_aug, label_rule from path_imglist), and where the file is read from
LOADER_EXTRAS = frozenset(
    (LOADER_KEYWORDS - MXNET_KEYWORDS - set(AUGMENT_KEYWORDS)
     - {"threads", "prefetch", "aug_seed", "label_rule"})
    | {"storage_options", "layout", "dct_scaling"})
_NO_EFFECT = {
    "verbose": "recpipe logs through the logging module",
    "ctx": "there is one pipeline for CPU and GPU training",
    "shuffle_chunk_seed": "the block shuffle is keyed by seed",
}
_NORMALIZE = ("mean_r", "mean_g", "mean_b", "std_r", "std_g", "std_b", "scale")
_JITTER = ("max_random_contrast", "max_random_illumination")
# seed_aug=s keys the augmentation by s, apart from every plain seed's stream
_SEED_AUG_KEY = 1 << 64
_VALIDATION_DEFAULTS = ("rand_crop", "random_resized_crop", "rand_mirror", "max_rotate_angle",
                        "rotate_list", "max_shear_ratio", "max_random_scale", "min_random_scale",
                        "max_aspect_ratio", "min_aspect_ratio", "max_crop_size", "min_crop_size",
                        "brightness", "contrast", "saturation", "pca_noise", "random_h",
                        "random_s", "random_l", "max_random_contrast", "max_random_illumination")
_DTYPES = {"none": "float32", "float32": "float32", "uint8": "uint8", "float16": "float16"}


class UnknownKeywordWarning(UserWarning):
    """A keyword ImageRecordIter does not know (MXNet would ignore it silently)."""


class IterOptions(NamedTuple):
    """What the adapter itself needs, besides the ImageLoader's arguments."""

    batch_size: int
    data_name: str
    label_name: str
    mean_img: Optional[str]
    normalize: dict
    device_id: int


# ------------------------------------------------------------------------------------------------
# keywords


def _as_bool(key, value):
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
        raise ValueError(f"{key}: expected a boolean, got {value!r}")
    return bool(value)


def _as_int(key, value):
    try:
        return int(float(value)) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{key}: expected an integer, got {value!r}") from None


def _warn_unknown(kwargs, cls_name):
    for key in kwargs:
        if key in MXNET_KEYWORDS or key in LOADER_EXTRAS:
            continue
        hint = did_you_mean(key, MXNET_KEYWORDS | LOADER_EXTRAS)
        warnings.warn(f"{cls_name}: unknown keyword {key!r} ignored{hint}",
                      UnknownKeywordWarning, stacklevel=4)


def _check_unsupported(kwargs):
    aug_seq = str(kwargs.get("aug_seq", "aug_default")).strip()
    if aug_seq != "aug_default":
        raise NotImplementedError(f"aug_seq={aug_seq!r}: only 'aug_default' exists in recpipe")
    for key, default in (("mean_a", 0.0), ("std_a", 1.0)):
        if key in kwargs and float(kwargs[key]) != default:
            raise NotImplementedError(f"{key}={kwargs[key]!r}: 4-channel output is not supported")
    if "data_shape" not in kwargs:
        raise ValueError("data_shape is required")
    if not kwargs.get("path_imgrec"):
        raise ValueError("path_imgrec is required")
    if "batch_size" not in kwargs:
        raise ValueError("batch_size is required")


def _dtype(value):
    key = str(value).strip().lower()
    if key == "int8":
        raise NotImplementedError("dtype='int8' (ImageRecordInt8Iter) is not supported")
    if key not in _DTYPES:
        raise ValueError(f"dtype={value!r}: unknown dtype for ImageRecordIter "
                         "(float32, uint8 or float16)")
    return _DTYPES[key]


def _data_shape(value):
    if isinstance(value, str):
        value = [v for v in value.strip().strip("()[]").split(",") if v.strip()]
    try:
        shape = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"data_shape={value!r}: expected (C, H, W) integers") from None
    if shape and shape[0] == 4:
        raise NotImplementedError(f"data_shape={shape}: 4-channel (RGBA) output is not supported")
    return shape


def _shuffle(kwargs):
    shuffle = _as_bool("shuffle", kwargs.get("shuffle", False))
    if not shuffle and _as_int("shuffle_chunk_size", kwargs.get("shuffle_chunk_size", 0)) > 0:
        return "block"
    return shuffle


def _mean_image_options(kwargs, augment):
    """Split the normalisation keywords (and the contrast/illumination jitter, applied after
    the mean image is subtracted) off when a mean image does the normalising."""
    mean_img = kwargs.get("mean_img") or None
    if mean_img is None:
        return None, {}
    normalize = {key: float(augment.pop(key)) for key in _NORMALIZE + _JITTER if key in augment}
    if any(normalize.get(key, 0.0) for key in ("mean_r", "mean_g", "mean_b")):
        warnings.warn("mean_img is set: mean_r/mean_g/mean_b are ignored, as in MXNet",
                      UserWarning, stacklevel=4)
    return str(mean_img), normalize


def translate(kwargs, *, default_dtype="float32", cls_name="ImageRecordIter"):
    """``(loader keyword arguments, _Options, path_imglist)`` for ImageRecordIter ``kwargs``."""
    _warn_unknown(kwargs, cls_name)
    _check_unsupported(kwargs)
    for key, why in _NO_EFFECT.items():
        if key in kwargs:
            log.debug("%s=%r has no effect: %s", key, kwargs[key], why)
    augment = {k: v for k, v in kwargs.items()
               if k in AUGMENT_KEYWORDS and k not in ("data_shape", "layout", "dtype")}
    dtype = _dtype(kwargs.get("dtype", default_dtype))
    mean_img, normalize = _mean_image_options(kwargs, augment)
    if mean_img and dtype != "float32":
        raise ValueError(f"mean_img needs dtype='float32', got {dtype!r}")
    _as_bool("round_batch", kwargs.get("round_batch", True))  # both values pad: see above
    loader = dict(
        url=str(kwargs["path_imgrec"]),
        index_url=kwargs.get("path_imgidx") or None,
        batch_size=_as_int("batch_size", kwargs["batch_size"]),
        data_shape=_data_shape(kwargs["data_shape"]),
        threads=_threads(kwargs.get("preprocess_threads")),
        prefetch=max(1, _as_int("prefetch_buffer", kwargs.get("prefetch_buffer", 4))),
        dtype=dtype,
        shuffle=_shuffle(kwargs),
        seed=_as_int("seed", kwargs.get("seed", 0)),
        part_index=_as_int("part_index", kwargs.get("part_index", 0)),
        num_parts=_as_int("num_parts", kwargs.get("num_parts", 1)),
        label_width=_as_int("label_width", kwargs.get("label_width", 1)),
        last_batch="pad",
        **augment)
    if kwargs.get("seed_aug") is not None:
        loader["aug_seed"] = _SEED_AUG_KEY + _as_int("seed_aug", kwargs["seed_aug"])
    if "dct_scaling" not in kwargs and is_validation(loader):
        loader["dct_scaling"] = False  # MXNet's pixels exactly; dct_scaling=True opts in
    loader.update({k: v for k, v in kwargs.items() if k in LOADER_EXTRAS})
    options = IterOptions(
        batch_size=loader["batch_size"],
        data_name=str(kwargs.get("data_name", "data")),
        label_name=str(kwargs.get("label_name", "softmax_label")),
        mean_img=mean_img, normalize=normalize,
        device_id=_as_int("device_id", kwargs.get("device_id", 0)))
    return loader, options, kwargs.get("path_imglist") or None


def is_validation(loader_kwargs):
    """True when no augmentation is random (resize and center crop only): MXNet's pixels are
    reproducible exactly there."""
    augment = {k: v for k, v in loader_kwargs.items() if k in AUGMENT_KEYWORDS}
    config = AugmentConfig.from_kwargs(**augment)
    defaults = {f.name: f.default for f in dataclass_fields(AugmentConfig)}
    return all(getattr(config, key) == defaults[key] for key in _VALIDATION_DEFAULTS)


def _threads(preprocess_threads):
    """``preprocess_threads`` as decode threads; not given means the autotuner decides."""
    if preprocess_threads is None or preprocess_threads == "auto":
        return "auto"
    return max(1, _as_int("preprocess_threads", preprocess_threads))
