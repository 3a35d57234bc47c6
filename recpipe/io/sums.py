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

A sidecar is bound to its ``.rec`` by the size (a sidecar of another file, or a stale one after
the ``.rec`` changed, almost always differs: that is an error naming both paths, never silently
ignored) and by its offsets (an offset the sidecar does not list is an error too). MXNet and
DALI never look at it: the ``.rec``/``.idx`` stay byte-identical to MXNet's.
"""

import struct

import numpy as np

from ..errors import CHECKSUM, SIDECAR, RecordFormatError, StaleSumsError
from .crc32c import crc32c
from .index import read_index_bytes

__all__ = ["SUMS_MAGIC", "SUMS_VERSION", "RecordSums", "SumsBuilder", "sums_url_for",
           "load_sums", "checks_sums"]

SUMS_MAGIC = b"RECPSUMS"
SUMS_VERSION = 1
_HEAD = struct.Struct("<8sIIQQ")


def sums_url_for(rec_url):
    """The sidecar beside a ``.rec``: ``x.rec`` -> ``x.sums`` (else ``x`` + ``.sums``)."""
    rec_url = str(rec_url)
    stem = rec_url[:-4] if rec_url.endswith(".rec") else rec_url
    return stem + ".sums"


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

    def bind(self, rec_url, rec_size):
        """Check that this sidecar describes ``rec_url`` of ``rec_size`` bytes."""
        if self.rec_size != rec_size:
            raise StaleSumsError(
                f"checksum sidecar {self.path} describes a .rec of {self.rec_size} bytes but "
                f"{rec_url} has {rec_size}: it belongs to another file or the .rec changed "
                f"after it was written (rewrite it: recpipe verify --decode --write-sums)",
                path=str(rec_url))
        return self

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
            raise RecordFormatError(
                f"checksum sidecar {self.path} lists no record at this offset",
                path=rec_url, offset=offset, record=record, fault=SIDECAR,
                detector=self.detector)
        actual = crc32c(payload)
        if actual != int(crcs[0]):
            raise RecordFormatError(
                f"checksum mismatch: CRC32C 0x{actual:08x}, the sidecar {self.path} says "
                f"0x{int(crcs[0]):08x} (the record is damaged)",
                path=rec_url, offset=offset, record=record, fault=CHECKSUM,
                detector=self.detector)


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


def load_sums(rec_url, rec_size, storage_options=None, *, integrity="auto"):
    """The sidecar of ``rec_url`` checked against its size, or None when there is none (or
    ``integrity='off'``). A damaged or mismatched sidecar raises RecordFormatError."""
    if not checks_sums(integrity):
        return None
    url = sums_url_for(rec_url)
    if url == str(rec_url):
        return None
    try:
        data = read_index_bytes(url, storage_options)
    except FileNotFoundError:
        return None
    return RecordSums.from_bytes(data, path=url).bind(rec_url, rec_size)
