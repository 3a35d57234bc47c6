"""Image decoders behind one interface: libjpeg-turbo (ctypes), simplejpeg and OpenCV.

``get_decoder(name)`` returns a ``Decoder`` with ``size(data)`` (from the header, no pixel
decode), ``scales`` (DCT scaling factors it supports for JPEG) and ``decode(data, scale=,
channels=)`` giving RGB (or gray) ``uint8`` arrays of shape ``(H, W, C)``, C-contiguous.

Shared behaviour of every backend:

- ``data`` is ``bytes``, ``bytearray`` or a (read-only) ``memoryview`` slice; it is not copied.
- JPEG bytes are decoded by the backend, at the requested DCT scale: the result has
  ``ceil(dim * num / den)`` pixels per side, as libjpeg computes it.
- Anything else (PNG, BMP, GIF, WebP... behind any file name) goes to OpenCV at full scale
  (whatever ``scale`` says; callers derive the factor from the result's shape); alpha is dropped.
- Grayscale JPEGs become RGB (three equal planes); CMYK/YCCK JPEGs are converted like OpenCV
  does (Adobe inverted CMYK: ``R = K - ((255 - C) * K >> 8)``), so every backend agrees with
  ``cv2.imdecode``. EXIF orientation is NOT applied (libjpeg-turbo ignores it; the OpenCV
  backend is told to ignore it too, so the backends agree).
- ``channels=1`` gives the luma plane (JPEG Y, or OpenCV's gray conversion), shape ``(H, W, 1)``.
- An image whose header declares more than ``max_pixels`` pixels (default 89,478,485, Pillow's
  limit; None: no limit) raises ``recpipe.DecodeError`` before any pixel is decoded (JPEG and PNG
  headers are read; other formats are bounded by OpenCV's ``OPENCV_IO_MAX_IMAGE_PIXELS``, set to
  the same default unless already set).
- Corrupt data raises ``recpipe.DecodeError`` carrying the backend's message, never crashes.
  A truncated JPEG (libjpeg "Premature end of JPEG file" and other recoverable *warnings*)
  raises too when ``strict=True`` (the default); with ``strict=False`` the backend's partial
  image (grey/garbage at the bottom) is returned, as libjpeg and ``cv2.imdecode`` do.
- Decoders are safe to share between threads (libjpeg-turbo keeps one handle per thread) and
  release the GIL while decoding (ctypes calls, simplejpeg's ``nogil`` and OpenCV all do).

Region decoding: ``decode_region(data, box, scale=, channels=)`` returns ``(pixels, window)``
where ``pixels`` covers at least ``box = (x0, y0, x1, y1)`` (coordinates of the image decoded at
``scale``) and ``window = Window(x, y, full_height, full_width)`` says where ``pixels[0, 0]`` lies
in that image and how big the whole image is. Backends with ``roi = True`` decode only the region
(the 'turbojpeg' backend with the ``recpipe._jpegroi`` C extension: libjpeg-turbo's
``jpeg_crop_scanline`` / ``jpeg_skip_scanlines``, stopping after the region's last row); the
others decode the whole image and return it with ``window = (0, 0, H, W)``. Inside ``box`` the
pixels equal a full decode's (the extension widens libjpeg's column crop by a column each side,
so the chroma-upsampling seam at the window's edges stays outside ``box``). With ``strict=True``
a region decode still rejects a stream that stops before its EOI marker, but corrupt entropy data
below the region is never decoded, so not reported.

The 'turbojpeg' backend binds ``libturbojpeg`` directly with ctypes through the TurboJPEG 2.x
API, which libjpeg-turbo 2.x and 3.x both export: PyTurboJPEG 2.x refuses libjpeg-turbo < 3.0
(Debian/Ubuntu ship 2.1), and a direct binding also avoids its per-call handle creation and its
``warnings.warn`` on truncated files. Set ``RECPIPE_TURBOJPEG_LIB`` to the library's path if it
is not found automatically.
"""

import ctypes
import ctypes.util
import logging
import os
import struct
import threading
from typing import List, NamedTuple, Optional

import numpy as np

from ..errors import DecodeError
from ..jpeg import SOF_MARKERS, JpegHeaderError, segments

__all__ = [
    "DEFAULT_MAX_PIXELS",
    "Decoder",
    "available_decoders",
    "get_decoder",
    "image_size",
    "is_jpeg",
    "PREFERENCE",
    "Window",
    "roi_available",
    "turbojpeg_available",
]

log = logging.getLogger(__name__)

# Static preference for "auto", fastest first (see BENCHMARKS.md, "decoders"). A static order keeps
# the pixels a process produces independent of timing noise on a busy machine.
PREFERENCE = ("turbojpeg", "libjpeg", "simplejpeg", "opencv")

_EIGHTHS = ((1, 1), (7, 8), (3, 4), (5, 8), (1, 2), (3, 8), (1, 4), (1, 8))
_OPENCV_SCALES = ((1, 1), (1, 2), (1, 4), (1, 8))

# region decodes refuse outputs (and libjpeg working buffers) above this many bytes
_MAX_REGION_BYTES = 1 << 31

# images declaring more pixels are refused before decoding (Pillow's MAX_IMAGE_PIXELS)
DEFAULT_MAX_PIXELS = 89_478_485
# formats other than JPEG/PNG are sized by decoding them: OpenCV's own limit bounds that work
os.environ.setdefault("OPENCV_IO_MAX_IMAGE_PIXELS", str(DEFAULT_MAX_PIXELS))

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
    return _opencv_decode(data, 1).shape[:2]


def _scaled(dim, scale):
    num, den = scale
    return (dim * num + den - 1) // den


def _check_jpeg_complete(data):
    """Raise unless an EOI marker follows the last SOS (FFDA cannot occur in entropy data)."""
    buf = data if isinstance(data, (bytes, bytearray)) else bytes(data)
    sos = buf.rfind(b"\xff\xda")
    if sos < 0 or buf.find(b"\xff\xd9", sos) < 0:
        raise DecodeError("Premature end of JPEG file (no EOI marker after the image data)")


def _cmyk_to_rgb(cmyk):
    """OpenCV's conversion of (Adobe, inverted) CMYK to RGB: ``K - ((255 - C) * K >> 8)``."""
    planes = cmyk.astype(np.int32)
    k = planes[..., 3:4]
    rgb = k - (((255 - planes[..., :3]) * k) >> 8)
    return np.ascontiguousarray(rgb, dtype=np.uint8)


def _to_gray(rgb):
    import cv2

    return cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)[:, :, None]


# ------------------------------------------------------------------------------------------------
# OpenCV (always available; fallback for non-JPEG bytes)


def _opencv_decode(data, channels, reduce=1):
    import cv2

    flags = cv2.IMREAD_IGNORE_ORIENTATION
    if channels == 1:
        flags |= {1: cv2.IMREAD_GRAYSCALE, 2: cv2.IMREAD_REDUCED_GRAYSCALE_2,
                  4: cv2.IMREAD_REDUCED_GRAYSCALE_4, 8: cv2.IMREAD_REDUCED_GRAYSCALE_8}[reduce]
    else:
        flags |= {1: cv2.IMREAD_COLOR, 2: cv2.IMREAD_REDUCED_COLOR_2,
                  4: cv2.IMREAD_REDUCED_COLOR_4, 8: cv2.IMREAD_REDUCED_COLOR_8}[reduce]
    try:
        img = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), flags)
    except cv2.error as e:
        raise DecodeError(f"OpenCV cannot decode the image: {e}") from None
    if img is None:
        raise DecodeError("OpenCV cannot decode the image (unknown format or corrupt data)")
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


class Decoder:
    """One decoding backend. ``name``, ``scales``, ``roi``; ``size(data)``; ``decode(data, ...)``;
    ``decode_region(data, box, ...)``."""

    name = "base"
    scales = ((1, 1),)
    roi = False  # True when decode_region decodes only the region
    _roi = None  # the recpipe._jpegroi module, for backends that decode regions with it

    def __init__(self, *, fast_dct=False, fast_upsample=False, strict=True,
                 max_pixels=DEFAULT_MAX_PIXELS):
        if max_pixels is not None and max_pixels < 1:
            raise ValueError(f"max_pixels={max_pixels!r} must be >= 1 (or None: no limit)")
        self.fast_dct = bool(fast_dct)
        self.fast_upsample = bool(fast_upsample)
        self.strict = bool(strict)
        self.max_pixels = max_pixels

    def __repr__(self):
        return (f"{type(self).__name__}(fast_dct={self.fast_dct}, "
                f"fast_upsample={self.fast_upsample}, strict={self.strict}, "
                f"max_pixels={self.max_pixels})")

    def size(self, data):
        """(height, width) read from the header without decoding; DecodeError on garbage or
        on an image declaring more than ``max_pixels`` pixels."""
        height, width = image_size(data)
        self._check_pixels(height, width)
        return height, width

    def region_options(self):
        """``(fast_dct, fast_upsample, strict, max_pixels, max_region_bytes)`` as this backend
        decodes JPEG regions with ``recpipe._jpegroi`` (``max_pixels`` 0: no limit), for a
        native caller that must decode exactly as it does; None when it does not use it."""
        if self._roi is None or not self.roi:
            return None
        return (self.fast_dct, self.fast_upsample, self.strict, self.max_pixels or 0,
                _MAX_REGION_BYTES)

    def _check_pixels(self, height, width):
        if self.max_pixels is not None and height * width > self.max_pixels:
            raise DecodeError(f"image of {width}x{height} = {height * width} pixels is over the "
                              f"max_pixels limit of {self.max_pixels} (a decompression bomb?); "
                              "raise max_pixels to decode it")

    def _check_declared(self, data):
        """Refuse a JPEG/PNG whose header declares more than ``max_pixels`` (before decoding)."""
        if self.max_pixels is not None and (is_jpeg(data) or bytes(data[:8]) == _PNG_SIGNATURE):
            self._check_pixels(*image_size(data))

    def decode(self, data, *, scale=(1, 1), channels=3):
        """RGB (``channels=3``) or gray (``channels=1``) uint8 array ``(H, W, channels)``."""
        if channels not in (1, 3):
            raise ValueError(f"channels must be 1 or 3, not {channels!r}")
        if len(data) == 0:
            raise DecodeError("empty image data")
        self._check_declared(data)
        if not is_jpeg(data):
            return _opencv_decode(data, channels)
        scale = _reduce(*scale)
        if scale not in self.scales:
            raise ValueError(f"{self.name} cannot decode at scale {scale}: "
                             f"supported {list(self.scales)}")
        return self._decode_jpeg(data, scale, channels)

    def decode_region(self, data, box, *, scale=(1, 1), channels=3):
        """``(pixels, Window)``: ``pixels`` (uint8, ``(h, w, channels)``) cover at least ``box``
        ``(x0, y0, x1, y1)`` of the image decoded at ``scale``. Backends with the region decoder
        (``_roi``: ``recpipe._jpegroi``) decode only the region of a JPEG; otherwise the whole
        image is decoded (``Window(0, 0, H, W)``)."""
        if self._roi is not None and channels in (1, 3) and len(data) and is_jpeg(data):
            self._check_declared(data)
            return _roi_decode(self, data, box, scale, channels)
        img = self.decode(data, scale=scale, channels=channels)
        return img, Window(0, 0, img.shape[0], img.shape[1])

    def _decode_jpeg(self, data, scale, channels):
        raise NotImplementedError


class OpenCVDecoder(Decoder):
    """``cv2.imdecode``; JPEG DCT scales 1/2, 1/4, 1/8 through ``IMREAD_REDUCED_*``.

    OpenCV has no fast-DCT or fast-upsampling switch: those options are accepted and ignored.
    """

    name = "opencv"
    scales = _OPENCV_SCALES

    def _decode_jpeg(self, data, scale, channels):
        if self.strict:
            _validate_jpeg(data)
        return _opencv_decode(data, channels, reduce=scale[1] // scale[0])


def _validate_jpeg(data):
    """Raise DecodeError where OpenCV would only warn and return grey or garbage pixels.

    With ``recpipe._jpegroi`` built, the stream is entropy-decoded by libjpeg at 1/8 scale with
    warnings as errors (bad Huffman codes, corrupt data, truncation). Without it, the stream's
    structure is checked: an EOI after the last scan, and no invalid marker (a 0xFF not followed
    by 0x00, a restart marker or a segment marker) inside the entropy-coded data.
    """
    roi = _load_roi()
    if roi is not None:
        try:
            roi.decode(data, 1, 8, 0, 0, -1, -1, 1, True, True, True, _MAX_REGION_BYTES)
        except ValueError as e:
            raise DecodeError(f"libjpeg: {e}") from None
        return
    _check_jpeg_complete(data)
    _check_entropy_markers(bytes(data))


# markers that may follow entropy-coded data: restarts, EOI, and the segments between the scans
# of a progressive JPEG (DHT, DQT, DRI, SOS, APPn, COM)
_MARKERS_AFTER_SCAN = (frozenset(range(0xD0, 0xD8)) | {0xD9, 0xC4, 0xDB, 0xDD, 0xDA, 0xFE}
                       | frozenset(range(0xE0, 0xF0)))


def _check_entropy_markers(buf):
    pos = buf.find(b"\xff\xda")
    while 0 <= pos < len(buf) - 1:
        pos = buf.find(b"\xff", pos + 2)
        while 0 <= pos < len(buf) - 1 and buf[pos + 1] == 0xFF:  # fill bytes
            pos += 1
        if pos < 0 or pos >= len(buf) - 1:
            return
        marker = buf[pos + 1]
        if marker != 0x00 and marker not in _MARKERS_AFTER_SCAN:
            raise DecodeError(f"Corrupt JPEG data: invalid marker 0xff{marker:02x} at byte {pos} "
                              "inside the image data")
        if marker == 0xD9:
            return


# ------------------------------------------------------------------------------------------------
# simplejpeg


class SimpleJpegDecoder(Decoder):
    """simplejpeg (bundled libjpeg-turbo); DCT scales n/8 chosen through ``min_height/width``."""

    name = "simplejpeg"
    scales = _EIGHTHS

    def __init__(self, **options):
        super().__init__(**options)
        import simplejpeg

        self._sj = simplejpeg

    def _decode_jpeg(self, data, scale, channels):
        sj = self._sj
        try:
            if scale == (1, 1):
                min_h = min_w = 0
            else:
                height, width = _jpeg_size(data)
                min_h, min_w = _scaled(height, scale), _scaled(width, scale)
            img = sj.decode_jpeg(data, "GRAY" if channels == 1 else "RGB",
                                 fastdct=self.fast_dct, fastupsample=self.fast_upsample,
                                 min_height=min_h, min_width=min_w, strict=self.strict)
        except ValueError as e:
            raise DecodeError(f"simplejpeg: {e}") from None
        if img.ndim == 2:
            img = img[:, :, None]
        return img


# ------------------------------------------------------------------------------------------------
# libjpeg-turbo through ctypes (TurboJPEG 2.x API)

_TJPF_RGB, _TJPF_GRAY, _TJPF_CMYK = 0, 6, 11
_TJCS_CMYK, _TJCS_YCCK = 3, 4
_TJFLAG_FASTUPSAMPLE = 256
_TJFLAG_FASTDCT = 2048
_TJFLAG_STOPONWARNING = 8192
_TJERR_WARNING = 0
_LIB_CANDIDATES = (
    "libturbojpeg.so.0",
    "/usr/lib/x86_64-linux-gnu/libturbojpeg.so.0",
    "/usr/lib/aarch64-linux-gnu/libturbojpeg.so.0",
    "/usr/local/lib/libturbojpeg.so.0",
    "/opt/libjpeg-turbo/lib64/libturbojpeg.so",
    "/usr/lib64/libturbojpeg.so.0",
    "/usr/local/lib/libturbojpeg.dylib",
    "/opt/homebrew/opt/jpeg-turbo/lib/libturbojpeg.dylib",
)
_lib_lock = threading.Lock()
_lib_state = {}


class _TjScalingFactor(ctypes.Structure):
    _fields_ = [("num", ctypes.c_int), ("denom", ctypes.c_int)]


def _load_turbojpeg():
    """The ctypes library with prototypes set, or None when libturbojpeg is not installed."""
    with _lib_lock:
        if "lib" in _lib_state:
            return _lib_state["lib"]
        _lib_state["lib"] = lib = _open_turbojpeg()
        return lib


def _open_turbojpeg():
    env = os.environ.get("RECPIPE_TURBOJPEG_LIB")
    candidates = [env] if env else []
    found = ctypes.util.find_library("turbojpeg")
    candidates += ([found] if found else []) + list(_LIB_CANDIDATES)
    for path in candidates:
        try:
            lib = ctypes.CDLL(path)
            _declare(lib)
            log.debug("libturbojpeg loaded from %s", path)
            return lib
        except (OSError, AttributeError):
            continue
    return None


def _declare(lib):
    c_void_p, c_int, c_ulong = ctypes.c_void_p, ctypes.c_int, ctypes.c_ulong
    int_p = ctypes.POINTER(c_int)
    lib.tjInitDecompress.restype = c_void_p
    lib.tjInitDecompress.argtypes = []
    lib.tjDestroy.restype = c_int
    lib.tjDestroy.argtypes = [c_void_p]
    lib.tjDecompressHeader3.restype = c_int
    lib.tjDecompressHeader3.argtypes = [c_void_p, c_void_p, c_ulong, int_p, int_p, int_p, int_p]
    lib.tjDecompress2.restype = c_int
    lib.tjDecompress2.argtypes = [c_void_p, c_void_p, c_ulong, c_void_p, c_int, c_int, c_int,
                                  c_int, c_int]
    lib.tjGetErrorStr2.restype = ctypes.c_char_p
    lib.tjGetErrorStr2.argtypes = [c_void_p]
    lib.tjGetErrorCode.restype = c_int
    lib.tjGetErrorCode.argtypes = [c_void_p]
    lib.tjGetScalingFactors.restype = ctypes.POINTER(_TjScalingFactor)
    lib.tjGetScalingFactors.argtypes = [int_p]


class _TjHandle:
    """A decompressor handle owned by one thread; destroyed with it."""

    def __init__(self, lib):
        self.lib = lib
        self.ptr = lib.tjInitDecompress()
        if not self.ptr:
            raise DecodeError("libturbojpeg: tjInitDecompress failed")

    def __del__(self):
        if getattr(self, "ptr", None):
            self.lib.tjDestroy(self.ptr)
            self.ptr = None

    def error(self):
        message = self.lib.tjGetErrorStr2(self.ptr)
        return message.decode("utf-8", "replace") if message else "unknown error"


def _buffer_address(data):
    """(address, length, keepalive) of a bytes-like object without copying it."""
    if isinstance(data, bytes):
        return ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value, len(data), data
    array = np.frombuffer(data, dtype=np.uint8)
    return array.ctypes.data, array.size, array


class TurboJpegDecoder(Decoder):
    """libjpeg-turbo's TurboJPEG API via ctypes, one handle per thread; all scales it offers.

    ``decode_region`` goes through the ``recpipe._jpegroi`` extension when it was built
    (``roi`` is then True); without it, regions are cut from full decodes.
    """

    name = "turbojpeg"

    def __init__(self, **options):
        super().__init__(**options)
        self._lib = _load_turbojpeg()
        if self._lib is None:
            raise ImportError("libturbojpeg is not installed: apt-get install libturbojpeg0 "
                              "(or set RECPIPE_TURBOJPEG_LIB to its path)")
        self.scales = _turbojpeg_scales(self._lib)
        self._roi = _load_roi()
        self.roi = self._roi is not None
        self._local = threading.local()
        self._flags = ((_TJFLAG_FASTDCT if self.fast_dct else 0)
                       | (_TJFLAG_FASTUPSAMPLE if self.fast_upsample else 0)
                       | (_TJFLAG_STOPONWARNING if self.strict else 0))

    def _handle(self):
        handle = getattr(self._local, "handle", None)
        if handle is None:
            handle = self._local.handle = _TjHandle(self._lib)
        return handle

    def _failure(self, handle):
        """The DecodeError for a failed call; the handle is replaced, as libjpeg-turbo 2.1 leaves
        a handle unusable after some errors (every later header read fails the same way)."""
        self._local.handle = None
        return DecodeError(f"libturbojpeg: {handle.error()}")

    def _decode_jpeg(self, data, scale, channels):
        lib, handle = self._lib, self._handle()
        address, length, keep = _buffer_address(data)
        width, height = ctypes.c_int(), ctypes.c_int()
        subsamp, colorspace = ctypes.c_int(), ctypes.c_int()
        if lib.tjDecompressHeader3(handle.ptr, address, length, ctypes.byref(width),
                                   ctypes.byref(height), ctypes.byref(subsamp),
                                   ctypes.byref(colorspace)) != 0:
            raise self._failure(handle)
        out_h, out_w = _scaled(height.value, scale), _scaled(width.value, scale)
        cmyk = colorspace.value in (_TJCS_CMYK, _TJCS_YCCK)
        if cmyk:
            pixel_format, depth = _TJPF_CMYK, 4
        else:
            pixel_format, depth = (_TJPF_GRAY, 1) if channels == 1 else (_TJPF_RGB, 3)
        out = np.empty((out_h, out_w, depth), dtype=np.uint8)
        status = lib.tjDecompress2(handle.ptr, address, length, out.ctypes.data, out_w, 0, out_h,
                                   pixel_format, self._flags)
        del keep
        if status != 0 and (self.strict or lib.tjGetErrorCode(handle.ptr) != _TJERR_WARNING):
            raise self._failure(handle)
        if cmyk:
            out = _cmyk_to_rgb(out)
            return _to_gray(out) if channels == 1 else out
        return out


def _roi_decode(decoder, data, box, scale, channels):
    """``(pixels, Window)`` of ``box`` (``x1``/``y1`` of -1: to the edge) through
    ``recpipe._jpegroi`` with ``decoder``'s options."""
    scale = _reduce(*scale)
    if scale not in decoder.scales:
        raise ValueError(f"{decoder.name} cannot decode at scale {scale}: "
                         f"supported {list(decoder.scales)}")
    x0, y0, x1, y1 = (int(v) for v in box)
    try:
        buf, height, width, depth, x, y, full_h, full_w = decoder._roi.decode(
            data, scale[0], scale[1], x0, y0, x1, y1, channels, decoder.fast_dct,
            decoder.fast_upsample, decoder.strict, _MAX_REGION_BYTES)
    except ValueError as e:
        raise DecodeError(f"libjpeg: {e}") from None
    img = np.frombuffer(buf, dtype=np.uint8).reshape(height, width, depth)
    if depth == 4:
        img = _cmyk_to_rgb(img)
        img = _to_gray(img) if channels == 1 else img
    return img, Window(x, y, full_h, full_w)


class LibjpegDecoder(Decoder):
    """libjpeg(-turbo) through recpipe's own ``recpipe._jpegroi`` extension: whole images and
    regions, every n/8 DCT scale, with no other library needed at run time. Pixels equal the
    'turbojpeg' backend's (the same libjpeg-turbo, ISLOW DCT, fancy upsampling)."""

    name = "libjpeg"
    scales = _EIGHTHS
    roi = True

    def __init__(self, **options):
        super().__init__(**options)
        self._roi = _load_roi()
        if self._roi is None:
            raise ImportError("recpipe._jpegroi is not built: install the libjpeg-turbo headers "
                              "(apt-get install libjpeg62-turbo-dev) and reinstall recpipe")

    def _decode_jpeg(self, data, scale, channels):
        return _roi_decode(self, data, (0, 0, -1, -1), scale, channels)[0]


def _load_roi():
    """The ``recpipe._jpegroi`` extension module, or None when it was not built."""
    with _lib_lock:
        if "roi" not in _lib_state:
            try:
                from .. import _jpegroi
            except ImportError as e:
                log.debug("recpipe._jpegroi is not built (%s): JPEG regions are cut from full "
                          "decodes; install libjpeg-turbo headers and reinstall recpipe", e)
                _jpegroi = None
            _lib_state["roi"] = _jpegroi
        return _lib_state["roi"]


def turbojpeg_available():
    """True when libturbojpeg loads (the 'turbojpeg' decoder)."""
    return _load_turbojpeg() is not None


def roi_available():
    """True when region decoding is built (``recpipe._jpegroi``) and libturbojpeg loads."""
    return _load_roi() is not None and _load_turbojpeg() is not None


def _turbojpeg_scales(lib):
    with _lib_lock:
        if "scales" not in _lib_state:
            count = ctypes.c_int()
            factors = lib.tjGetScalingFactors(ctypes.byref(count))
            pairs = {(factors[i].num, factors[i].denom) for i in range(count.value)}
            # downscaling only, largest first; reduce to lowest terms for comparability
            reduced = {_reduce(n, d) for n, d in pairs if n <= d}
            _lib_state["scales"] = tuple(sorted(reduced, key=lambda s: -s[0] / s[1]))
        return _lib_state["scales"]


def _reduce(num, den):
    from math import gcd

    g = gcd(num, den)
    return num // g, den // g


# ------------------------------------------------------------------------------------------------
# registry


_BACKENDS = {
    "turbojpeg": TurboJpegDecoder,
    "libjpeg": LibjpegDecoder,
    "simplejpeg": SimpleJpegDecoder,
    "opencv": OpenCVDecoder,
}


def _is_available(name):
    if name == "turbojpeg":
        return _load_turbojpeg() is not None
    if name == "libjpeg":
        return _load_roi() is not None
    if name == "simplejpeg":
        try:
            import simplejpeg  # noqa: F401
        except ImportError:
            return False
        return True
    return name == "opencv"


def available_decoders() -> List[str]:
    """Names of the backends usable in this process, in ``PREFERENCE`` order."""
    return [name for name in PREFERENCE if _is_available(name)]


def get_decoder(name: str = "auto", *, fast_dct: bool = False, fast_upsample: bool = False,
                strict: bool = True, max_pixels: Optional[int] = DEFAULT_MAX_PIXELS) -> "Decoder":
    """A ``Decoder`` by backend name, or the preferred available one for ``"auto"``.

    ``"auto"`` takes the first available of ``PREFERENCE`` (turbojpeg, libjpeg, simplejpeg,
    opencv): a
    static order measured in ``tools/bench_decoders.py`` rather than a per-process timing, so two
    runs on the same machine always decode with the same library.
    """
    options = dict(fast_dct=fast_dct, fast_upsample=fast_upsample, strict=strict,
                   max_pixels=max_pixels)
    if name == "auto":
        return _BACKENDS[available_decoders()[0]](**options)
    if name not in _BACKENDS:
        raise ValueError(f"unknown decoder {name!r}: choose from {sorted(_BACKENDS)} or 'auto'")
    if not _is_available(name):
        if name == "simplejpeg":
            from .._optional import require

            require("simplejpeg", "turbo")
        raise ImportError(f"decoder {name!r} is not available here: "
                          "install libturbojpeg (apt-get install libturbojpeg0)")
    return _BACKENDS[name](**options)
