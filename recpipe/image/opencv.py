"""OpenCV, loaded in one place: ``load_cv2()`` and the one ``imdecode`` with one failure behaviour.

``load_cv2()`` imports OpenCV for every part of recpipe. OpenCV reads its decoder's pixel limit,
``OPENCV_IO_MAX_IMAGE_PIXELS``, once, when it is loaded; when recpipe is the first to load it,
the limit is set beforehand to ``DEFAULT_MAX_PIXELS`` unless the environment sets one (formats
other than JPEG and PNG are sized by decoding them: the limit bounds that work). Nothing is set
when recpipe is merely imported.

``imdecode(data, flags)`` is ``cv2.imdecode`` that returns an array or raises ``DecodeError``
naming what failed (the caller's ``what``, its size and OpenCV's reason), whether the bytes are
empty, OpenCV returns None (not an image it reads) or OpenCV raises its own ``cv2.error``.

``resize(src, dsize, ...)`` is ``cv2.resize`` with one difference: a bicubic resize runs with
Intel IPP switched off in the calling thread (``ipp_off``). The pip wheels hand 8-bit bicubic
resizes to IPP, whose results depend on the CPU it dispatches to (about 4% of the values differ
by 1 from OpenCV's own); without it they are OpenCV's own fixed-point arithmetic, the same on
every x86-64 CPU, which ``recpipe._batch`` reproduces bit for bit. Every bicubic resize of the
decode path goes through it.
"""

import os
import sys
from typing import Any, Dict, Optional

import numpy as np

from ..errors import DecodeError

__all__ = ["DEFAULT_MAX_PIXELS", "SET_BY_RECPIPE", "imdecode", "ipp_off", "load_cv2", "resize"]

# images declaring more pixels are refused before decoding (Pillow's MAX_IMAGE_PIXELS)
DEFAULT_MAX_PIXELS = 89_478_485


# the environment variables recpipe set itself, name -> value (``recpipe doctor`` tells them
# apart from the user's)
SET_BY_RECPIPE: Dict[str, str] = {}


def load_cv2() -> Any:
    """The ``cv2`` module, imported with recpipe's pixel limit when recpipe loads it first."""
    if "cv2" not in sys.modules and "OPENCV_IO_MAX_IMAGE_PIXELS" not in os.environ:
        os.environ["OPENCV_IO_MAX_IMAGE_PIXELS"] = str(DEFAULT_MAX_PIXELS)
        SET_BY_RECPIPE["OPENCV_IO_MAX_IMAGE_PIXELS"] = str(DEFAULT_MAX_PIXELS)
    import cv2

    return cv2


class ipp_off:
    """``with ipp_off():`` OpenCV's Intel IPP calls off in the calling thread (OpenCV keeps the
    switch per thread), the thread's previous setting restored after; nothing else changes."""

    __slots__ = ("_ipp", "_was_on")

    def __init__(self) -> None:
        self._ipp = load_cv2().ipp
        self._was_on = False

    def __enter__(self) -> "ipp_off":
        self._was_on = bool(self._ipp.useIPP())
        if self._was_on:
            self._ipp.setUseIPP(False)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._was_on:
            self._ipp.setUseIPP(True)


def resize(src: np.ndarray, dsize: Any, dst: Optional[np.ndarray] = None, fx: float = 0.0,
           fy: float = 0.0, interpolation: int = 1) -> np.ndarray:
    """``cv2.resize(src, dsize, dst, fx, fy, interpolation)``; bicubic (``INTER_CUBIC``, 2)
    with IPP off in this thread (``ipp_off``), so its pixels are OpenCV's own arithmetic."""
    cv2 = load_cv2()
    if interpolation != cv2.INTER_CUBIC:
        return cv2.resize(src, dsize, dst=dst, fx=fx, fy=fy, interpolation=interpolation)
    with ipp_off():
        return cv2.resize(src, dsize, dst=dst, fx=fx, fy=fy, interpolation=interpolation)


def imdecode(data: Any, flags: int, *, what: str = "image", path: Optional[str] = None,
             record: Optional[int] = None) -> np.ndarray:
    """``cv2.imdecode(data, flags)``: OpenCV's array (BGR, or one channel), or ``DecodeError``
    ("OpenCV cannot decode the N-byte <what>: <reason>", with ``path``/``record`` when given)."""
    cv2 = load_cv2()
    buffer = data if isinstance(data, np.ndarray) else np.frombuffer(data, dtype=np.uint8)
    if not buffer.size:  # OpenCV asserts on an empty buffer instead of returning None
        raise _failed(buffer, what, "no bytes", path, record)
    try:
        decoded = cv2.imdecode(buffer, flags)
    except cv2.error as e:
        raise _failed(buffer, what, str(e).strip().splitlines()[-1], path, record) from None
    if decoded is None:
        raise _failed(buffer, what, "unknown format or corrupt data", path, record)
    return decoded


def _failed(buffer, what, reason, path, record):
    return DecodeError(f"OpenCV cannot decode the {buffer.nbytes}-byte {what}: {reason}",
                       path=path, record=record)
