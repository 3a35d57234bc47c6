"""Image decoders behind one interface: libjpeg-turbo (ctypes), recpipe's own libjpeg
extension, simplejpeg and OpenCV (the interface, headers and shared helpers: ``decoder_base``).

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
  the same default unless already set, when recpipe loads OpenCV: ``recpipe.image.opencv``).
- Corrupt data raises ``recpipe.DecodeError`` carrying the backend's message, never crashes.
  A truncated JPEG (libjpeg "Premature end of JPEG file" and other recoverable *warnings*)
  raises too when ``strict=True`` (the default); with ``strict=False`` the backend's partial
  image (grey/garbage at the bottom) is returned, as libjpeg and ``cv2.imdecode`` do.
- A JPEG of more than ``max_scans`` scans (default 100; None: no limit) raises
  ``recpipe.DecodeError`` before its extra scans cost anything: libjpeg's progress monitor
  stops it in ``recpipe._batch``; for the other libraries the scans
  are counted in the stream first (``recpipe.image.jpeg.count_scans``, no decoding).
- Decoders are safe to share between threads (libjpeg-turbo keeps one handle per thread) and
  release the GIL while decoding (ctypes calls, simplejpeg's ``nogil`` and OpenCV all do).

Region decoding: ``decode_region(data, box, scale=, channels=)`` returns ``(pixels, window)``
where ``pixels`` covers at least ``box = (x0, y0, x1, y1)`` (coordinates of the image decoded at
``scale``) and ``window = Window(x, y, full_height, full_width)`` says where ``pixels[0, 0]`` lies
in that image and how big the whole image is. Backends with ``roi = True`` decode only the region
(the 'turbojpeg' backend with the ``recpipe._batch`` C extension: libjpeg-turbo's
``jpeg_crop_scanline`` / ``jpeg_skip_scanlines``, stopping after the region's last row); the
others decode the whole image and return it with ``window = (0, 0, H, W)``. Inside ``box`` the
pixels equal a full decode's (the extension widens libjpeg's column crop by a column each side,
so the chroma-upsampling seam at the window's edges stays outside ``box``). With ``strict=True``
a region decode still rejects a stream that stops before its EOI marker, but corrupt entropy data
below the region is never decoded, so not reported. With ``integrity="strict"`` it is: after
the region, the rest of the scan is entropy-decoded to EOI (``jpeg_skip_scanlines``: Huffman
decoding, no IDCT), so a region decode raises on every warning a full decode gives (whole-image
decodes read to EOI in every mode). Limits of the other backends: 'turbojpeg' full decodes stop
on a warning (``TJFLAG_STOPONWARNING``, ``tjGetErrorCode``) and 'simplejpeg' raises on one
(``strict=True``): both decode the whole image, so they catch what a full decode catches in
every mode; OpenCV reports no warnings at all, so the 'opencv' backend first entropy-decodes the
stream with ``recpipe._batch`` (at 1/8 scale) when that is built, else only checks the
stream's structure (EOI present, no invalid marker in the entropy-coded data).

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
import threading
import warnings
from typing import Any, Dict, List, Optional

import numpy as np

from ..errors import DecodeError
from .decoder_base import (DEFAULT_MAX_PIXELS, DEFAULT_MAX_SCANS, EIGHTHS, MAX_REGION_BYTES,
                           Decoder, Window, check_jpeg_complete, cmyk_to_rgb, image_size,
                           is_jpeg, load_roi, opencv_decode, reduce_scale, roi_decode,
                           scaled_size, to_gray)

__all__ = [
    "DEFAULT_MAX_PIXELS",
    "DEFAULT_MAX_SCANS",
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

_OPENCV_SCALES = ((1, 1), (1, 2), (1, 4), (1, 8))


# ------------------------------------------------------------------------------------------------
# OpenCV (always available; fallback for non-JPEG bytes)


class OpenCVDecoder(Decoder):
    """``cv2.imdecode``; JPEG DCT scales 1/2, 1/4, 1/8 through ``IMREAD_REDUCED_*``.

    OpenCV has no fast-DCT or fast-upsampling switch: those options are accepted and ignored.
    """

    name = "opencv"
    scales = _OPENCV_SCALES

    def _decode_jpeg(self, data, scale, channels):
        if self.strict:
            _validate_jpeg(data)
        return opencv_decode(data, channels, reduce=scale[1] // scale[0])


def _validate_jpeg(data):
    """Raise DecodeError where OpenCV would only warn and return grey or garbage pixels.

    With ``recpipe._batch`` built, the stream is entropy-decoded by libjpeg at 1/8 scale with
    warnings as errors (bad Huffman codes, corrupt data, truncation). Without it, the stream's
    structure is checked: an EOI after the last scan, and no invalid marker (a 0xFF not followed
    by 0x00, a restart marker or a segment marker) inside the entropy-coded data.
    """
    roi = load_roi()
    if roi is not None:
        try:
            roi.decode_region(data, 1, 8, 0, 0, -1, -1, 1, True, True, True, MAX_REGION_BYTES, True,
                       0)  # the scans were counted before
        except ValueError as e:
            raise DecodeError(f"libjpeg: {e}") from None
        return
    check_jpeg_complete(data)
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
    scales = EIGHTHS

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
                height, width = image_size(data)  # a JPEG here: from its SOF
                min_h, min_w = scaled_size(height, scale), scaled_size(width, scale)
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
_lib_state: Dict[str, Any] = {}


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
        except (OSError, AttributeError) as exc:
            if path == env:  # asked for by name: say why it is not used
                warnings.warn(f"RECPIPE_TURBOJPEG_LIB={env} is not a usable libturbojpeg "
                              f"({exc}); looking for the system's instead", RuntimeWarning,
                              stacklevel=2)
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

    ``decode_region`` goes through the ``recpipe._batch`` extension when it was built
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
        self._roi = load_roi()
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
        out_h, out_w = scaled_size(height.value, scale), scaled_size(width.value, scale)
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
            out = cmyk_to_rgb(out)
            return to_gray(out) if channels == 1 else out
        return out


class LibjpegDecoder(Decoder):
    """libjpeg(-turbo) through recpipe's own ``recpipe._batch`` extension: whole images and
    regions, every n/8 DCT scale, with no other library needed at run time. Pixels equal the
    'turbojpeg' backend's (the same libjpeg-turbo, ISLOW DCT, fancy upsampling)."""

    name = "libjpeg"
    scales = EIGHTHS
    roi = True
    counts_scans = True  # libjpeg's progress monitor stops at max_scans

    def __init__(self, **options):
        super().__init__(**options)
        self._roi = load_roi()
        if self._roi is None:
            raise ImportError("recpipe._batch is not built: install the libjpeg-turbo headers "
                              "(apt-get install libjpeg62-turbo-dev) and reinstall recpipe")

    def _decode_jpeg(self, data, scale, channels):
        return roi_decode(self, data, (0, 0, -1, -1), scale, channels)[0]


def turbojpeg_available():
    """True when libturbojpeg loads (the 'turbojpeg' decoder)."""
    return _load_turbojpeg() is not None


def roi_available():
    """True when region decoding is built (``recpipe._batch``) and libturbojpeg loads."""
    return load_roi() is not None and _load_turbojpeg() is not None


def _turbojpeg_scales(lib):
    with _lib_lock:
        if "scales" not in _lib_state:
            count = ctypes.c_int()
            factors = lib.tjGetScalingFactors(ctypes.byref(count))
            pairs = {(factors[i].num, factors[i].denom) for i in range(count.value)}
            # downscaling only, largest first; reduce to lowest terms for comparability
            reduced = {reduce_scale(n, d) for n, d in pairs if n <= d}
            _lib_state["scales"] = tuple(sorted(reduced, key=lambda s: -s[0] / s[1]))
        return _lib_state["scales"]


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
        return load_roi() is not None
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
                strict: bool = True, max_pixels: Optional[int] = DEFAULT_MAX_PIXELS,
                integrity: str = "auto",
                max_scans: Optional[int] = DEFAULT_MAX_SCANS) -> "Decoder":
    """A ``Decoder`` by backend name, or the preferred available one for ``"auto"``.

    ``integrity`` ("off", "auto", "strict"): see the module docstring (with "strict", region
    decodes read their scan to the end; it implies ``strict=True``). ``max_scans``: JPEGs with
    more scans raise DecodeError (None: no limit).

    ``"auto"`` takes the first available of ``PREFERENCE`` (turbojpeg, libjpeg, simplejpeg,
    opencv): a static order measured in ``benchmarks/suites/decoders.py`` rather than a
    per-process timing, so two runs on the same machine always decode with the same library.
    """
    options = dict(fast_dct=fast_dct, fast_upsample=fast_upsample, strict=strict,
                   max_pixels=max_pixels, integrity=integrity, max_scans=max_scans)
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
