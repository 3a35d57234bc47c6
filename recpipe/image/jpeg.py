"""The one JPEG marker walker: the segments of a JPEG header, up to the image data.

``segments(data)`` yields ``(marker, payload_start, payload_end)`` for each marker segment
after SOI, skipping fill bytes and standalone markers, and stops after SOS (the image data
follows) or at EOI. A byte where a marker should be, or a segment length under 2, raises
``JpegHeaderError`` with the byte offset; callers decide whether that is an error
(``recpipe.decode.decoders``) or just the end of what can be learned (``recpipe.image.info``).

``count_scans(data)`` walks the whole stream instead: the marker segments between scans too,
skipping entropy-coded data, and counts the scans (SOS markers), without decoding any.
"""

import struct

__all__ = ["EOI", "JpegHeaderError", "SOF_MARKERS", "SOS", "STANDALONE_MARKERS", "count_scans",
           "segments"]

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


def count_scans(data, at_least=None):
    """The number of scans (SOS segments) in a JPEG stream, found without decoding: every SOS
    is an FF DA pair (FF bytes inside entropy-coded data are stuffed), so when ``data`` holds
    no more than ``at_least`` of them that count is returned at once (an upper bound); else
    the markers after the first scan are walked (segments skipped by their lengths, so table
    bytes or an embedded thumbnail are not counted) for the exact number, or until it is over
    ``at_least``."""
    buf = data if isinstance(data, (bytes, bytearray)) else bytes(data)
    start = None
    try:
        for marker, _, end in segments(buf):
            if marker == SOS:
                start = end
    except JpegHeaderError:
        return 0
    if start is None:
        return 0
    bound = 1 + buf.count(b"\xff\xda", start)
    if at_least is not None and bound <= at_least:
        return bound
    return 1 + _scans_after(buf, start, at_least)


def _scans_after(buf, pos, stop):
    """SOS segments after ``pos`` (inside the first scan's entropy-coded data), counting no
    further than ``stop`` + 1 (None: all)."""
    count, size = 0, len(buf)
    while stop is None or count <= stop:
        pos = buf.find(b"\xff", pos)
        if pos < 0 or pos + 1 >= size:
            return count
        marker = buf[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker == 0x00 or marker in STANDALONE_MARKERS:  # stuffing, restarts
            pos += 2
            continue
        if marker == EOI or pos + 4 > size:
            return count
        if marker == SOS:
            count += 1
        pos += 2 + struct.unpack_from(">H", buf, pos + 2)[0]
    return count
