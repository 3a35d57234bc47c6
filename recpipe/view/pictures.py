"""Pixels for the page: thumbnails decoded at a DCT scale, samples made viewable, PNG/JPEG bytes.

``thumbnail`` asks the decoder for the smallest JPEG DCT scale (1/8, 1/4, 3/8...) that still
covers the requested box, so a 440 px photo becomes a 128 px thumbnail from a 1/2-scale decode
and a 112 px face from a 1/1 one; other formats are decoded whole. The decoder is the loaders'
own, in strict integrity mode: a damaged JPEG raises ``DecodeError`` instead of giving grey or
garbage rows. ``viewable`` turns one sample of a batch (CHW or HWC, uint8 or normalised floats)
into the RGB uint8 picture it shows: uint8 samples unchanged (so a PNG of it equals the loader's
array), float samples with the recipe's normalisation ``(x - mean) * scale / std`` undone.
"""

import numpy as np

from ..decode.decoders import is_jpeg
from ..image.opencv import load_cv2

__all__ = ["thumbnail", "fit", "viewable", "png_bytes", "jpeg_bytes", "dct_scale_for"]


def dct_scale_for(decoder, height, width, box):
    """The smallest of ``decoder.scales`` whose decode has a side of at least ``box`` (the
    longer side), else full scale."""
    longest = max(height, width)
    fitting = [s for s in decoder.scales if -(-longest * s[0] // s[1]) >= box]
    return min(fitting, key=lambda s: s[0] / s[1]) if fitting else (1, 1)


def fit(rgb, box):
    """``rgb`` scaled down (area interpolation) to fit a ``box`` x ``box`` square."""
    height, width = rgb.shape[:2]
    if max(height, width) <= box:
        return rgb
    ratio = box / max(height, width)
    size = (max(1, round(width * ratio)), max(1, round(height * ratio)))
    out = load_cv2().resize(rgb, size, interpolation=load_cv2().INTER_AREA)
    return out.reshape(out.shape[0], out.shape[1], -1)


def thumbnail(decoder, data, box):
    """An RGB uint8 picture of the image ``data`` fitting a ``box`` square, decoded at the
    smallest DCT scale that covers it (JPEG) or whole (other formats). Raises DecodeError."""
    height, width = decoder.size(data)  # the header; refuses images over max_pixels
    scale = dct_scale_for(decoder, height, width, box) if is_jpeg(data) else (1, 1)
    return fit(decoder.decode(data, scale=scale, channels=3), box)


def viewable(sample, config):
    """One sample of a batch as an RGB (or gray) ``(H, W, C)`` uint8 picture: CHW -> HWC, and
    for float samples the normalisation of ``config`` (an ``AugmentConfig``) undone, then
    rounded and clipped to 0..255. uint8 samples are returned as they are (a view)."""
    image = np.asarray(sample)
    if config.layout == "NCHW":
        image = image.transpose(1, 2, 0)
    if image.dtype == np.uint8:
        return image
    channels = image.shape[-1]
    means = np.array((config.mean_r, config.mean_g, config.mean_b)[:channels], np.float64)
    stds = np.array((config.std_r, config.std_g, config.std_b)[:channels], np.float64)
    pixels = image.astype(np.float64) * (stds / float(config.scale)) + means
    return np.clip(np.rint(pixels), 0, 255).astype(np.uint8)


def _bgr(rgb):
    rgb = np.ascontiguousarray(rgb)
    if rgb.ndim == 3 and rgb.shape[-1] == 3:
        return np.ascontiguousarray(rgb[..., ::-1])
    return rgb


def png_bytes(rgb):
    """Lossless PNG bytes of an RGB (or gray) uint8 picture."""
    ok, data = load_cv2().imencode(".png", _bgr(rgb), [load_cv2().IMWRITE_PNG_COMPRESSION, 1])
    if not ok:
        raise ValueError("cannot encode the picture as PNG")
    return data.tobytes()


def jpeg_bytes(rgb, quality=85):
    """JPEG bytes of an RGB (or gray) uint8 picture (thumbnails)."""
    ok, data = load_cv2().imencode(".jpg", _bgr(rgb), [load_cv2().IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise ValueError("cannot encode the picture as JPEG")
    return data.tobytes()
