"""The journal of a shard being written: what its temporary files hold, made durable first.

A ``ShardWriter`` on a local filesystem keeps, beside its temporary ``.rec``/``.idx``, a hidden
journal (``.NAME.rec.pack-journal.tmp``): one line per record written, ``JSON<TAB>crc\\n``,
where the JSON holds the record's ``key``, its ``offset`` and framed ``length`` in the ``.rec``
and the CRC32C of its payload (``crc``, computed from the bytes in memory, before they were
written) and ``crc`` after the tab is the CRC32C of the JSON text (a torn or zeroed line does
not parse). Lines are appended at checkpoints only, after the data files were flushed and
fsynced, and the journal is fsynced in turn: a record the journal lists was on disk before the
journal said so.

``pack --resume`` (``shards.recover_partial``) keeps only the records that the journal lists
*and* whose bytes, read back, still have the journal's CRC32C: a page lost at a power failure
(zeroed bytes inside a record) fails that check, and the record and everything after it are
written again. The published checksum sidecar then holds the journal's sums, never sums of
bytes read back.
"""

import json
import logging
import os

from ..io.sidecars.crc32c import crc32c

__all__ = ["JOURNAL_TAG", "ShardJournal", "read_journal"]

log = logging.getLogger(__name__)

JOURNAL_TAG = "pack-journal"


def _line(entry):
    text = json.dumps(entry, separators=(",", ":"), sort_keys=True)
    return f"{text}\t{crc32c(text.encode()):08x}\n".encode()


def read_journal(path):
    """``(entries, sizes)``: the journal's entries up to its first damaged or torn line, and
    the byte length of each line; ``([], [])`` when there is no journal."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return [], []
    entries: list = []
    sizes: list = []
    for raw in data.split(b"\n")[:-1]:  # the part after the last newline is torn
        entry = _parse(raw)
        if entry is None:
            log.warning("%s: damaged line %d; records after it are written again", path,
                        len(entries) + 1)
            break
        entries.append(entry)
        sizes.append(len(raw) + 1)
    return entries, sizes


def _parse(raw):
    text, _, stored = raw.partition(b"\t")
    try:
        if int(stored, 16) != crc32c(text):
            return None
        entry = json.loads(text)
    except ValueError:
        return None
    if not isinstance(entry, dict) or not all(
            isinstance(entry.get(name), int) for name in ("offset", "length", "crc")):
        return None
    return entry


class ShardJournal:
    """Appends entries to a shard's journal at checkpoints, after its data files are on disk."""

    def __init__(self, path, append=False):
        self.path = path
        self.file = open(path, "ab" if append else "wb")
        self.pending = []

    def add(self, entry):
        """Remember ``entry`` (a dict: ``key``, ``offset``, ``length``, ``crc``, ...) for the
        next checkpoint."""
        self.pending.append(_line(entry))

    def checkpoint(self, data_files):
        """Flush and fsync ``data_files`` (open binary files), then append the pending entries
        and fsync the journal."""
        for f in data_files:
            f.flush()
            os.fsync(f.fileno())
        if self.pending:
            self.file.write(b"".join(self.pending))
            self.pending = []
        self.file.flush()
        os.fsync(self.file.fileno())

    def close(self):
        self.file.close()

    def remove(self):
        self.file.close()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass
