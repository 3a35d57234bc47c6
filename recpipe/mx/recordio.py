"""``mx.recordio`` without MXNet: ``MXRecordIO``, ``MXIndexedRecordIO`` and the header helpers.

The classes have MXNet 1.9.1's surface and behaviour, so that a program written for
``mx.recordio`` runs after changing its import line (``import recpipe as mx``, or
``from recpipe import recordio``)::

    imgrec = mx.recordio.MXIndexedRecordIO(path_imgidx, path_imgrec, "r")
    header, _ = mx.recordio.unpack(imgrec.read_idx(0))
    header, img = mx.recordio.unpack(imgrec.read_idx(idx))

They are built on recpipe's reader and writer: any fsspec URL works (``s3://...``), corrupt
records raise ``RecordFormatError`` naming the path and offset, and written files appear
atomically when the object is closed (or dropped, as MXNet's do). Differences from MXNet,
all deliberate (see README, "Migrating from mxnet"):

- a file being written appears under its name at ``close()`` (MXNet writes in place), or when
  the object is dropped, also at the program's end; not when the program ends by an uncaught
  exception (a crash, Ctrl-C), where MXNet leaves the part written;
- ``write_idx`` refuses keys that would corrupt the ``.idx`` (tabs, newlines) with ValueError;
- errors are recpipe's (``FileNotFoundError``, ``RecordFormatError``) instead of ``MXNetError``;
- writers also publish the checksum sidecar (``x.sums``, MXNet ignores it) and readers check
  every record against it when it exists (``integrity='off'`` keyword: no checks).
"""

import logging
import os
from typing import Dict, Hashable, List, Optional, Tuple

from ..io.format.header import IRHeader, pack, pack_img, unpack, unpack_img
from ..io.sidecars.index import read_index
from ..io.format.scan import SlidingBuffer, read_record
from ..io.source import Source
from ..io.sources import open_source
from ..io.sidecars.sums import RecordSums, load_sums
from ..io.writer import RecordWriter
from ..system.fork import after_fork_in_child

__all__ = ["IRHeader", "MXIndexedRecordIO", "MXRecordIO", "pack", "pack_img", "unpack",
           "unpack_img"]

log = logging.getLogger(__name__)

# random reads (read_idx) fetch this much around a record; sequential reads reuse the block
_READ_BLOCK = 256 << 10
_STATE_DROPPED = ("_source", "_window", "_writer", "_sums")



class MXRecordIO:
    """Read (``flag='r'``) or write (``flag='w'``) a RecordIO file record by record.

    ``read()`` returns the next record's payload, or None at the end of the file. ``reset()``
    goes back to the start (and, for a writer, starts the file again). The object pickles
    (closing itself, re-opened on unpickling) and re-opens itself when used for reading in a
    forked process; writing from another process raises RuntimeError, as in MXNet. A writer
    inherited by a forked child belongs to its parent: the child never publishes it (at
    ``close()`` or exit) nor writes its buffered records again.
    """

    def __init__(self, uri: str, flag: str, *, integrity: str = "auto") -> None:
        self.uri = str(uri)
        self.flag = flag
        self.integrity = integrity
        self.pid: Optional[int] = None
        self.is_open = False
        self._source: Optional[Source] = None
        self._window: Optional[SlidingBuffer] = None
        self._writer: Optional[RecordWriter] = None
        self._sums: Optional[RecordSums] = None
        self._pos = 0
        self.open()

    def open(self):
        """Open the file (for a writer: start it empty)."""
        if self.flag == "w":
            self._writer = self._new_writer()
            self.writable = True
        elif self.flag == "r":
            self._source = open_source(self.uri)
            try:
                self._sums = load_sums(self.uri, self._source.size, integrity=self.integrity,
                                       source=self._source)
            except BaseException:
                self._source.close()
                raise
            self._window = SlidingBuffer(self._source, _READ_BLOCK)
            self._pos = 0
            self.writable = False
        else:
            raise ValueError("Invalid flag %s" % self.flag)
        self.pid = os.getpid()
        self.is_open = True
        if self.writable:
            # after a fork, in the child: the writer belongs to the parent; the child neither
            # publishes it at exit nor writes its buffered bytes a second time
            after_fork_in_child(self, MXRecordIO._disown)

    def _disown(self):
        """Let go of a writer this process inherited from its parent (see ``close``)."""
        writer = self._writer
        if writer is not None and self.pid != os.getpid():
            self._writer = None
            writer.disown()

    def _new_writer(self) -> RecordWriter:
        return RecordWriter(self.uri, index_url=False)

    def _live_writer(self) -> RecordWriter:
        # _check_pid raises first when close() or a fork let the writer go
        if self._writer is None:
            raise RuntimeError(f"{self.uri}: the record file is not open for writing")
        return self._writer

    def _live_reader(self) -> Tuple[Source, SlidingBuffer]:
        # _check_pid re-opens a closed reader first
        if self._source is None or self._window is None:
            raise RuntimeError(f"{self.uri}: the record file is not open for reading")
        return self._source, self._window

    def __del__(self):
        try:
            writer = getattr(self, "_writer", None)
            if writer is not None and self.is_open and self.pid == os.getpid():
                self._writer, self.is_open, self.pid = None, False, None
                writer.drop()  # publishes, unless the program ends by an uncaught exception
                return
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown or a failed publish: log only
            log.exception("closing %s when it was dropped", getattr(self, "uri", "?"))

    def __getstate__(self):
        is_open = self.is_open
        self.close()
        state = {k: v for k, v in self.__dict__.items() if k not in _STATE_DROPPED}
        state["is_open"] = is_open
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._source = self._window = self._writer = self._sums = None
        self._pos = 0
        self.is_open = False
        if state["is_open"]:
            self.open()

    def _check_pid(self, allow_reset=False):
        if self.pid != os.getpid():
            if allow_reset:
                self.reset()
            else:
                raise RuntimeError("Forbidden operation in multiple processes")

    def close(self):
        """Close the file; a writer publishes what it wrote."""
        if not self.is_open:
            return
        if self.writable and self.pid != os.getpid():  # inherited by a fork: the parent's
            self._disown()
            self.is_open = False
            log.debug("%s: not publishing a writer of process %s in process %s", self.uri,
                      self.pid, os.getpid())
            return
        self.is_open = False
        self.pid = None
        if self.writable:
            writer, self._writer = self._writer, None
            if writer is not None:
                writer.close()
        else:
            source, self._source, self._window = self._source, None, None
            if source is not None:
                source.close()

    def reset(self):
        """Close and open again: reading restarts at the first record."""
        self.close()
        self.open()

    def write(self, buf: bytes) -> None:
        """Append one record (bytes)."""
        _require(self.writable, "write() needs a record file opened with flag 'w'")
        self._check_pid(allow_reset=False)
        self._live_writer().write(buf, indexed=False)

    def read(self) -> Optional[bytes]:
        """The next record's payload, or None at the end of the file."""
        _require(not self.writable, "read() needs a record file opened with flag 'r'")
        self._check_pid(allow_reset=True)
        source, window = self._live_reader()
        if self._pos >= source.size:
            return None
        offset = self._pos
        payload, self._pos = read_record(window, offset)
        if self._sums is not None:
            self._sums.check(payload, offset, rec_url=self.uri)
        return payload

    def __repr__(self):
        state = "open" if self.is_open else "closed"
        return f"{type(self).__name__}({self.uri!r}, {self.flag!r}) [{state}]"


class MXIndexedRecordIO(MXRecordIO):
    """``MXRecordIO`` with a ``.idx`` file: ``read_idx(key)`` / ``write_idx(key, buf)``.

    ``keys`` lists the keys in ``.idx`` order; ``idx`` maps each key to its byte offset (the
    last line wins for a repeated key). ``key_type`` converts keys (``int``; ``str`` for string
    keys).
    """

    def __init__(self, idx_path: str, uri: str, flag: str, key_type: type = int, *,
                 integrity: str = "auto") -> None:
        self.idx_path = str(idx_path)
        self.idx: Dict[Hashable, int] = {}
        self.keys: List[Hashable] = []
        self.key_type = key_type
        super().__init__(uri, flag, integrity=integrity)

    def open(self):
        """Open the file; a reader also loads the ``.idx`` into ``idx`` and ``keys``."""
        super().open()
        self.idx = {}
        self.keys = []
        if not self.writable:
            try:
                keys, offsets = read_index(self.idx_path, key_type=self.key_type)
            except BaseException:
                super().close()
                raise
            self.keys = list(keys)
            self.idx = dict(zip(self.keys, (int(offset) for offset in offsets)))

    def _new_writer(self) -> RecordWriter:
        return RecordWriter(self.uri, index_url=self.idx_path)

    def seek(self, idx: Hashable) -> None:
        """Make the next ``read()`` return the record stored under key ``idx``."""
        _require(not self.writable, "seek() needs a record file opened with flag 'r'")
        self._check_pid(allow_reset=True)
        self._pos = self.idx[idx]

    def tell(self) -> int:
        """Byte offset where the next record will be written."""
        _require(self.writable, "tell() needs a record file opened with flag 'w'")
        return self._live_writer().offset

    def read_idx(self, idx: Hashable) -> Optional[bytes]:
        """The payload of the record stored under key ``idx``."""
        self.seek(idx)
        return self.read()

    def write_idx(self, idx: Hashable, buf: bytes) -> None:
        """Append a record and index it under key ``idx``."""
        key = self.key_type(idx)
        _require(self.writable, "write_idx() needs a record file opened with flag 'w'")
        self._check_pid(allow_reset=False)
        pos = self._live_writer().write(buf, key=key)
        self.idx[key] = pos
        self.keys.append(key)


def _require(condition, message):
    # MXNet asserts here; an explicit AssertionError keeps the type without depending on -O
    if not condition:
        raise AssertionError(message)
