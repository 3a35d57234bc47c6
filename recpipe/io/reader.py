"""``RecordReader``: random and sequential access to a ``.rec`` file at any fsspec URL."""

import logging
import operator
import weakref
from typing import Any, Hashable, Iterator, List, Optional, Tuple, Union

import numpy as np

from ..errors import FORMAT, RecordFormatError
from .format.framing import HEAD_SIZE, MAGIC, decode_head
from .format.scan import DEFAULT_BLOCK_SIZE, SlidingBuffer, iter_records, read_record
from .sidecars.index_table import Column, IndexTable
from .sidecars.opening import open_sidecars
from .sidecars.sums import RecordSums, checks_sums
from .sources import open_source

__all__ = ["RecordReader"]

log = logging.getLogger(__name__)

# a record whose framing disagrees with the .idx: a fault of the bytes of the pair (recpipe.errors)
_AGAINST_INDEX = {"fault": FORMAT, "detector": "RecordIO framing against the .idx"}


class RecordReader:
    """Read records of a RecordIO file by position, by index key, or in file order.

    ``index_url=None`` uses the ``.idx`` beside the ``.rec`` when one exists; ``index_url=False``
    never reads an index. Without an index the file is scanned once (heads only) to find the
    records, and keys are positions ``0..N-1``. Reads are thread-safe and fork-safe.

    ``integrity`` ('auto', the default, or 'strict'; 'off' to skip): when the checksum sidecar
    ``x.sums`` (``recpipe.io.sidecars.sums``) exists beside ``x.rec``, every record read is
    checked against its CRC32C and a mismatch raises RecordFormatError naming the file, record
    and offset. Without a sidecar nothing is checked; a sidecar that does not describe the file
    as it is now (another file's, or one left beside a re-packed ``.rec``) raises
    ``StaleSumsError`` at open (``recpipe.io.sidecars.sums``). The sidecars are opened together
    by ``recpipe.io.sidecars.opening.open_sidecars``; ``quarantine=True`` also opens the
    quarantine view of the file's records (``reader.quarantine``, a ``RecordQuarantine``:
    the records found bad earlier, for loaders; None otherwise); ``note_unprotected=True`` logs
    once per file that it has no checksum sidecar, as loaders do.

    >>> with RecordReader("train.rec") as reader:        # doctest: +SKIP
    ...     first = reader[0]
    ...     payload = reader.read_key(42)
    """

    def __init__(self, url: str, index_url: Union[str, None, bool] = None,
                 storage_options: Optional[dict] = None, *, key_type: type = int,
                 index_cache: bool = True, integrity: str = "auto",
                 quarantine: bool = False, note_unprotected: bool = False) -> None:
        self.url = str(url)
        self.storage_options = storage_options
        checks_sums(integrity)  # a bad value raises before any I/O
        self.integrity = integrity
        self._source = open_source(url, storage_options)
        # a reader dropped without close() still closes its file (when collected, or at exit)
        self._closer = weakref.finalize(self, self._source.close)
        try:
            sidecars = open_sidecars(self.url, self._source, index_url, storage_options,
                                     key_type=key_type, cache=index_cache, integrity=integrity,
                                     quarantine=quarantine, note=note_unprotected)
        except BaseException:
            self._closer()
            raise
        self.index_url, self._table, self._sums, self.quarantine = sidecars

    @property
    def keys(self) -> Column:
        """The index keys in index order (positions ``0..N-1`` without an index): a list-like
        ``Column`` (``.array`` for numpy) that holds no Python object per record."""
        return Column(self._table.keys)

    @property
    def offsets(self) -> Column:
        """Byte offsets of the records in index order (a list-like ``Column``)."""
        return Column(self._table.offsets)

    @property
    def table(self) -> IndexTable:
        """The ``IndexTable`` (offsets and keys as arrays)."""
        return self._table

    @property
    def sums(self) -> Optional[RecordSums]:
        """The checked checksum sidecar (``RecordSums``), or None (none, or integrity='off')."""
        return self._sums

    def check_sum(self, payload, offset: int, position: Optional[int] = None) -> None:
        """Raise RecordFormatError unless ``payload`` read at ``offset`` matches its sum
        (nothing to check without a sidecar)."""
        if self._sums is not None:
            self._sums.check(payload, offset, rec_url=self.url, record=position)

    @property
    def identity(self) -> str:
        """A string naming this version of the ``.rec`` (``Source.identity``)."""
        return self._source.identity

    @property
    def size(self) -> int:
        """Size of the ``.rec`` file in bytes."""
        return self._source.size

    def __len__(self) -> int:
        return len(self._table)

    def span(self, position: int) -> Tuple[int, int]:
        """Byte range ``(start, end)`` holding record ``position``: up to the next indexed
        offset."""
        return self._table.span(position, self.size)

    def __getitem__(self, position: int) -> bytes:
        return self.read(position)

    def read(self, position: int, *, checked: bool = True) -> bytes:
        """The payload of record ``position``; ``checked=False`` skips its checksum (for a
        look at structure, e.g. a layout header, that must not fail a whole open)."""
        position = operator.index(position)
        if not -len(self) <= position < len(self):
            raise IndexError(f"record position {position} out of range for {len(self)} records")
        position %= len(self)
        start, end = self.span(position)
        # the span is exact with a full index; a partial one may leave big gaps: do not read them
        window = SlidingBuffer(self._source, start=start, preload=self._preload(start, end))
        payload, next_pos = read_record(window, start, record=position)
        if next_pos > end:
            raise RecordFormatError(
                f"record runs to byte {next_pos}, past the next indexed record at {end}: "
                f"the index does not match the file", path=self.url, offset=start, record=position,
                **_AGAINST_INDEX)
        if next_pos < end and not _is_head(window, next_pos):
            raise RecordFormatError(
                f"record ends at byte {next_pos} but no record head follows there (the next "
                f"indexed record is at {end}): a corrupt length field?", path=self.url,
                offset=start, record=position, **_AGAINST_INDEX)
        if checked:
            self.check_sum(payload, start, position)
        return payload

    def spans(self, positions) -> Tuple[np.ndarray, np.ndarray]:
        """``(starts, ends)`` of the records at ``positions`` (int64 arrays; ``span`` of each)."""
        return self._table.spans(positions, self.size)

    def windows(self, positions) -> Tuple[List[Tuple[Any, int]], np.ndarray, np.ndarray]:
        """``(windows, starts, ends)``: ``(buffer, offset)`` windows of the file's bytes that hold
        the records at ``positions`` (a remote source's prefetched requests, taken under one
        lock; records read one by one from any other source), and the records' spans in the
        file (int64 arrays). For native readers that walk a run's records themselves, as in a
        local file: the bytes are NOT checked against the sidecar (pass ``sums.expected`` to
        the reader of the windows). A record longer than a read block, or whose read fails, is
        in no window: ``read`` it for its bytes or its precise error."""
        starts, ends = self.spans(np.asarray(positions, dtype=np.int64))
        lengths = ends - starts
        wanted = (lengths > HEAD_SIZE) & (lengths <= DEFAULT_BLOCK_SIZE)
        spans = np.stack((starts[wanted], lengths[wanted]), axis=1)  # (n, 2): offset, length
        read_windows = getattr(self._source, "read_windows", None)
        if read_windows is not None:
            return read_windows(spans), starts, ends
        windows = []
        for start, span in spans.tolist():
            try:
                data = self._source.read(start, span)
            except Exception:  # noqa: BLE001 - ``read`` raises it again, with its context
                continue
            if len(data) == span:
                windows.append((data, start))
        return windows, starts, ends

    def claim_windows(self, positions, spans=None):
        """``windows`` in two steps, for a remote source with a prefetch plan (else None): the
        records at ``positions`` (``spans``: their ``(starts, ends)`` when the caller has them)
        are taken from the plan now, where batches are issued; the returned claim's
        ``windows()`` waits for their bytes where they are decoded (the ``(buffer, offset)``
        windows of ``windows``, read once however many threads ask)."""
        claim_windows = getattr(self._source, "claim_windows", None)
        if claim_windows is None:
            return None
        starts, ends = self.spans(positions) if spans is None else spans
        lengths = ends - starts
        wanted = (lengths > HEAD_SIZE) & (lengths <= DEFAULT_BLOCK_SIZE)
        return claim_windows(np.stack((starts[wanted], lengths[wanted]), axis=1))

    def local_descriptor(self) -> Optional[int]:
        """The file descriptor of a local ``.rec`` (this process's own after a fork), for
        native readers that ``pread`` records themselves; None for any other source."""
        descriptor = getattr(self._source, "descriptor", None)
        return descriptor() if descriptor is not None else None

    @staticmethod
    def _preload(start, end):
        return min(end - start, DEFAULT_BLOCK_SIZE)

    @property
    def remote(self) -> bool:
        """True when reads go through range requests (anything but a local file)."""
        return bool(getattr(self._source, "remote", False))

    def source_stats(self) -> dict:
        """The source's request counters (remote sources), else an empty dict."""
        stats = getattr(self._source, "stats", None)
        return stats() if stats is not None else {}

    def prefetch(self, positions, runs=None):
        """Announce that records ``positions`` will be read soon, in this order.

        A remote source fetches them ahead with coalesced concurrent range requests; ``runs``
        (sorted first positions of runs of consecutive records, as a block shuffle uses) makes
        each run's records come from one or few requests. Returns the requests announced, whose
        ``cancel()`` drops what was not read; local files return requests that do nothing.
        """
        prefetch = getattr(self._source, "prefetch", None)
        if prefetch is None:
            return _NoPrefetch()
        positions = np.asarray(positions, dtype=np.int64)
        starts = self._table.offsets[positions]
        lengths = np.minimum(self._table.ends(self.size)[positions] - starts, DEFAULT_BLOCK_SIZE)
        groups = None
        if runs is not None:
            groups = np.searchsorted(np.asarray(runs), positions, side="right")
        return prefetch(np.stack((starts, lengths), axis=1), groups)

    def position_of_key(self, key: Hashable) -> int:
        """The position of the record stored under ``key`` (the last one if repeated)."""
        try:
            return self._table.position_of_key(key)
        except KeyError:
            raise KeyError(f"key {key!r} not in {self.index_url or self.url}") from None

    def read_key(self, key: Hashable) -> bytes:
        """The payload of the record stored under ``key`` in the index (the last one if
        repeated)."""
        return self[self.position_of_key(key)]

    def __iter__(self) -> Iterator[bytes]:
        """Payloads in index order (with an index) or file order (without one)."""
        table = self._table
        if not len(table):
            return
        if not table.in_file_order:  # random reads
            for position in range(len(self)):
                yield self[position]
            return
        offsets = table.offsets
        position = 0
        for pos, payload in iter_records(self._source, start=int(offsets[0])):
            expected = int(offsets[position])
            if pos == expected:
                self.check_sum(payload, pos, position)
                yield payload
                position += 1
                if position == len(offsets):
                    return
            elif pos > expected:
                raise RecordFormatError(
                    "indexed offset is not at a record head (the file's records are at "
                    f"{pos} and before)", path=self.url, offset=expected, record=position,
                    **_AGAINST_INDEX)

    def close(self) -> None:
        """Close the file (and its remote source); closing twice is harmless."""
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


class _NoPrefetch:
    planned_requests = 0
    planned_bytes = 0
    all_sent = True

    def cancel(self):
        pass
