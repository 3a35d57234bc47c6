"""Walking records through a byte source: block-buffered, validated against the file size.

``iter_records`` streams a file (or a byte range of it) in large blocks and yields each record's
offset and payload; ``read_record`` parses the record at one offset. Both check every length
field against the bytes that exist before reading, so a corrupt length never allocates more.
"""

from ..errors import RecordFormatError
from .format import HEAD_SIZE, MAGIC, MAGIC_BYTES, decode_head, padded

__all__ = ["Window", "read_record", "iter_records", "DEFAULT_BLOCK_SIZE"]

DEFAULT_BLOCK_SIZE = 4 << 20


class Window:
    """A sliding buffer over a source: ``get(pos, n)`` returns file bytes ``[pos, pos+n)``."""

    def __init__(self, source, block_size=DEFAULT_BLOCK_SIZE, start=0, preload=0):
        self.source = source
        self.block_size = block_size
        self.start = start
        self.buf = memoryview(source.read(start, preload)) if preload else memoryview(b"")
        self.reads = 1 if preload else 0

    def get(self, pos, n):
        rel = pos - self.start
        if rel < 0 or rel + n > len(self.buf):
            self.start = pos
            self.buf = memoryview(self.source.read(pos, max(n, self.block_size)))
            self.reads += 1
            rel = 0
        return self.buf[rel:rel + n]


def read_record(window, pos, *, record=None, keep_payload=True):
    """Parse the record whose first part head is at file offset ``pos``.

    Returns ``(payload, next_pos)``; ``payload`` is None when ``keep_payload`` is false.
    """
    source = window.source
    size = source.size
    path = source.url
    pieces = []
    first = True
    while True:
        if pos + HEAD_SIZE > size:
            raise RecordFormatError(
                f"truncated record: {size - pos} bytes left where an 8-byte part head is needed",
                path=path, offset=pos, record=record)
        magic, cflag, length = decode_head(window.get(pos, HEAD_SIZE), 0)
        if magic != MAGIC:
            what = "bad magic" if first else "bad magic in a continuation part"
            raise RecordFormatError(f"{what}: expected 0x{MAGIC:08x}, found 0x{magic:08x}",
                                    path=path, offset=pos, record=record)
        if first and cflag not in (0, 1):
            raise RecordFormatError(
                f"not at a record head: part has cflag {cflag} (a head has 0 or 1)",
                path=path, offset=pos, record=record)
        if not first and cflag not in (2, 3):
            raise RecordFormatError(
                f"multi-part record interrupted: expected a continuation part (cflag 2 or 3), "
                f"found cflag {cflag}", path=path, offset=pos, record=record)
        body = pos + HEAD_SIZE
        if body + length > size:
            raise RecordFormatError(
                f"truncated record: length field says {length} bytes but only {size - body} "
                f"remain in the file", path=path, offset=pos, record=record)
        if keep_payload:
            pieces.append(window.get(body, length))
        pos = min(body + padded(length), size)
        if cflag in (0, 3):
            if not keep_payload:
                return None, pos
            if len(pieces) == 1:
                return bytes(pieces[0]), pos
            return MAGIC_BYTES.join(bytes(p) for p in pieces), pos
        first = False


def iter_records(source, start=0, end=None, *, first_record=0, keep_payload=True,
                 block_size=DEFAULT_BLOCK_SIZE):
    """Yield ``(offset, payload)`` for the records whose heads lie in ``[start, end)``, in order."""
    end = source.size if end is None else min(end, source.size)
    window = Window(source, block_size, start)
    pos = start
    record = first_record
    while pos < end:
        payload, next_pos = read_record(window, pos, record=record, keep_payload=keep_payload)
        yield pos, payload
        pos = next_pos
        record += 1
