"""Walking records through a byte source: block-buffered, validated against the file size.

``iter_records`` streams a file (or a byte range of it) in large blocks and yields each record's
offset and payload; ``read_record`` parses the record at one offset. Both check every length
field against the bytes that exist before reading, so a corrupt length never allocates more.
``scan_records`` walks a possibly corrupt file: after a bad record it resynchronises on the next
aligned record head (``find_next_head``, dmlc's ``FindNextRecordIOHead``) and reports the skipped
byte range instead of stopping.
"""

from typing import NamedTuple, Optional

from ...errors import FORMAT, RecordFormatError
from .framing import HEAD_SIZE, MAGIC, MAGIC_BYTES, decode_head, padded
from .sniff import not_recordio_error

__all__ = [
    "SlidingBuffer",
    "ScanItem",
    "read_record",
    "iter_records",
    "find_next_head",
    "scan_records",
    "scan_with_progress",
    "DEFAULT_BLOCK_SIZE",
]

DEFAULT_BLOCK_SIZE = 4 << 20
_PROGRESS_BYTES = 4 << 20  # how often scan_with_progress reports
# a broken record head or length: a fault of the record's bytes (recpipe.errors)
_FRAMING = {"fault": FORMAT, "detector": "RecordIO framing"}


class SlidingBuffer:
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
            if len(self.buf) < n:  # the size was checked against source.size: it shrank
                raise RecordFormatError(
                    f"read {len(self.buf)} of {n} bytes: the file ends before the "
                    f"{self.source.size} bytes it had when opened (truncated while open?)",
                    path=self.source.url, offset=pos)
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
                path=path, offset=pos, record=record, **_FRAMING)
        magic, cflag, length = decode_head(window.get(pos, HEAD_SIZE), 0)
        if magic != MAGIC and pos == 0:  # every RecordIO file starts with the magic
            raise not_recordio_error(path, window.get(0, min(size, 512)))
        if magic != MAGIC:
            what = "bad magic" if first else "bad magic in a continuation part"
            raise RecordFormatError(f"{what}: expected 0x{MAGIC:08x}, found 0x{magic:08x}",
                                    path=path, offset=pos, record=record, **_FRAMING)
        if first and cflag not in (0, 1):
            raise RecordFormatError(
                f"not at a record head: part has cflag {cflag} (a head has 0 or 1)",
                path=path, offset=pos, record=record, **_FRAMING)
        if not first and cflag not in (2, 3):
            raise RecordFormatError(
                f"multi-part record interrupted: expected a continuation part (cflag 2 or 3), "
                f"found cflag {cflag}", path=path, offset=pos, record=record, **_FRAMING)
        body = pos + HEAD_SIZE
        stored = padded(length)
        if body + stored > size:
            what = "its zero padding" if body + length <= size else "its bytes"
            raise RecordFormatError(
                f"truncated record: length field says {length} bytes (padded to "
                f"{stored}) but only {size - body} remain in the file; {what} are missing",
                path=path, offset=pos, record=record, **_FRAMING)
        if keep_payload:
            pieces.append(window.get(body, length))
        pos = body + stored
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
    window = SlidingBuffer(source, block_size, start)
    pos = start
    record = first_record
    while pos < end:
        payload, next_pos = read_record(window, pos, record=record, keep_payload=keep_payload)
        yield pos, payload
        pos = next_pos
        record += 1


def find_next_head(source, start, end=None, *, block_size=DEFAULT_BLOCK_SIZE):
    """Offset of the first 4-byte-aligned record head at or after ``start``, or None.

    A head is the magic word followed by an lrec whose cflag is 0 or 1; in a valid file every
    aligned magic word is a part head, so this is where reading can resume after a bad record.
    """
    end = source.size if end is None else min(end, source.size)
    pos = (start + 3) & ~3
    step = 1 << 16  # grows up to block_size: a nearby head costs a small read
    while pos + HEAD_SIZE <= end:
        block = bytes(source.read(pos, step + 4))
        hit = block.find(MAGIC_BYTES)
        while 0 <= hit < step:
            if ((pos + hit) % 4 == 0 and hit + HEAD_SIZE <= len(block)
                    and pos + hit + HEAD_SIZE <= end):
                if decode_head(block, hit)[1] in (0, 1):
                    return pos + hit
            hit = block.find(MAGIC_BYTES, hit + 1)
        pos += step
        step = min(step * 2, max(block_size & ~3, 1 << 16))
    return None


class ScanItem(NamedTuple):
    """One step of ``scan_records``: a record, or a bad byte range ``[offset, end)`` skipped.

    ``error`` is None for a good record (then ``record`` is its position among the good records
    and ``payload`` its bytes when kept); for a bad range ``error`` is the RecordFormatError that
    stopped reading at ``offset`` and ``record`` the position the record would have had.
    """

    offset: int
    end: int
    record: int
    payload: Optional[bytes]
    error: Optional[RecordFormatError]


def scan_records(source, *, keep_payload=True, block_size=DEFAULT_BLOCK_SIZE, start=0,
                 stop=None):
    """Yield a ``ScanItem`` for every record and every unreadable byte range, in file order.

    ``start``/``stop``: walk from byte ``start`` (a record head) and stop at the first step that
    begins at or after ``stop`` (default: the whole file). Steps are those of a walk from 0:
    when that walk passes through ``start``, the items are exactly its items in
    ``[start, stop)``, with ``record`` counted from 0 at ``start``; the last item's ``end`` is
    where that walk goes on (a record may extend past ``stop``). Byte-range tasks of one file
    (``recpipe.packing.chunks``) rely on this."""
    window = SlidingBuffer(source, block_size, start)
    pos = start
    record = 0
    stop = source.size if stop is None else min(stop, source.size)
    while pos < stop:
        try:
            payload, next_pos = read_record(window, pos, record=record, keep_payload=keep_payload)
        except RecordFormatError as error:
            resume = find_next_head(source, pos + 4, block_size=block_size)
            end = source.size if resume is None else resume
            yield ScanItem(pos, end, record, None, error)
            pos = end
            continue
        yield ScanItem(pos, next_pos, record, payload, None)
        pos = next_pos
        record += 1


def scan_with_progress(source, *, keep_payload, progress, start=0, stop=None):
    """``scan_records`` (of bytes ``start``..``stop``) reporting the bytes scanned to
    ``progress(bytes)`` (every 4 MiB)."""
    reported = start
    last = source.size if stop is None else min(stop, source.size)
    for item in scan_records(source, keep_payload=keep_payload, start=start, stop=stop):
        end = item.end if item.error is not None else item.offset
        if progress is not None and end - reported >= _PROGRESS_BYTES:
            progress(end - reported)
            reported = end
        yield item
    if progress is not None and last > reported:
        progress(last - reported)
