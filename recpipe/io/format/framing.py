"""dmlc RecordIO framing: how one payload becomes aligned parts on disk, and back.

A part is ``[magic u32][lrec u32][length bytes][zero pad to 4]`` with ``lrec = cflag << 29 |
length``. Every 4-byte-aligned occurrence of the magic word inside a payload is cut out and becomes
a part boundary (cflag 1 first, 2 middle, 3 last); readers put the magic back between parts. See
``shared/docs/recordio-compat.md`` section 1.

Reading a part head (``decode_head``) and its padding (``padded``) are defined once, in C
(csrc/record/record.h, through ``recpipe._kernels``): the same code ``recpipe._batch`` reads
records with. Writing (``frame``) is only here: no C writes records.
"""

import struct

from ..._optional import native
from ...errors import RecordTooLargeError

__all__ = [
    "MAGIC",
    "MAGIC_BYTES",
    "MAX_RECORD_SIZE",
    "HEAD_SIZE",
    "frame",
    "check_size",
    "decode_head",
    "padded",
]

MAGIC = 0xCED7230A
MAGIC_BYTES = struct.pack("<I", MAGIC)
MAX_RECORD_SIZE = (1 << 29) - 1
HEAD_SIZE = 8  # MAGIC, MAX_RECORD_SIZE and HEAD_SIZE are record.h's (tests/io check they agree)
_HEAD = struct.Struct("<II")
_PADDING = (b"", b"\0\0\0", b"\0\0", b"\0")
_C = None  # recpipe._kernels, loaded on first use (importing recpipe does not need it built)


def _records():
    global _C
    if _C is None:
        _C = native("_kernels")
    return _C


def padded(length):
    """``length`` rounded up to a multiple of 4 (record.h's ``record_padded``)."""
    return (_C or _records()).padded(length)


def _aligned_magic_offsets(payload):
    offsets = []
    i = payload.find(MAGIC_BYTES)
    while i >= 0:
        if i % 4 == 0:
            offsets.append(i)
            i = payload.find(MAGIC_BYTES, i + 4)
        else:
            i = payload.find(MAGIC_BYTES, i + 1)
    return offsets


def check_size(size):
    """Raise RecordTooLargeError when a payload of ``size`` bytes cannot be one record."""
    if size > MAX_RECORD_SIZE:
        raise RecordTooLargeError(
            f"RecordIO records are limited to {MAX_RECORD_SIZE} bytes (2**29 - 1); got {size}")


def _as_bytes(payload):
    """``payload`` as bytes/bytearray after checking its size (so nothing big is copied first)."""
    if isinstance(payload, (bytes, bytearray)):
        check_size(len(payload))
        return payload
    if isinstance(payload, str) or payload is None:
        raise TypeError(f"a record payload must be bytes-like, not {type(payload).__name__}")
    view = memoryview(payload)
    check_size(view.nbytes)
    return view.tobytes()


def frame(payload):
    """Return the on-disk bytes of one record, byte-identical to MXNet's writer.

    (Writing stays in Python: only the writers frame records, nothing in C does, and the
    payload's pieces are joined by ``bytes.join`` without a copy more than C would make.)

    ``payload`` is any bytes-like object; more than 2**29 - 1 bytes raises RecordTooLargeError.
    """
    payload = _as_bytes(payload)
    size = len(payload)
    cuts = _aligned_magic_offsets(payload)
    if not cuts:
        return b"".join((_HEAD.pack(MAGIC, size), payload, _PADDING[size % 4]))
    pieces = []
    start = 0
    for cut in cuts:
        cflag = 1 if start == 0 else 2
        pieces.append(_HEAD.pack(MAGIC, cflag << 29 | (cut - start)))
        pieces.append(payload[start:cut])
        start = cut + 4
    pieces.append(_HEAD.pack(MAGIC, 3 << 29 | (size - start)))
    pieces.append(payload[start:])
    pieces.append(_PADDING[size % 4])
    return b"".join(pieces)


def decode_head(data, pos):
    """Return ``(magic, cflag, length)`` of the part head at ``data[pos:pos+8]`` (record.h's
    ``record_head_at``; struct.error when ``data`` ends before the head)."""
    return (_C or _records()).decode_head(data, pos)
