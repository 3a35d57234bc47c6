"""Record checksums: the ``.sums`` sidecar beside a ``.rec`` (format, building, loading, checking).

A ``.sums`` file holds the CRC32C of every record of one ``.rec`` (``data.rec`` ->
``data.sums``; shards ``data-00001.rec`` -> ``data-00001.sums``). What is summed is a record's
logical payload: the bytes ``RecordReader`` returns for it (after the 8-byte part head; for a
multi-part record the reassembled payload, magic words put back), i.e. exactly what the
writer was given. Records are keyed by the byte offset of their first part head in the
``.rec`` (what the ``.idx`` maps keys to), so records without an ``.idx`` line are covered too.
All integers are little-endian::

    offset  size        field
    0       8           magic b"RECPSUMS"
    8       4           version (1)
    12      4           flags (0; readers reject other values)
    16      8           size in bytes of the .rec this file describes
    24      8           count N of records
    32      8*N         record offsets (int64, strictly increasing)
    32+8N   4*N         CRC32C of each record's payload (uint32), in the same order
    32+12N  4           CRC32C of all bytes before it (the sidecar's own sum)

A sidecar is bound to the content of its ``.rec``: when it is opened (``bind``, no read), the
size and every record offset the reader knows (the ``.idx``'s) must be the sidecar's; when a
record first differs from its sum, a few records spread over the file (``PROBES``: the first,
the last and between) are read, and if most of them differ too the sidecar is stale. A sidecar
of another file, or one left beside a re-packed ``.rec`` (MXNet, or any tool writing without
sums, keeps it; a re-pack of the same records in another order keeps the size, and records of
one length keep every offset), fails one of these: a ``StaleSumsError`` naming both paths and
what to do, never a "damaged" verdict on every record (the quarantine keeps nothing a stale
sidecar says). One damaged record is still damage: the probes of the others match.
MXNet and DALI never look at the sidecar: the ``.rec``/``.idx`` stay byte-identical to MXNet's.
"""

import logging
import struct
import threading
from typing import Optional, Set

import numpy as np

from ...errors import CHECKSUM, SIDECAR, RecordFormatError, StaleSumsError
from .crc32c import crc32c
from ..format.scan import SlidingBuffer, read_record
from ..sources import open_source
from .names import sums_url_for

__all__ = ["SUMS_MAGIC", "SUMS_VERSION", "PROBES", "RecordSums", "SumsBuilder", "sums_url_for",
           "load_sums", "checks_sums", "stale_error", "sums_of", "advice", "note_unprotected"]

log = logging.getLogger(__name__)

SUMS_MAGIC = b"RECPSUMS"
SUMS_VERSION = 1
_HEAD = struct.Struct("<8sIIQQ")
PROBES = 5  # records read at open to tell a sidecar of this content from a stale one
_PROBE_BLOCK = 1 << 16
_MIN_RECORD = 8  # a record is at least its part head: a .rec of S bytes has at most S/8
_FIX = "recpipe verify --decode --write-sums"
_noted: Set[str] = set()
_noted_lock = threading.Lock()


def checks_sums(integrity):
    """True when ``integrity`` ('off' | 'auto' | 'strict') asks for checksum checks."""
    if integrity not in ("off", "auto", "strict"):
        raise ValueError(f"integrity={integrity!r}: expected 'off', 'auto' or 'strict'")
    return integrity != "off"


class RecordSums:
    """The checksums of one ``.rec``: ``offsets`` (int64, sorted) -> ``crcs`` (uint32)."""

    def __init__(self, rec_size, offsets, crcs, *, path=None, digest=None):
        self.rec_size = int(rec_size)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.crcs = np.asarray(crcs, dtype=np.uint32)
        self.path = path
        self.digest = digest  # the sidecar's own CRC32C as read (None: built, not read)
        self._source = None  # the .rec, to probe (``bind``)
        self._stale_reason = None  # None: not probed yet

    def __getstate__(self):
        # a copy for another process (a chunk task of ``verify``) or a part of this one: the
        # probe source stays with the file's opener (a copy that was not probed yet takes each
        # mismatch as the record's)
        state = self.__dict__.copy()
        state["_source"] = None
        return state

    @property
    def token(self):
        """A short name of this very sidecar (its own CRC32C): quarantine entries found with it
        are void once it is replaced or removed."""
        return f"sums:{self.digest:08x}" if self.digest is not None else "sums:unsaved"

    @property
    def detector(self):
        """What checks records with this sidecar, for errors and quarantine entries."""
        return f"CRC32C of {self.path} ({self.token})"

    def __len__(self):
        return len(self.offsets)

    def to_bytes(self):
        head = _HEAD.pack(SUMS_MAGIC, SUMS_VERSION, 0, self.rec_size, len(self.offsets))
        body = head + self.offsets.astype("<i8").tobytes() + self.crcs.astype("<u4").tobytes()
        return body + struct.pack("<I", crc32c(body))

    @classmethod
    def from_bytes(cls, data, *, path=None):
        """Parse a sidecar; a malformed one raises RecordFormatError naming ``path``."""
        def bad(why, offset=None):
            return RecordFormatError(f"not a valid checksum sidecar: {why}", path=path,
                                     offset=offset, fault=SIDECAR)

        if len(data) < _HEAD.size + 4:
            raise bad(f"{len(data)} bytes is shorter than its header")
        magic, version, flags, rec_size, count = _HEAD.unpack_from(data, 0)
        if magic != SUMS_MAGIC:
            raise bad(f"magic {magic!r}, expected {SUMS_MAGIC!r}", 0)
        if version != SUMS_VERSION or flags != 0:
            raise bad(f"version {version} flags {flags} (this recpipe reads version "
                      f"{SUMS_VERSION}, flags 0)", 8)
        if len(data) != _HEAD.size + 12 * count + 4:
            raise bad(f"{len(data)} bytes where {count} records need {_HEAD.size + 12 * count + 4}")
        (stored,) = struct.unpack_from("<I", data, len(data) - 4)
        if crc32c(memoryview(data)[:-4]) != stored:
            raise bad("its own CRC32C does not match (the sidecar is damaged)", len(data) - 4)
        # views into ``data`` (no copy: 12 bytes a record in memory, whatever the file)
        offsets = np.frombuffer(data, "<i8", count, _HEAD.size)
        crcs = np.frombuffer(data, "<u4", count, _HEAD.size + 8 * count)
        if count and (offsets[0] < 0 or np.any(np.diff(offsets) <= 0) or offsets[-1] >= rec_size):
            raise bad("record offsets are not increasing within the .rec")
        return cls(rec_size, offsets, crcs, path=path, digest=stored)

    def bind(self, rec_url, rec_size, *, source=None, offsets=None):
        """Check that this sidecar describes ``rec_url`` of ``rec_size`` bytes: its size and
        ``offsets`` (the record offsets a reader knows, e.g. the ``.idx``'s) all listed, at
        once (no read); and keep ``source`` (the open ``.rec``) to probe when a record first
        differs from its sum (``stale_reason``). Raises ``StaleSumsError``."""
        if self.rec_size != rec_size:
            self._stale(rec_url, f"it describes a .rec of {self.rec_size} bytes but {rec_url} "
                                 f"has {rec_size}: it belongs to another file or the .rec "
                                 "changed after it was written")
        if offsets is not None:
            self._check_listed(rec_url, np.asarray(offsets, dtype=np.int64))
        self._source = source
        return self

    def _stale(self, rec_url, why):
        raise stale_error(self.path, rec_url, why, self.detector)

    def _check_listed(self, rec_url, offsets):
        """Every offset of ``offsets`` must be in the sidecar (in slices: small temporaries)."""
        if len(offsets) == len(self.offsets) and np.array_equal(offsets, self.offsets):
            return  # the usual case: an .idx in file order
        for first in range(0, len(offsets), 1 << 20):
            _, known = self.expected(offsets[first:first + (1 << 20)])
            if not known.all():
                missing = int((~known).sum())
                at = int(offsets[first + int(np.argmin(known))])
                self._stale(rec_url, f"the record at byte {at} (and {missing - 1} more in that "
                                     f"part of the index) is not listed in it: it was written "
                                     f"for records at other offsets")

    def stale_reason(self):
        """Why this sidecar does not describe the content of its ``.rec`` (a string), or ""
        when it does: decided once, when a record first differs from its sum, by reading up
        to ``PROBES`` records spread over the file (the first, the last, between): stale when
        most of them differ too (one damaged record is damage, not a stale sidecar). Without
        a source to probe: "" (each mismatch is the record's)."""
        reason = self._stale_reason  # no lock: two threads may both probe, to the same end
        if reason is None:
            reason = self._probe() if self._source is not None else ""
            self._stale_reason = reason
        return reason

    def _probe(self):
        picks = np.unique(np.linspace(0, len(self.offsets) - 1, min(PROBES, len(self.offsets)))
                          .astype(np.int64))
        read = differ = 0
        for i in picks.tolist():
            offset = int(self.offsets[i])
            read += 1
            try:
                window = SlidingBuffer(self._source, _PROBE_BLOCK, start=offset)
                payload, _ = read_record(window, offset)
            except RecordFormatError:  # no record head where the sidecar has one
                differ += 1
                continue
            differ += crc32c(payload) != int(self.crcs[i])
        if read and 2 * differ > read:
            return (f"{differ} of the {read} records probed differ from their sums (a .rec "
                    f"re-packed or rewritten after the sidecar was made, e.g. by MXNet or "
                    f"RecordWriter(sums=False); or a file damaged almost everywhere)")
        return ""

    def expected(self, offsets):
        """``(crcs, known)`` for records at ``offsets``: their sums (uint32) and whether the
        sidecar lists each offset."""
        offsets = np.asarray(offsets, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.offsets, offsets), max(len(self.offsets) - 1, 0))
        if not len(self.offsets):
            return np.zeros(len(offsets), np.uint32), np.zeros(len(offsets), bool)
        return self.crcs[at], self.offsets[at] == offsets

    def check(self, payload, offset, *, rec_url, record=None):
        """Raise RecordFormatError unless ``payload`` (read at ``offset``) has its sum."""
        crcs, known = self.expected([offset])
        if not known[0]:
            self._raise_if_stale(offset, rec_url, record)
            raise RecordFormatError(
                f"checksum sidecar {self.path} lists no record at this offset",
                path=rec_url, offset=offset, record=record, fault=SIDECAR,
                detector=self.detector)
        actual = crc32c(payload)
        if actual != int(crcs[0]):
            self._raise_if_stale(offset, rec_url, record)
            raise RecordFormatError(
                f"checksum mismatch: CRC32C 0x{actual:08x}, the sidecar {self.path} says "
                f"0x{int(crcs[0]):08x} (the record is damaged)",
                path=rec_url, offset=offset, record=record, fault=CHECKSUM,
                detector=self.detector)


    def _raise_if_stale(self, offset, rec_url, record):
        stale = self.stale_reason()
        if stale:
            raise StaleSumsError(
                f"checksum sidecar {self.path} does not describe {rec_url} as it is now: "
                f"{stale}. It is not used: replace it (`{_FIX} {rec_url}`) or delete it",
                path=rec_url, offset=offset, record=record, detector=self.detector)


class SumsBuilder:
    """Collects ``(offset, crc)`` of records as they are written."""

    def __init__(self):
        self.offsets = []
        self.crcs = []

    def add(self, offset, payload):
        self.offsets.append(offset)
        self.crcs.append(crc32c(payload))

    def extend(self, offsets, crcs):
        """Add records summed elsewhere (a byte-range task's ``SumsBuilder``), in file order."""
        self.offsets.extend(np.asarray(offsets, dtype=np.int64).tolist())
        self.crcs.extend(np.asarray(crcs, dtype=np.uint32).tolist())

    def __len__(self):
        return len(self.offsets)

    def build(self, rec_size):
        return RecordSums(rec_size, self.offsets, self.crcs)

    def to_bytes(self, rec_size):
        return self.build(rec_size).to_bytes()


def load_sums(rec_url, rec_size, storage_options=None, *, integrity="auto", source=None,
              offsets=None):
    """The sidecar of ``rec_url`` bound to the file (``RecordSums.bind``: its size, the record
    ``offsets`` a reader knows, records probed in ``source``, the open ``.rec``), or None when
    there is none (or ``integrity='off'``). A damaged sidecar raises RecordFormatError, a stale
    one ``StaleSumsError``; one that is not a regular file (a FIFO, a device) OSError."""
    if not checks_sums(integrity):
        return None
    url = sums_url_for(rec_url)
    if url == str(rec_url):
        return None
    try:
        sidecar = open_source(url, storage_options)
    except FileNotFoundError:
        return None
    with sidecar:
        data = _read_sidecar(sidecar, rec_url, rec_size)
    return RecordSums.from_bytes(data, path=url).bind(rec_url, rec_size, source=source,
                                                      offsets=offsets)


def sums_of(sidecar, rec_url, rec_source, offsets=None) -> "Optional[RecordSums]":
    """The sidecar open as ``sidecar`` (a ``Source``; None: there is none) bound to the
    ``.rec`` open as ``rec_source`` at ``rec_url`` and to its record ``offsets``, as
    ``load_sums`` binds it."""
    if sidecar is None:
        return None
    data = _read_sidecar(sidecar, rec_url, rec_source.size)
    return RecordSums.from_bytes(data, path=sidecar.url).bind(
        rec_url, rec_source.size, source=rec_source, offsets=offsets)


def stale_error(sums_path, rec_url, why, detector=None):
    """The ``StaleSumsError`` of the sidecar at ``sums_path`` beside ``rec_url``: ``why``, and
    what to do."""
    return StaleSumsError(
        f"checksum sidecar {sums_path} does not describe {rec_url} as it is now: {why}. It "
        f"is not used (it would call sound records damaged). If the .rec is as it should "
        f"be, replace the sidecar: `{_FIX} {rec_url}` (or delete {sums_path}); "
        f"`recpipe verify {rec_url}` lists what differs", path=str(rec_url), detector=detector)


def _read_sidecar(source, rec_url, rec_size):
    """The bytes of the sidecar open as ``source`` (opened as records are, ``open_source``: a
    FIFO or a device is refused before any read), and no larger than a sidecar of a ``.rec``
    of ``rec_size`` bytes can be (12 bytes for each of at most ``rec_size / 8`` records): a
    larger one is read no further than its header (another file's: ``StaleSumsError``)."""
    url = source.url
    most = _HEAD.size + 4 + 12 * (rec_size // _MIN_RECORD)
    if source.size > most:
        head = bytes(source.read(0, _HEAD.size))
        if len(head) == _HEAD.size and head.startswith(SUMS_MAGIC):
            described = _HEAD.unpack(head)[3]
            if described != rec_size:
                raise stale_error(url, rec_url, f"it describes a .rec of {described} bytes "
                                  f"but {rec_url} has {rec_size}: it belongs to another "
                                  "file or the .rec changed after it was written")
        raise RecordFormatError(
            f"not a valid checksum sidecar: {source.size} bytes, more than any sidecar of "
            f"a {rec_size}-byte .rec ({most})", path=url, fault=SIDECAR)
    data = bytes(source.read(0, source.size))
    if len(data) != source.size:
        raise RecordFormatError(f"not a valid checksum sidecar: read {len(data)} of "
                                f"{source.size} bytes (it changed while read)", path=url,
                                fault=SIDECAR)
    return data


def advice(url):
    """How to protect ``url`` with a sidecar: one command."""
    return f"`{_FIX} {url}` protects it"


def note_unprotected(url):
    """Log, once per ``url`` in this process, that it is read without checksums and how to
    add them (a loader's reader does, ``note_unprotected=True``, when it opens a file with
    ``integrity`` on and no sidecar)."""
    with _noted_lock:
        if url in _noted:
            return
        _noted.add(url)
    log.warning("%s has no checksum sidecar (%s): its records are checked by framing and "
                "decoding only, so damaged bytes that still decode are served; %s once "
                "(integrity='off' says you know)", url, sums_url_for(url), advice(url))
