"""What every decoding backend shares: the ``Decoder`` interface and its checks, image headers
(``image_size``, ``is_jpeg``), ``Window`` (where a region decode's pixels lie), the OpenCV
fallback for non-JPEG bytes, and region decoding through ``recpipe._batch.decode_region``. The
backends and ``get_decoder`` are in ``decoders`` (whose docstring describes the behaviour they
share).
"""

import logging
import struct
from typing import NamedTuple, Tuple

import numpy as np

from .._optional import extension
from ..errors import DecodeError, LimitError
from ..image.jpeg import SOF_MARKERS, JpegHeaderError, count_scans, segments
from ..image.opencv import DEFAULT_MAX_PIXELS, imdecode, load_cv2

__all__ = ["DEFAULT_MAX_PIXELS", "DEFAULT_MAX_SCANS", "Decoder", "EIGHTHS", "INTEGRITY_MODES",
           "MAX_REGION_BYTES", "Window", "check_jpeg_complete", "cmyk_to_rgb", "image_size",
           "is_jpeg", "load_roi", "opencv_decode", "reduce_scale", "roi_decode", "scaled_size",
           "to_gray"]

log = logging.getLogger(__name__)

EIGHTHS = ((1, 1), (7, 8), (3, 4), (5, 8), (1, 2), (3, 8), (1, 4), (1, 8))

# region decodes refuse outputs (and libjpeg working buffers) above this many bytes
MAX_REGION_BYTES = 1 << 31

# JPEGs with more scans are refused (libjpeg-turbo's -maxscans idea): a progressive scan costs a
# pass over every block of its component, so a small file of thousands of scans is a CPU bomb.
# Encoders write 1 (baseline), 6-10 (libjpeg's progressive scripts) to ~20 (mozjpeg's optimised
# ones); 100 leaves room for odd scripts and bounds the work to ~100 passes of max_pixels.
DEFAULT_MAX_SCANS = 100

# what a decode checks (LoaderOptions.integrity): "off" and "auto" decode what is needed, with
# libjpeg's corrupt-data warnings as errors (``strict``); "strict" also entropy-decodes the rest
# of a region decode's scan to EOI, so nothing a full decode would warn about gets through
INTEGRITY_MODES = ("off", "auto", "strict")

# formats other than JPEG/PNG are sized by decoding them: OpenCV's own limit bounds that work
# (set when recpipe loads OpenCV: recpipe.image.opencv.load_cv2)

_JPEG_SOI = b"\xff\xd8"
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------------------------------------
# headers


def is_jpeg(data):
    """True when the bytes start with a JPEG SOI marker."""
    return len(data) >= 3 and bytes(data[:2]) == _JPEG_SOI and data[2] == 0xFF


def _jpeg_size(data):
    """(height, width) from the first SOFn segment; DecodeError if there is none."""
    try:
        for marker, start, end in segments(data):
            if marker in SOF_MARKERS:
                if end - start < 5:
                    break
                height, width = struct.unpack_from(">HH", data, start + 1)
                if height == 0 or width == 0:
                    raise DecodeError(f"JPEG header: invalid size {width}x{height}")
                return height, width
    except JpegHeaderError as e:
        raise DecodeError(str(e)) from None
    raise DecodeError("JPEG header: no SOF marker before the image data (truncated or corrupt)")


def _png_size(data):
    if len(data) < 24 or bytes(data[12:16]) != b"IHDR":
        raise DecodeError("PNG header: missing IHDR chunk")
    width, height = struct.unpack_from(">II", data, 16)
    if height == 0 or width == 0:
        raise DecodeError(f"PNG header: invalid size {width}x{height}")
    return height, width


def image_size(data):
    """(height, width) of JPEG/PNG bytes from the header; other formats are decoded by OpenCV."""
    try:
        if is_jpeg(data):
            return _jpeg_size(data)
        if bytes(data[:8]) == _PNG_SIGNATURE:
            return _png_size(data)
    except struct.error as e:
        raise DecodeError(f"image header truncated: {e}") from None
    return opencv_decode(data, 1).shape[:2]


def scaled_size(dim, scale):
    num, den = scale
    return (dim * num + den - 1) // den


def check_jpeg_complete(data):
    """Raise unless an EOI marker follows the last SOS (FFDA cannot occur in entropy data)."""
    buf = data if isinstance(data, (bytes, bytearray)) else bytes(data)
    sos = buf.rfind(b"\xff\xda")
    if sos < 0 or buf.find(b"\xff\xd9", sos) < 0:
        raise DecodeError("Premature end of JPEG file (no EOI marker after the image data)")


def cmyk_to_rgb(cmyk):
    """OpenCV's conversion of (Adobe, inverted) CMYK to RGB: ``K - ((255 - C) * K >> 8)``."""
    planes = cmyk.astype(np.int32)
    k = planes[..., 3:4]
    rgb = k - (((255 - planes[..., :3]) * k) >> 8)
    return np.ascontiguousarray(rgb, dtype=np.uint8)


def to_gray(rgb):
    cv2 = load_cv2()
    return cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)[:, :, None]



def opencv_decode(data, channels, reduce=1):
    cv2 = load_cv2()
    flags = cv2.IMREAD_IGNORE_ORIENTATION
    if channels == 1:
        flags |= {1: cv2.IMREAD_GRAYSCALE, 2: cv2.IMREAD_REDUCED_GRAYSCALE_2,
                  4: cv2.IMREAD_REDUCED_GRAYSCALE_4, 8: cv2.IMREAD_REDUCED_GRAYSCALE_8}[reduce]
    else:
        flags |= {1: cv2.IMREAD_COLOR, 2: cv2.IMREAD_REDUCED_COLOR_2,
                  4: cv2.IMREAD_REDUCED_COLOR_4, 8: cv2.IMREAD_REDUCED_COLOR_8}[reduce]
    img = imdecode(data, flags)
    if channels == 1:
        return img.reshape(img.shape[0], img.shape[1], 1)
    return cv2.cvtColor(img, cv2.COLOR_BGR2RGB, dst=img)


class Window(NamedTuple):
    """Where a region decode's pixels lie: ``pixels[0, 0]`` is pixel (``x``, ``y``) of the
    image decoded at the requested scale, which is ``full_height`` x ``full_width``."""

    x: int
    y: int
    full_height: int
    full_width: int


def _remake_decoder(cls, options):
    return cls(**options)


class Decoder:
    """One decoding backend. ``name``, ``scales``, ``roi``; ``size(data)``; ``decode(data, ...)``;
    ``decode_region(data, box, ...)``."""

    name = "base"
    scales: Tuple[Tuple[int, int], ...] = ((1, 1),)
    roi = False  # True when decode_region decodes only the region
    _roi = None  # recpipe._batch (decode_region), for backends that decode regions with it
    counts_scans = False  # True when _decode_jpeg enforces max_scans itself (libjpeg's monitor)

    def __init__(self, *, fast_dct=False, fast_upsample=False, strict=True,
                 max_pixels=DEFAULT_MAX_PIXELS, integrity="auto", max_scans=DEFAULT_MAX_SCANS):
        if max_pixels is not None and max_pixels < 1:
            raise ValueError(f"max_pixels={max_pixels!r} must be >= 1 (or None: no limit)")
        if max_scans is not None and (not isinstance(max_scans, int) or isinstance(max_scans, bool)
                                      or not 1 <= max_scans < 1 << 31):
            raise ValueError(f"max_scans={max_scans!r} must be a number >= 1 (or None: no limit)")
        if integrity not in INTEGRITY_MODES:
            raise ValueError(f"integrity={integrity!r}: expected one of {INTEGRITY_MODES}")
        self.fast_dct = bool(fast_dct)
        self.fast_upsample = bool(fast_upsample)
        self.integrity = integrity
        # "strict" integrity: warnings are errors, and region decodes read their scan to the end
        self.strict = bool(strict) or integrity == "strict"
        self.check_rest = integrity == "strict"
        self.max_pixels = max_pixels
        self.max_scans = max_scans

    def options(self):
        """The keyword arguments that make this decoder again."""
        return dict(fast_dct=self.fast_dct, fast_upsample=self.fast_upsample, strict=self.strict,
                    max_pixels=self.max_pixels, integrity=self.integrity,
                    max_scans=self.max_scans)

    def __reduce__(self):
        # pickled as its class and options (a cluster task ships it): the library handles are
        # made again where it is unpickled
        return _remake_decoder, (type(self), self.options())

    def __repr__(self):
        return (f"{type(self).__name__}(fast_dct={self.fast_dct}, "
                f"fast_upsample={self.fast_upsample}, strict={self.strict}, "
                f"max_pixels={self.max_pixels}, integrity={self.integrity!r}, "
                f"max_scans={self.max_scans})")

    def size(self, data):
        """(height, width) read from the header without decoding; DecodeError on garbage or
        on an image declaring more than ``max_pixels`` pixels."""
        height, width = image_size(data)
        self._check_pixels(height, width)
        return height, width

    def region_options(self):
        """``(fast_dct, fast_upsample, strict, max_pixels, max_region_bytes, check_rest,
        max_scans)`` as this backend decodes JPEG regions with ``recpipe._batch``
        (``max_pixels``, ``max_scans`` 0: no limit), for a native caller that must decode
        exactly as it does; None when it does not use it."""
        if self._roi is None or not self.roi:
            return None
        return (self.fast_dct, self.fast_upsample, self.strict, self.max_pixels or 0,
                MAX_REGION_BYTES, self.check_rest, self.max_scans or 0)

    def _check_pixels(self, height, width):
        if self.max_pixels is not None and height * width > self.max_pixels:
            raise LimitError(f"image of {width}x{height} = {height * width} pixels is over the "
                             f"max_pixels limit of {self.max_pixels} (a decompression bomb?); "
                             "raise max_pixels to decode it", detector="max_pixels")

    def _check_declared(self, data):
        """Refuse a JPEG/PNG whose header declares more than ``max_pixels`` (before decoding)."""
        if self.max_pixels is not None and (is_jpeg(data) or bytes(data[:8]) == _PNG_SIGNATURE):
            self._check_pixels(*image_size(data))

    def _check_scans(self, data):
        """Refuse a JPEG of more than ``max_scans`` scans, counted without decoding (for the
        backends whose library cannot be told to stop)."""
        error = self.scans_error(data)
        if error is not None:
            raise error

    def scans_error(self, data):
        """The ``LimitError`` of a JPEG of more than ``max_scans`` scans (counted without
        decoding), or None: also how a failed libjpeg decode, which stops at ``max_scans`` by
        itself, is told from damaged bytes."""
        if self.max_scans is None or count_scans(data, self.max_scans) <= self.max_scans:
            return None
        return LimitError(f"JPEG has more than {self.max_scans} scans (a progressive scan "
                          "bomb?); raise max_scans to decode it", detector="max_scans")

    def decode(self, data, *, scale=(1, 1), channels=3):
        """RGB (``channels=3``) or gray (``channels=1``) uint8 array ``(H, W, channels)``."""
        if channels not in (1, 3):
            raise ValueError(f"channels must be 1 or 3, not {channels!r}")
        if len(data) == 0:
            raise DecodeError("empty image data")
        self._check_declared(data)
        if not is_jpeg(data):
            return opencv_decode(data, channels)
        scale = reduce_scale(*scale)
        if scale not in self.scales:
            raise ValueError(f"{self.name} cannot decode at scale {scale}: "
                             f"supported {list(self.scales)}")
        if not self.counts_scans:
            self._check_scans(data)
        return self._decode_jpeg(data, scale, channels)

    def decode_region(self, data, box, *, scale=(1, 1), channels=3):
        """``(pixels, Window)``: ``pixels`` (uint8, ``(h, w, channels)``) cover at least ``box``
        ``(x0, y0, x1, y1)`` of the image decoded at ``scale``. Backends with the region decoder
        (``_roi``: ``recpipe._batch``) decode only the region of a JPEG; otherwise the whole
        image is decoded (``Window(0, 0, H, W)``)."""
        if self._roi is not None and channels in (1, 3) and len(data) and is_jpeg(data):
            self._check_declared(data)
            return roi_decode(self, data, box, scale, channels)
        img = self.decode(data, scale=scale, channels=channels)
        return img, Window(0, 0, img.shape[0], img.shape[1])

    def _decode_jpeg(self, data, scale, channels):
        raise NotImplementedError


def roi_decode(decoder, data, box, scale, channels):
    """``(pixels, Window)`` of ``box`` (``x1``/``y1`` of -1: to the edge) through
    ``recpipe._batch.decode_region`` with ``decoder``'s options."""
    scale = reduce_scale(*scale)
    if scale not in decoder.scales:
        raise ValueError(f"{decoder.name} cannot decode at scale {scale}: "
                         f"supported {list(decoder.scales)}")
    x0, y0, x1, y1 = (int(v) for v in box)
    try:
        buf, height, width, depth, x, y, full_h, full_w = decoder._roi.decode_region(
            data, scale[0], scale[1], x0, y0, x1, y1, channels, decoder.fast_dct,
            decoder.fast_upsample, decoder.strict, MAX_REGION_BYTES, decoder.check_rest,
            decoder.max_scans or 0)
    except ValueError as e:
        raise decoder.scans_error(data) or DecodeError(f"libjpeg: {e}") from None
    img = np.frombuffer(buf, dtype=np.uint8).reshape(height, width, depth)
    if depth == 4:
        img = cmyk_to_rgb(img)
        img = to_gray(img) if channels == 1 else img
    return img, Window(x, y, full_h, full_w)


def load_roi():
    """``recpipe._batch``, the libjpeg extension whose ``decode_region`` decodes JPEG regions,
    or None when it was not built (then JPEG regions are cut from full decodes; ``recpipe
    doctor`` says how to build it)."""
    return extension("_batch")


def reduce_scale(num, den):
    from math import gcd

    g = gcd(num, den)
    return num // g, den // g
