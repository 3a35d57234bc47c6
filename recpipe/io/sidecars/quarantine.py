"""Quarantine that lasts: records found bad while loading, remembered across epochs and runs.

A quarantine file lists the records of one version of one ``.rec`` (``sources.
source_identity``: real path, size, modification time, inode; a remote file's URL, size and
ETag) that failed a checksum, could not be read (framing) or did not decode. A checksum entry
also carries the token of the sidecar that found it (``basis``): it is void, ignored by
loaders and dropped by ``verify``, once that sidecar is replaced or removed. Loaders skip them
in later epochs and later runs without reading them again (``on_error='skip'``/``'replace'``),
or raise an error naming the quarantined record (``on_error='raise'``). ``recpipe verify``
lists them and removes the entries whose record now passes what it failed.

Files live in ``$RECPIPE_QUARANTINE_DIR``, else ``$XDG_CACHE_HOME/recpipe/quarantine``, else
``~/.cache/recpipe/quarantine``, one per dataset version (``<sha256 of the identity>.txt``),
shared by the ranks of a node. Each entry is one line,
``offset<TAB>record<TAB>kind<TAB>basis<TAB>detector<TAB>reason``, written with a single ``write``
on an ``O_APPEND`` descriptor and shorter than PIPE_BUF, so concurrent writers never interleave
(lines of another layout, e.g. an older recpipe's, are ignored: those records are checked
again). The folder must be a real folder owned by this user and the files regular files owned
by this user, opened without following symlinks; anything else is ignored with a warning (a
shared or hostile cache never decides what is skipped).

Only faults of a record's own bytes are quarantined, as the error says where it is raised
(``recpipe.errors``: ``fault`` in ``BYTES_FAULTS``): a checksum mismatch against a sidecar that
describes the file (kind ``sum``), broken framing or IRHeader (``format``), an image that does
not decode whole (``decode``). Errors of the settings (``label_width``, a ``label_rule``,
``max_pixels``, ``max_scans``, a crop that fails where the whole image decodes), of a stale
sidecar or of I/O never are. Each entry names what found it (``detector``).
"""

import hashlib
import logging
import os
import stat
import uuid
from typing import Dict, NamedTuple, Optional

import numpy as np

from ...errors import CHECKSUM, DECODE, FORMAT, DecodeError, RecordFormatError
from ..sources import open_source, source_identity

__all__ = ["QUARANTINE_ENV", "QuarantineEntry", "QuarantineFile", "RecordQuarantine",
           "quarantine_dir", "error_kind", "quarantine_of", "basis_of", "entry_holds"]

log = logging.getLogger(__name__)

QUARANTINE_ENV = "RECPIPE_QUARANTINE_DIR"
KINDS = ("sum", "format", "decode")
_KIND_OF_FAULT = {CHECKSUM: "sum", FORMAT: "format", DECODE: "decode"}
_FAULT_OF_KIND = {kind: fault for fault, kind in _KIND_OF_FAULT.items()}
_FIELD_CHARS = 120  # detector and basis
_REASON_CHARS = 400  # a line stays far below PIPE_BUF (4096)
_CHUNK = 1 << 20  # the file is read in chunks of this many bytes
_LINE_MAX = 4096  # a line is shorter than PIPE_BUF
_SLACK_LINES = 1024  # a file is compacted once it holds twice its live entries and this more
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
QUARANTINED = "quarantined"


def quarantine_dir():
    """Where quarantine files live (``$RECPIPE_QUARANTINE_DIR`` or the user's cache)."""
    configured = os.environ.get(QUARANTINE_ENV)
    if configured:
        return configured
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "recpipe", "quarantine")


class QuarantineEntry(NamedTuple):
    """One quarantined record: where (``offset``, ``record``), what failed (``kind``: 'sum',
    'format' or 'decode'), why (``reason``), what found it (``detector``: the sidecar and its
    digest, the framing check, the decoder) and on what it depends (``basis``, see
    ``RecordQuarantine``: the entry is void when it no longer holds)."""

    offset: int
    record: int
    kind: str
    reason: str
    detector: str = ""
    basis: str = ""

    def line(self):
        reason = _field(self.reason)[:_REASON_CHARS]
        detector, basis = _field(self.detector)[:_FIELD_CHARS], _field(self.basis)[:_FIELD_CHARS]
        return (f"{self.offset}\t{self.record}\t{self.kind}\t{basis}\t{detector}\t{reason}\n"
                .encode("utf-8", "replace"))


def basis_of(kind, sums_token):
    """What an entry of ``kind`` depends on besides the ``.rec`` version that names its file:
    the checksum sidecar (its ``RecordSums.token``) for a 'sum' entry, nothing else for the
    others (framing and decoding depend on the record's bytes alone)."""
    return (sums_token or "") if kind == "sum" else ""


def entry_holds(entry, sums_token):
    """True while ``entry`` still stands: a 'sum' entry only with the very sidecar that found
    it (``sums_token``: the token of the sidecar there now, None when there is none); it dies
    with that sidecar (replaced, removed, or found stale)."""
    return entry.kind != "sum" or (sums_token is not None and entry.basis == sums_token)


def _field(text):
    return " ".join(str(text).split())  # no tab or newline inside a field


def error_kind(exc):
    """The quarantine kind of a record's error ('sum', 'format', 'decode'), or None for an
    error that is not a fault of the record's bytes (``exc.fault``, set where it was raised)."""
    fault = getattr(exc, "fault", None)
    return _KIND_OF_FAULT.get(fault) if isinstance(fault, str) else None


def _own(st, want):
    return want(st.st_mode) and st.st_uid == os.geteuid()


class QuarantineFile:
    """The quarantine file of the dataset version named ``identity``."""

    def __init__(self, identity, directory=None):
        self.identity = identity
        self.directory = directory or quarantine_dir()
        name = hashlib.sha256(identity.encode("utf-8", "replace")).hexdigest()[:32]
        self.path = os.path.join(self.directory, f"{name}.txt")
        self.lines_read = 0  # lines held by the file when ``entries`` last read it

    def _folder_ok(self, create):
        try:
            if create:
                os.makedirs(self.directory, mode=0o700, exist_ok=True)
            st = os.lstat(self.directory)
        except FileNotFoundError:
            return False
        except OSError as exc:
            log.warning("quarantine folder %s unusable (%s): bad records are not remembered",
                        self.directory, exc)
            return False
        if not _own(st, stat.S_ISDIR):
            log.warning("quarantine folder %s is not a folder owned by this user: ignored",
                        self.directory)
            return False
        return True

    def _open(self, flags):
        """A descriptor on the file, or None when it is missing or not ours to trust."""
        try:
            fd = os.open(self.path, flags | _NOFOLLOW, 0o600)
        except FileNotFoundError:
            return None
        except OSError as exc:  # ELOOP: a symlink; EACCES: someone else's
            log.warning("quarantine file %s unusable (%s): ignored", self.path, exc)
            return None
        if not _own(os.fstat(fd), stat.S_ISREG):
            os.close(fd)
            log.warning("quarantine file %s is not a regular file owned by this user: ignored",
                        self.path)
            return None
        return fd

    def entries(self) -> Dict[int, QuarantineEntry]:
        """The entries by offset (a repeated offset: the last line wins), read whole in
        chunks of ``_CHUNK`` bytes whatever the file's size (memory: the distinct entries);
        ``lines_read`` counts the lines it held (``wasteful``)."""
        self.lines_read = 0
        if not self._folder_ok(create=False):
            return {}
        fd = self._open(os.O_RDONLY | os.O_NONBLOCK)
        if fd is None:
            return {}
        found: Dict[int, QuarantineEntry] = {}
        try:
            for line in _lines(fd):
                self.lines_read += 1
                entry = _parse(line.decode("utf-8", "replace"))
                if entry is not None:
                    found[entry.offset] = entry
        except OSError as exc:
            log.warning("cannot read the quarantine file %s (%s): ignored", self.path, exc)
            return {}
        finally:
            os.close(fd)
        return found

    def wasteful(self, live):
        """True when the file last read held far more lines than the ``live`` entries kept of
        them (repeats from concurrent ranks, void or foreign lines): worth a ``rewrite``."""
        return self.lines_read > 2 * live + _SLACK_LINES

    def add(self, entry: QuarantineEntry) -> bool:
        """Append ``entry`` (one atomic write); False when the quarantine is unusable."""
        if not self._folder_ok(create=True):
            return False
        fd = self._open(os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        if fd is None:
            return False
        try:
            os.write(fd, entry.line())
        except OSError as exc:
            log.warning("cannot write the quarantine file %s: %s", self.path, exc)
            return False
        finally:
            os.close(fd)
        return True

    def rewrite(self, entries) -> bool:
        """Replace the file by ``entries`` (removed when empty), atomically: written whole to
        a temporary file, synced, renamed over it. False when that failed (a full disk, a file
        size limit): the temporary file is removed and the file is left as it was."""
        if not self._folder_ok(create=False):
            return False
        if not entries:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            return True
        temp = os.path.join(self.directory, f".{uuid.uuid4().hex}.tmp")
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
            try:
                _write_all(fd, b"".join(entry.line() for entry in entries))
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, self.path)
        except OSError as exc:
            log.warning("cannot rewrite the quarantine file %s (%s): left as it was",
                        self.path, exc)
            try:
                os.unlink(temp)
            except OSError:
                pass
            return False
        return True


def _write_all(fd, data):
    """``os.write`` until all of ``data`` is written (a short write is not an error)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _lines(fd):
    """The lines of the open file ``fd``, read in chunks: a line longer than ``_LINE_MAX``
    (never written by ``add``) is skipped, not gathered."""
    pending = b""
    skipping = False
    while True:
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            break
        parts = (pending + chunk).split(b"\n")
        pending = parts.pop()
        for part in parts:
            if skipping:
                skipping = False  # the end of an overlong line
                continue
            yield part
        if len(pending) > _LINE_MAX:
            pending, skipping = b"", True
    if pending and not skipping:
        yield pending


def quarantine_of(url, storage_options=None):
    """The ``QuarantineFile`` of the file at ``url`` as it is now."""
    with open_source(url, storage_options) as source:
        return QuarantineFile(source_identity(source))


def _parse(line):
    parts = line.split("\t", 5)
    if len(parts) != 6 or parts[2] not in KINDS:
        return None
    offset, record, kind, basis, detector, reason = parts
    try:
        return QuarantineEntry(int(offset), int(record), kind, reason, detector, basis)
    except ValueError:
        return None


class RecordQuarantine:
    """A loader's view of the quarantine of a ``.rec`` (at ``url``, its records at ``offsets``,
    checked against the sidecar ``sums`` or none): which positions are known bad (``mask``),
    the error that names one (``error``) and ``record(exc)`` for a new bad one. ``file``: the
    ``QuarantineFile`` of the file's version (None: remembered in this process only)."""

    def __init__(self, url, offsets, sums, file: Optional[QuarantineFile]):
        self.url = str(url)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.file = file
        self.sums_token = sums.token if sums is not None else None
        found = file.entries() if file is not None else {}
        self.entries = {offset: entry for offset, entry in found.items()
                        if entry_holds(entry, self.sums_token)}
        if len(self.entries) < len(found):
            log.info("%s: %d quarantine entries found with another checksum sidecar (or none "
                     "now) are void and ignored", self.url, len(found) - len(self.entries))
        self.bad = np.isin(self.offsets,
                           np.fromiter(self.entries, np.int64, len(self.entries)))
        if file is not None and file.wasteful(len(self.entries)):
            self._compact(file)

    def _compact(self, file):
        """Rewrite ``file``, grown with repeats or void entries, to the entries that stand. A
        line another rank appends meanwhile may be lost: that record is found and
        quarantined again when it is read (checks are never skipped for it)."""
        before = file.lines_read
        if file.rewrite(sorted(self.entries.values())):
            log.info("compacted the quarantine file %s: %d lines -> %d entries", file.path,
                     before, len(self.entries))

    @classmethod
    def of(cls, reader, enabled=True):
        """The view of ``reader``'s file; ``enabled=False``: kept in this process only."""
        return cls.opened(reader.url, reader.identity, reader.offsets.array, reader.sums, enabled)

    @classmethod
    def opened(cls, url, identity, offsets, sums, enabled=True):
        """The view of the file at ``url`` in the version ``identity`` names
        (``Source.identity``); ``enabled=False``: kept in this process only."""
        return cls(url, offsets, sums, QuarantineFile(identity) if enabled else None)

    def mask(self, positions):
        """Bool array: which of ``positions`` are quarantined."""
        return self.bad[positions]

    def error(self, position):
        """The error raised for a quarantined record: a DecodeError for one that did not
        decode, else a RecordFormatError (the types its first failure had)."""
        offset = int(self.offsets[position])
        entry = self.entries.get(offset)
        why = (f"{entry.kind}: {entry.reason}; found by {entry.detector or '?'}" if entry
               else "found bad in this run")
        message = (f"{QUARANTINED} (found bad earlier at byte offset {offset}, {why}); not read "
                   f"again: `recpipe verify` re-checks it and clears the entry when it passes "
                   f"(quarantine {self.file_path})")
        detector = f"quarantine {self.file_path}"
        if entry is not None and entry.kind == "decode":
            return DecodeError(message, path=self.url, record=position, fault=DECODE,
                               detector=detector)
        fault = _FAULT_OF_KIND[entry.kind] if entry is not None else None
        return RecordFormatError(message, path=self.url, offset=offset, record=position,
                                 fault=fault, detector=detector)

    @property
    def file_path(self):
        return self.file.path if self.file is not None else None

    def record(self, exc):
        """Remember the record that raised ``exc`` (when it is a record's own fault)."""
        kind = error_kind(exc)
        position = getattr(exc, "record", None)
        if kind is None or not isinstance(position, int) or not 0 <= position < len(self.bad):
            return
        if self.bad[position]:
            return
        self.bad[position] = True
        offset = int(self.offsets[position])
        entry = QuarantineEntry(offset, position, kind, getattr(exc, "reason", str(exc)),
                                getattr(exc, "detector", None) or kind,
                                basis_of(kind, self.sums_token))
        self.entries[offset] = entry
        if self.file is not None and self.file.add(entry):
            log.warning("quarantined record %d of %s (%s, found by %s)", position,
                        self.url, kind, entry.detector)
