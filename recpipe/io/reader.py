"""``RecordReader``: random and sequential access to a ``.rec`` file at any fsspec URL."""

import bisect
import logging
import operator
import weakref

from ..errors import RecordFormatError
from .format import HEAD_SIZE, MAGIC, decode_head
from .index import index_url_for, read_index
from .scan import DEFAULT_BLOCK_SIZE, Window, iter_records, read_record
from .sources import exists, open_source

__all__ = ["RecordReader"]

log = logging.getLogger(__name__)


class RecordReader:
    """Read records of a RecordIO file by position, by index key, or in file order.

    ``index_url=None`` uses the ``.idx`` beside the ``.rec`` when one exists; ``index_url=False``
    never reads an index. Without an index the file is scanned once (heads only) to find the
    records, and keys are positions ``0..N-1``. Reads are thread-safe and fork-safe.

    >>> with RecordReader("train.rec") as reader:        # doctest: +SKIP
    ...     first = reader[0]
    ...     payload = reader.read_key(42)
    """

    def __init__(self, url, index_url=None, storage_options=None, *, key_type=int):
        self.url = str(url)
        self.storage_options = storage_options
        self._source = open_source(url, storage_options)
        # a reader dropped without close() still closes its file (when collected, or at exit)
        self._closer = weakref.finalize(self, self._source.close)
        try:
            self._load_index(index_url, storage_options, key_type)
        except BaseException:
            self._closer()
            raise
        self._position_of_key = {key: i for i, key in enumerate(self.keys)}
        self._sorted_offsets = sorted(set(self.offsets))

    def _load_index(self, index_url, storage_options, key_type):
        if index_url is None:
            candidate = index_url_for(self.url)
            index_url = candidate if candidate != self.url and exists(candidate, storage_options) else None
        self.index_url = str(index_url) if index_url else None
        if self.index_url:
            self.keys, self.offsets = read_index(self.index_url, storage_options, key_type=key_type)
            self._check_offsets()
        else:
            self.offsets = [pos for pos, _ in iter_records(self._source, keep_payload=False)]
            self.keys = list(range(len(self.offsets)))

    def _check_offsets(self):
        size = self._source.size
        for i, offset in enumerate(self.offsets):
            if offset >= size or offset % 4:
                why = "past the end of the file" if offset >= size else "not 4-byte aligned"
                raise RecordFormatError(
                    f"index {self.index_url} line {i + 1}: offset {offset} is {why} "
                    f"(file size {size})", path=self.url, offset=offset, record=i)

    @property
    def size(self):
        """Size of the ``.rec`` file in bytes."""
        return self._source.size

    def __len__(self):
        return len(self.offsets)

    def span(self, position):
        """Byte range ``(start, end)`` holding record ``position``: up to the next indexed offset."""
        start = self.offsets[position]
        following = bisect.bisect_right(self._sorted_offsets, start)
        end = self._sorted_offsets[following] if following < len(self._sorted_offsets) else self.size
        return start, end

    def __getitem__(self, position):
        position = operator.index(position)
        if not -len(self) <= position < len(self):
            raise IndexError(f"record position {position} out of range for {len(self)} records")
        position %= len(self)
        start, end = self.span(position)
        # the span is exact with a full index; a partial one may leave big gaps: do not read them
        window = Window(self._source, start=start, preload=self._preload(start, end))
        payload, next_pos = read_record(window, start, record=position)
        if next_pos > end:
            raise RecordFormatError(
                f"record runs to byte {next_pos}, past the next indexed record at {end}: "
                f"the index does not match the file", path=self.url, offset=start, record=position)
        if next_pos < end and not _is_head(window, next_pos):
            raise RecordFormatError(
                f"record ends at byte {next_pos} but no record head follows there (the next "
                f"indexed record is at {end}): a corrupt length field?", path=self.url,
                offset=start, record=position)
        return payload

    @staticmethod
    def _preload(start, end):
        return min(end - start, DEFAULT_BLOCK_SIZE)

    @property
    def remote(self):
        """True when reads go through range requests (anything but a local file)."""
        return bool(getattr(self._source, "remote", False))

    def source_stats(self):
        """The source's request counters (remote sources), else an empty dict."""
        stats = getattr(self._source, "stats", None)
        return stats() if stats is not None else {}

    def prefetch(self, positions, runs=None):
        """Announce that records ``positions`` will be read soon, in this order.

        A remote source fetches them ahead with coalesced concurrent range requests; ``runs``
        (sorted first positions of runs of consecutive records, as a block shuffle uses) makes
        each run's records come from one or few requests. Returns a plan whose ``cancel()``
        drops what was not read; local files return a plan that does nothing.
        """
        prefetch = getattr(self._source, "prefetch", None)
        if prefetch is None:
            return _NoPlan()
        spans = []
        for position in positions:
            start, end = self.span(position)
            spans.append((start, self._preload(start, end)))
        groups = None
        if runs is not None:
            groups = [bisect.bisect_right(runs, position) for position in positions]
        return prefetch(spans, groups)

    def position_of_key(self, key):
        """The position of the record stored under ``key`` (the last one if repeated)."""
        try:
            return self._position_of_key[key]
        except KeyError:
            raise KeyError(f"key {key!r} not in {self.index_url or self.url}") from None

    def read_key(self, key):
        """The payload of the record stored under ``key`` in the index (the last one if repeated)."""
        return self[self.position_of_key(key)]

    def __iter__(self):
        """Payloads in index order (with an index) or file order (without one)."""
        if not self.offsets:
            return
        if self.offsets != self._sorted_offsets:  # index not in file order: random reads
            for position in range(len(self)):
                yield self[position]
            return
        position = 0
        for pos, payload in iter_records(self._source, start=self.offsets[0]):
            if pos == self.offsets[position]:
                yield payload
                position += 1
                if position == len(self.offsets):
                    return
            elif pos > self.offsets[position]:
                raise RecordFormatError(
                    "indexed offset is not at a record head (the file's records are at "
                    f"{pos} and before)", path=self.url, offset=self.offsets[position],
                    record=position)

    def close(self):
        self._closer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"RecordReader({self.url!r}, records={len(self)}, index={self.index_url!r})"


def _is_head(window, pos):
    """True when a record's first part head (magic, cflag 0 or 1) is at ``pos``."""
    if pos + HEAD_SIZE > window.source.size:
        return False
    magic, cflag, _ = decode_head(window.get(pos, HEAD_SIZE), 0)
    return magic == MAGIC and cflag in (0, 1)


class _NoPlan:
    planned_requests = 0
    planned_bytes = 0

    def cancel(self):
        pass
