"""``RecordWriter``: write a ``.rec``, its ``.idx`` and its ``.sums``, byte-identical to MXNet,
published atomically."""

import logging
from typing import Hashable, Optional, Union

from .atomic import AtomicOutput, Removal, commit_group
from .format import frame
from .index import format_index_line, index_url_for
from .sums import SumsBuilder, sums_url_for

__all__ = ["RecordWriter"]

log = logging.getLogger(__name__)


class RecordWriter:
    """Write records to ``url`` (any fsspec URL) and an index to ``index_url``.

    ``index_url=None`` writes the conventional ``.idx`` beside the ``.rec``; ``index_url=False``
    writes no index. ``sums=True`` (default) also writes the checksum sidecar (``x.sums``, a
    CRC32C of every record: ``recpipe.io.sums``), which readers check; MXNet ignores it;
    ``sums=False`` removes an old sidecar there when it publishes (it would not describe the
    new file). All
    files are written under temporary names and appear only when the writer is closed without
    error, as one commit (never a new ``.rec`` beside an old ``.idx`` or ``.sums``); if the
    ``with`` body raises, nothing is published. Keys default to the record's position.

    >>> with RecordWriter("out/train.rec") as writer:      # doctest: +SKIP
    ...     writer.write(recpipe.pack(recpipe.IRHeader(0, 3.0, 0, 0), jpeg_bytes))
    """

    def __init__(self, url: str, index_url: Union[str, None, bool] = None,
                 storage_options: Optional[dict] = None, *, sums: bool = True) -> None:
        self.url = str(url)
        if index_url is None:
            index_url = index_url_for(self.url)
        self.index_url = str(index_url) if index_url else None
        self.sums_url = sums_url_for(self.url)
        if self.sums_url in (self.url, self.index_url):
            self.sums_url = None
        # without sums, an old sidecar goes when this file is published
        self._old_sums = Removal(self.sums_url, storage_options) \
            if self.sums_url and not sums else None
        if not sums:
            self.sums_url = None
        self._storage_options = storage_options
        self._rec = AtomicOutput(self.url, storage_options)
        self._idx: Optional[AtomicOutput] = None
        try:
            if self.index_url:
                self._idx = AtomicOutput(self.index_url, storage_options)
        except BaseException:
            self._rec.discard()
            raise
        self._sums = SumsBuilder() if self.sums_url else None
        self.offset = 0
        self.count = 0

    def write(self, payload: bytes, key: Hashable = None, *, indexed: bool = True) -> int:
        """Append one record; return its byte offset. A payload over 2**29-1 bytes raises
        RecordTooLargeError and writes nothing; so does a key that cannot be an ``.idx`` key.
        ``indexed=False`` writes the record without an ``.idx`` line (``MXIndexedRecordIO.write``)."""
        data = frame(payload)
        offset = self.offset
        line = None
        if self._idx is not None and indexed:  # a bad key raises before anything is written
            line = format_index_line(self.count if key is None else key, offset).encode()
        self._rec.write(data)
        if line is not None and self._idx is not None:
            self._idx.write(line)
        if self._sums is not None:
            self._sums.add(offset, payload)
        self.offset += len(data)
        self.count += 1
        return offset

    def _sums_output(self):
        if self._sums is None:
            return None
        output = AtomicOutput(self.sums_url, self._storage_options)
        try:
            output.write(self._sums.to_bytes(self.offset))
        except BaseException:
            output.discard()
            raise
        return output

    def close(self) -> None:
        """Publish the ``.rec``, its ``.idx`` and its ``.sums`` as one commit
        (``atomic.commit_group``): an error while finishing them (a full disk) leaves any
        earlier files as they were."""
        try:
            sums = self._sums_output() or self._old_sums
            commit_group(self._rec, [self._idx, sums])
        except BaseException:
            self.abort()
            raise

    def disown(self) -> None:
        """In a forked child that inherited this writer: forget it without writing, publishing
        or removing anything; the parent still owns and publishes it."""
        self._rec.disown()
        if self._idx is not None:
            self._idx.disown()

    def abort(self) -> None:
        """Discard whatever was written; nothing is published."""
        self._rec.discard()
        if self._idx is not None:
            self._idx.discard()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()
