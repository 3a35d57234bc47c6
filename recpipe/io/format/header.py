"""MXNet's image record header (``IRHeader``) and the ``pack``/``unpack`` helpers of
``mx.recordio``.

Payload = ``<IfQQ`` header (flag, label, id, id2; 24 bytes) + ``flag`` float32 labels + image bytes.
A scalar label means flag 0; any sequence (even of length 1) means ``flag = len(labels)``.

Reading a header (``unpack_header``) is defined once, in C (csrc/record/record.h, through
``recpipe._kernels``), the same code ``recpipe._batch`` reads headers with; this module turns its
status into the precise error. Writing (``pack``) is only here: no C writes headers.
"""

import numbers
import struct
from typing import Any, NamedTuple, Optional, Tuple

import numpy as np

from ..._optional import native
from ...errors import FORMAT, RecordFormatError
from ...image.opencv import imdecode, load_cv2

__all__ = ["IRHeader", "HEADER_SIZE", "pack", "unpack", "unpack_header", "pack_img", "unpack_img"]

_IR_FORMAT = struct.Struct("<IfQQ")  # for pack; HEADER_SIZE is record.h's IMAGE_HEADER too
HEADER_SIZE = _IR_FORMAT.size
_C = None  # recpipe._kernels, loaded on first use (importing recpipe does not need it built)


def _records():
    global _C
    if _C is None:
        _C = native("_kernels")
    return _C


class IRHeader(NamedTuple):
    """Image record header. ``label`` is a float, or a float32 array when ``flag > 0``."""

    flag: int
    label: Any
    id: int
    id2: int


def pack(header: IRHeader, s: bytes) -> bytes:
    """Prefix ``s`` (bytes) with ``header``, as ``mx.recordio.pack`` does."""
    header = IRHeader(*header)
    if isinstance(header.label, numbers.Number):
        header = header._replace(flag=0)
    else:
        label = np.asarray(header.label, dtype=np.float32)
        header = header._replace(flag=label.size, label=0)
        s = label.tobytes() + bytes(s)
    return _IR_FORMAT.pack(*header) + bytes(s)


def unpack_header(s: bytes, *, path: Optional[str] = None,
                  record: Optional[int] = None) -> Tuple[IRHeader, int]:
    """Return ``(header, labels_end)`` where ``s[labels_end:]`` is the image (record.h's
    ``image_header_of``)."""
    flag, label, id_, id2, end = (_C or _records()).image_header(s)
    if end < 0:
        raise _header_error(s, flag, end, path, record)
    if flag:
        label = np.frombuffer(s, np.float32, flag, HEADER_SIZE)
    return IRHeader(flag, label, id_, id2), end


def _header_error(s, flag, status, path, record):
    size = len(s)
    if status == _records().HEADER_SHORT:
        reason = f"payload of {size} bytes is shorter than the {HEADER_SIZE}-byte image header"
    else:
        reason = f"header says {flag} labels but the payload has {size} bytes"
    return RecordFormatError(reason, path=path, record=record, fault=FORMAT, detector="IRHeader")


def unpack(s: bytes) -> Tuple[IRHeader, bytes]:
    """Split a payload into ``(IRHeader, image bytes)``, as ``mx.recordio.unpack`` does."""
    header, end = unpack_header(s)
    return header, s[end:]


def pack_img(header: IRHeader, img: np.ndarray, quality: int = 95, img_fmt: str = ".jpg") -> bytes:
    """Encode ``img`` (an OpenCV BGR array) and pack it with ``header``, like
    ``mx.recordio.pack_img``."""
    cv2 = load_cv2()
    fmt = img_fmt.lower()
    if fmt in (".jpg", ".jpeg"):
        params = [cv2.IMWRITE_JPEG_QUALITY, quality]
    elif fmt == ".png":
        params = [cv2.IMWRITE_PNG_COMPRESSION, min(max(quality, 0), 9)]
    else:
        params = []
    ok, buf = cv2.imencode(img_fmt, img, params)
    if not ok:
        raise ValueError(f"failed to encode image as {img_fmt}")
    return pack(header, buf.tobytes())


def unpack_img(s: bytes, iscolor: int = -1) -> Tuple[IRHeader, np.ndarray]:
    """Unpack a payload and decode its image with OpenCV (BGR), like ``mx.recordio.unpack_img``."""
    header, img = unpack(s)
    return header, imdecode(img, iscolor, what=f"image (id {header.id})")
