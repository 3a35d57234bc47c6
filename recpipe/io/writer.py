"""``RecordWriter``: write a ``.rec``, its ``.idx`` and its ``.sums``, byte-identical to MXNet,
published atomically."""

import atexit
import logging
import os
import sys
import threading
import weakref
from typing import Hashable, Optional, Union

from ..system.fork import after_fork_in_child
from .atomic import AtomicOutput, Removal, commit_group
from .sidecars.crc32c import crc32c
from .format.framing import frame
from .sidecars.index import format_index_line, index_url_for
from .sidecars.sums import SumsBuilder, sums_url_for

__all__ = ["RecordWriter", "ending_with_error"]

log = logging.getLogger(__name__)

# remote writers still open when the program ends are published by an ``atexit`` hook: their
# uploads need fsspec's I/O thread, which no longer runs when objects are dropped at shutdown
_remote_open: "weakref.WeakSet[RecordWriter]" = weakref.WeakSet()
_at_exit_lock = threading.Lock()
_at_exit_registered = False


class RecordWriter:
    """Write records to ``url`` (any fsspec URL) and an index to ``index_url``.

    ``index_url=None`` writes the conventional ``.idx`` beside the ``.rec``; ``index_url=False``
    writes no index. ``sums=True`` (default) also writes the checksum sidecar (``x.sums``, a
    CRC32C of every record: ``recpipe.io.sidecars.sums``), which readers check; MXNet ignores it;
    ``sums=False`` removes an old sidecar there when it publishes (it would not describe the
    new file). All
    files are written under temporary names and appear only when the writer is closed without
    error, as one commit (never a new ``.rec`` beside an old ``.idx`` or ``.sums``); if the
    ``with`` body raises, nothing is published. Keys default to the record's position.

    A writer dropped without ``close()`` publishes what it wrote, as MXNet's writers do, also
    when it is dropped while the interpreter shuts down (MXNet programs never close theirs;
    unless the program ends by an uncaught exception: ``drop``):
    everything ``close()`` needs (the three temporary files, the checksum code) is resolved
    here, so closing runs no import and starts no thread. A write that failed in the middle (a
    full disk) discards everything instead, and a writer inherited by a forked child belongs to
    its parent: the child neither publishes it nor writes its buffered bytes again.

    >>> with RecordWriter("out/train.rec") as writer:      # doctest: +SKIP
    ...     writer.write(recpipe.pack(recpipe.IRHeader(0, 3.0, 0, 0), jpeg_bytes))
    """

    def __init__(self, url: str, index_url: Union[str, None, bool] = None,
                 storage_options: Optional[dict] = None, *, sums: bool = True) -> None:
        self.url = str(url)
        if index_url is None:
            index_url = index_url_for(self.url)
        self.index_url: Optional[str] = str(index_url) if index_url else None
        self.sums_url: Optional[str] = sums_url_for(self.url)
        if self.sums_url in (self.url, self.index_url):
            self.sums_url = None
        # without sums, an old sidecar goes when this file is published
        self._old_sums = Removal(self.sums_url, storage_options) \
            if self.sums_url and not sums else None
        if not sums:
            self.sums_url = None
        self._rec = AtomicOutput(self.url, storage_options)
        self._idx: Optional[AtomicOutput] = None
        self._sums_file: Optional[AtomicOutput] = None
        try:
            if self.index_url:
                self._idx = AtomicOutput(self.index_url, storage_options)
            if self.sums_url:  # opened now: close() must not import or look anything up
                self._sums_file = AtomicOutput(self.sums_url, storage_options)
        except BaseException:
            self.abort()
            raise
        self._sums = SumsBuilder() if self.sums_url else None
        crc32c(b"")  # loads the checksum extension now, for the same reason
        self.offset = 0
        self.count = 0
        self._finished = False  # closed, aborted or disowned
        self._failed: Optional[BaseException] = None  # the write that failed in the middle
        self._pid = os.getpid()
        after_fork_in_child(self, RecordWriter.disown)
        if not all(output.local for output in self._outputs()):
            _publish_at_exit(self)

    def write(self, payload: bytes, key: Hashable = None, *, indexed: bool = True) -> int:
        """Append one record; return its byte offset. A payload over 2**29-1 bytes raises
        RecordTooLargeError and writes nothing; so does a key that cannot be an ``.idx`` key.
        ``indexed=False`` writes the record without an ``.idx`` line
        (``MXIndexedRecordIO.write``)."""
        data = frame(payload)
        offset = self.offset
        line = None
        if self._idx is not None and indexed:  # a bad key raises before anything is written
            line = format_index_line(self.count if key is None else key, offset).encode()
        try:
            self._rec.write(data)
            if line is not None and self._idx is not None:
                self._idx.write(line)
        except BaseException as e:  # a record written in part: nothing of this writer is published
            self._failed = e
            self.abort()
            raise
        if self._sums is not None:
            self._sums.add(offset, payload)
        self.offset += len(data)
        self.count += 1
        return offset

    def close(self) -> None:
        """Publish the ``.rec``, its ``.idx`` and its ``.sums`` as one commit
        (``atomic.commit_group``): an error while finishing them (a full disk) leaves any
        earlier files as they were. Closing again does nothing; closing a writer one of whose
        writes failed raises RuntimeError (its files were discarded)."""
        if self._failed is not None:
            raise RuntimeError(f"{self.url}: nothing published: a write failed "
                               f"({self._failed!r}) and the files were discarded")
        if self._finished:
            return
        self._finished = True
        try:
            if self._sums_file is not None and self._sums is not None:
                self._sums_file.write(self._sums.to_bytes(self.offset))
            commit_group(self._rec, [self._idx, self._sums_file or self._old_sums])
        except BaseException:
            self.abort()
            raise

    def disown(self) -> None:
        """In a forked child that inherited this writer: forget it without writing, publishing
        or removing anything; the parent still owns and publishes it."""
        self._finished = True
        for output in self._outputs():
            output.disown()

    def abort(self) -> None:
        """Discard whatever was written; nothing is published."""
        self._finished = True
        for output in self._outputs():
            output.discard()

    def _outputs(self):
        return [output for output in (getattr(self, "_rec", None), getattr(self, "_idx", None),
                                      getattr(self, "_sums_file", None)) if output is not None]

    def __del__(self):
        self.drop()

    def drop(self, *, at_exit=False) -> None:
        """What a writer dropped without ``close()`` does: publish what it wrote, as MXNet's
        writers do; but when the program ends by an uncaught exception (its traceback printed:
        a crash, Ctrl-C), discard it, as its output is not complete. A writer a forked child
        inherited is disowned. ``at_exit``: called by the exit hook of remote writers."""
        if getattr(self, "_finished", True):
            return
        try:
            if self._pid != os.getpid():
                self.disown()
            elif ending_with_error(at_exit):
                log.warning("%s: not published, the program ended with an error", self.url)
                self.abort()
            else:
                self.close()  # as MXNet: a dropped writer publishes what it wrote
        except Exception:  # noqa: BLE001 - a failed publish when dropped: logged, nothing published
            log.exception("publishing %s when its writer was dropped", self.url)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()


def _publish_at_exit(writer):
    global _at_exit_registered
    with _at_exit_lock:
        if not _at_exit_registered:
            atexit.register(_close_remote_writers)
            _at_exit_registered = True
        _remote_open.add(writer)


def _close_remote_writers():
    """At exit, before the interpreter shuts down: publish the remote writers still open."""
    for writer in list(_remote_open):
        writer.drop(at_exit=True)


def ending_with_error(at_exit=False):
    """True while the program ends because of an uncaught exception: the interpreter is
    shutting down (or ``at_exit``: in an ``atexit`` hook) after printing its traceback
    (``sys.last_value``; a ``sys.exit()`` is not an error here)."""
    if at_exit:
        return getattr(sys, "last_value", None) is not None
    return sys.is_finalizing() and _exit["error"]


def _note_exit():
    # the interpreter clears sys.last_value before it drops what __main__ held: noted here,
    # while atexit hooks run
    _exit["error"] = getattr(sys, "last_value", None) is not None


_exit = {"error": False}
atexit.register(_note_exit)
