"""The one JPEG marker walker: the segments of a JPEG header, up to the image data.

``segments(data)`` yields ``(marker, payload_start, payload_end)`` for each marker segment
after SOI, skipping fill bytes and standalone markers, and stops after SOS (the image data
follows) or at EOI. A byte where a marker should be, or a segment length under 2, raises
``JpegHeaderError`` with the byte offset; callers decide whether that is an error
(``recpipe.decode.decoders``) or just the end of what can be learned (``recpipe.imageinfo``).
"""

import struct

__all__ = ["EOI", "JpegHeaderError", "SOF_MARKERS", "SOS", "STANDALONE_MARKERS", "segments"]

SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # SOFn, not DHT/JPG/DAC
STANDALONE_MARKERS = frozenset(range(0xD0, 0xD8)) | {0x01, 0xD8}
SOS, EOI = 0xDA, 0xD9


class JpegHeaderError(ValueError):
    """The header is not a well-formed sequence of marker segments at ``offset``."""

    def __init__(self, reason, offset):
        super().__init__(f"JPEG header: {reason} at byte {offset}")
        self.reason = reason
        self.offset = offset


def segments(data):
    """Yield ``(marker, payload_start, payload_end)`` up to and including SOS (or EOI)."""
    pos, size = 2, len(data)
    while pos + 4 <= size:
        if data[pos] != 0xFF:
            raise JpegHeaderError("expected a marker", pos)
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in STANDALONE_MARKERS:
            pos += 2
            continue
        if marker == EOI:
            return
        (length,) = struct.unpack_from(">H", data, pos + 2)
        if length < 2:
            raise JpegHeaderError(f"invalid segment length {length}", pos)
        yield marker, pos + 4, min(pos + 2 + length, size)
        if marker == SOS:
            return
        pos += 2 + length
