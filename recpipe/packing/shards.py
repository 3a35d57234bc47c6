"""Writing one shard so that an interrupted pack can be resumed.

A ``ShardWriter`` writes ``.rec``/``.idx`` under fixed hidden temporary names (``.NAME.pack.tmp``)
and publishes them with their checksum sidecar (``.sums``, ``recpipe.io.sidecars.sums``) as one
commit (``recpipe.io.atomic.commit_group``). On a local filesystem the temporary files are
kept when writing stops early, with a journal of the records made durable (``journal``);
``recover_partial`` then keeps the records that the journal lists and that read back as they
were written (a record damaged by a crash, e.g. a page of zeros lost at a power failure, is
written again with those after it), truncates the files to them and tells where to continue.
``verify_published`` checks that a shard published by an earlier run holds what the plan says.
With ``checksums=True`` the writer also keeps the SHA-256 of both files as it writes them (for
a manifest); ``file_digest`` hashes a file already published. The sidecar is built in memory
and written at publish time; a resumed shard takes the sums of its kept records from the
journal.
"""

import hashlib
import json
import logging
import os
from typing import NamedTuple, Optional

from fsspec.implementations.local import LocalFileSystem

from ..errors import RecordFormatError
from ..io.atomic import AtomicOutput, commit_group, temporary_name
from ..io.sidecars.crc32c import crc32c
from ..io.format.framing import frame
from ..io.sidecars.index import format_index_line, parse_idx
from ..io.format.scan import SlidingBuffer, read_record
from ..io.sources import BytesSource, LocalSource, url_to_fs
from ..io.sidecars.record_sources import entry_line, header_line, sources_url_for, trailer_line
from ..io.sidecars.sums import SumsBuilder, sums_url_for
from .journal import JOURNAL_TAG, ShardJournal, read_journal

__all__ = ["TEMP_TAG", "Progress", "ShardWriter", "SourceFile", "recover_partial",
           "verify_published", "is_local", "file_digest", "journal_path"]

log = logging.getLogger(__name__)

TEMP_TAG = "pack"
_HASH_BLOCK = 8 << 20


class Progress(NamedTuple):
    """Where a shard stands: ``records`` written, ``offset`` = bytes of ``.rec`` written, and
    ``position`` = how many of the shard's planned items are done (written or skipped)."""

    records: int = 0
    offset: int = 0
    position: int = 0


def is_local(url, storage_options=None):
    fs, _ = url_to_fs(url, storage_options)
    return isinstance(fs, LocalFileSystem)


class SourceFile(NamedTuple):
    """The file a record is packed from, for the sources sidecar
    (``recpipe.io.sidecars.record_sources``): its path relative to the pack's root, its size and the
    SHA-256 of its bytes."""

    path: str
    size: int
    sha256: str


class ShardWriter:
    """Append records to a shard's temporary files; ``publish()`` renames them into place.

    On a local filesystem a journal (``journal``) lists the records written, made durable at
    each ``flush()`` after the data files; a resumed shard takes its checksums from it (the
    sums of the bytes meant to be written, not of bytes read back from a file that a crash
    may have damaged); ``journal=False``: none (a shard that will not be resumed). ``sources_root``
    (the pack's SRC): also write the sources sidecar (``X.sources.jsonl``), each ``write`` then
    naming the record's ``SourceFile``."""

    def __init__(self, rec_url, idx_url, storage_options=None, progress=Progress(),
                 checksums=False, sources_root=None, journal=True):
        resume = progress.records > 0
        self._rec = AtomicOutput(rec_url, storage_options, temp_tag=TEMP_TAG, append=resume)
        opened = [self._rec]
        self._journal: Optional[ShardJournal] = None
        self._sources: Optional[AtomicOutput] = None
        try:
            self._idx = AtomicOutput(idx_url, storage_options, temp_tag=TEMP_TAG, append=resume)
            opened.append(self._idx)
            # opened now, so that publishing runs no import and no lookup
            self._sums_file = AtomicOutput(sums_url_for(rec_url), storage_options,
                                           temp_tag=TEMP_TAG)
            opened.append(self._sums_file)
            if sources_root is not None:
                self._sources = AtomicOutput(sources_url_for(rec_url), storage_options,
                                             temp_tag=TEMP_TAG, append=resume)
                opened.append(self._sources)
                if not resume:
                    self._sources.write(header_line(sources_root))
            if self._rec.local and journal:
                self._journal = ShardJournal(journal_path(self._rec.path), append=resume)
            self.records = progress.records
            self.offset = progress.offset
            self._sums = SumsBuilder()
            if resume:
                self._resume_sums()
        except BaseException:
            for output in opened:
                output.discard()
            if self._journal is not None:
                self._journal.remove()
            raise
        # the .idx's SHA-256 goes into the sources trailer; with ``checksums`` the .rec's too
        self._idx_hash = hashlib.sha256()
        self._rec_hash = hashlib.sha256() if checksums else None
        if resume:  # appending to local temporary files: hash what is already there
            _hash_local(self._idx.temp_path, self._idx_hash)
            if self._rec_hash is not None:
                _hash_local(self._rec.temp_path, self._rec_hash)

    def _resume_sums(self):
        """The sums of the records kept by ``recover_partial``: its journal's, checked there."""
        entries, _ = read_journal(journal_path(self._rec.path))
        ends = [entry["offset"] + entry["length"] for entry in entries]
        if len(entries) != self.records or (ends[-1] if ends else 0) != self.offset:
            raise RuntimeError(f"{self._rec.url}: the journal of the partial shard lists "
                               f"{len(entries)} records, the resume point {self.records}; "
                               "run the pack again without --resume")
        for entry in entries:
            _add_sum(self._sums, entry["offset"], entry["crc"])

    @property
    def resumable(self):
        return self._journal is not None

    def write(self, payload, key, source: Optional[SourceFile] = None):
        """Append a record under ``key``; ``source``: the file it was packed from (needed when
        the writer keeps the sources sidecar)."""
        if self._sources is not None and source is None:
            raise ValueError(f"{self._rec.url}: record {key} needs its source file")
        data = frame(payload)
        line = format_index_line(key, self.offset).encode()
        crc = crc32c(payload)
        self._rec.write(data)
        self._idx.write(line)
        if self._sources is not None and source is not None:
            self._sources.write(entry_line(self.offset, key, *source))
        _add_sum(self._sums, self.offset, crc)
        if self._journal is not None:
            self._journal.add({"key": key, "offset": self.offset, "length": len(data),
                               "crc": crc})
        self._idx_hash.update(line)
        if self._rec_hash is not None:
            self._rec_hash.update(data)
        self.offset += len(data)
        self.records += 1

    def digests(self):
        """``(rec_sha256, idx_sha256)`` of what was written (hex), or None without checksums."""
        if self._rec_hash is None:
            return None
        return self._rec_hash.hexdigest(), self._idx_hash.hexdigest()

    def _data_files(self):
        outputs = [self._rec, self._idx] + ([self._sources] if self._sources else [])
        return [output.file for output in outputs]

    def flush(self):
        """A checkpoint for ``--resume``: the data files flushed and (local files) fsynced,
        then the journal of the records written so far, fsynced in turn."""
        if self._journal is None:
            for f in self._data_files():
                f.flush()
            return
        self._journal.checkpoint(self._data_files())

    def publish(self):
        """Write the checksum sidecar and the sources' trailer, then rename the files into
        place as one commit (``commit_group``); the journal goes first (a shard without it is
        started over)."""
        try:
            self._sums_file.write(self._sums.to_bytes(self.offset))
            if self._sources is not None:
                self._sources.write(trailer_line(self.records, self.offset,
                                                 self._idx_hash.hexdigest()))
            if self._journal is not None:
                self._journal.remove()
        except BaseException:
            self._discard()
            raise
        commit_group(self._rec, [self._idx, self._sums_file, self._sources])

    def abandon(self, keep):
        """Stop without publishing; ``keep`` leaves local temporary files for ``--resume``
        (after a last checkpoint)."""
        if keep and self.resumable:
            try:
                self.flush()
            finally:
                for output in (self._rec, self._idx, self._sources):
                    if output is not None and not output.done:
                        output.file.close()
                        output.done = True
                if self._journal is not None:
                    self._journal.close()
                self._sums_file.discard()
            log.info("kept partial shard %s (%d records) for --resume", self._rec.url, self.records)
        else:
            self._discard()

    def _discard(self):
        for output in (self._rec, self._idx, self._sums_file, self._sources):
            if output is not None:
                output.discard()
        if self._journal is not None:
            self._journal.remove()


def _add_sum(sums, offset, crc):
    """Add a record's sum, already computed, to a ``SumsBuilder``."""
    sums.offsets.append(offset)
    sums.crcs.append(crc)


def journal_path(rec_path):
    """The hidden journal beside a shard's temporary files (``journal``)."""
    return temporary_name(rec_path, JOURNAL_TAG)


def _hash_local(path, digest):
    with open(path, "rb") as f:
        while block := f.read(_HASH_BLOCK):
            digest.update(block)


def file_digest(url, storage_options=None):
    """``(sha256 hex, size)`` of a published file, read in blocks."""
    fs, path = url_to_fs(url, storage_options)
    digest = hashlib.sha256()
    size = 0
    with fs.open(path, "rb") as f:
        while block := f.read(_HASH_BLOCK):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def _keys_position(keys, planned_keys):
    """How many planned items the written ``keys`` account for, or None if they do not fit
    (the written keys must be the planned keys in order, some possibly skipped)."""
    if len(set(planned_keys)) != len(planned_keys):
        return None
    where = {key: i for i, key in enumerate(planned_keys)}
    position = 0
    for key in keys:
        i = where.get(key)
        if i is None or i < position:
            return None
        position = i + 1
    return position


def _index_lines(path):
    with open(path, "rb") as f:
        return f.read().split(b"\n")[:-1]  # the part after the last newline is torn


def _source_line_fits(line, entry):
    try:
        data = json.loads(line)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("offset") == entry["offset"] and \
        data.get("key") == entry.get("key")


def _verified_prefix(rec_path, index_lines, entries, source_lines=None):
    """``(count, end)``: how many of the journal's ``entries`` the temporary files hold as the
    journal says (the ``.idx`` line, the sources line when ``source_lines``, the framing, the
    length and the CRC32C of the payload read back), in order from the first, and where the
    last of them ends."""
    end = 0
    with LocalSource(rec_path) as source:
        window = SlidingBuffer(source, 1 << 16)
        for count, entry in enumerate(entries):
            why = None
            if entry["offset"] != end:
                why = f"its offset {entry['offset']} is not where record {count - 1} ends ({end})"
            elif count >= len(index_lines) or index_lines[count] + b"\n" != \
                    format_index_line(entry.get("key"), end).encode():
                why = "its .idx line differs from the journal's"
            elif source_lines is not None and (count >= len(source_lines) or
                                               not _source_line_fits(source_lines[count], entry)):
                why = "its line in the sources sidecar differs from the journal's"
            else:
                try:
                    payload, stop = read_record(window, end, record=count)
                except RecordFormatError as e:
                    why = str(e)
                else:
                    if stop - end != entry["length"] or crc32c(payload) != entry["crc"]:
                        why = "its bytes differ from the ones written (CRC32C)"
            if why is not None:
                log.warning("partial shard %s: record %d (key %s) is not as written: %s; "
                            "writing it and those after it again", rec_path, count,
                            entry.get("key"), why)
                return count, end
            end = stop
        return len(entries), end


def recover_partial(rec_url, idx_url, planned_keys, sources=False):
    """Continue point of a local shard's temporary files, truncated to the records that the
    shard's journal lists and that read back as written (``journal``); ``Progress()`` (start
    over) when there is nothing usable. ``sources``: the shard keeps a sources sidecar, whose
    temporary file is checked and truncated too."""
    fs, rec_path = url_to_fs(rec_url)
    _, idx_path = url_to_fs(idx_url)
    rec_tmp = temporary_name(rec_path, TEMP_TAG)
    idx_tmp = temporary_name(idx_path, TEMP_TAG)
    journal_tmp = journal_path(rec_path)
    sources_tmp = temporary_name(sources_url_for(rec_path), TEMP_TAG) if sources else None
    if not all(os.path.exists(path) for path in (rec_tmp, idx_tmp, sources_tmp or rec_tmp)):
        return Progress()
    entries, sizes = read_journal(journal_tmp)
    if not entries:
        log.info("partial shard %s: no journal of records made durable; starting it over",
                 rec_url)
        return Progress()
    index_lines = _index_lines(idx_tmp)
    source_lines = _index_lines(sources_tmp)[1:] if sources_tmp else None
    count, end = _verified_prefix(rec_tmp, index_lines, entries, source_lines)
    position = _keys_position([entry.get("key") for entry in entries[:count]], planned_keys)
    if position is None:
        log.warning("partial shard %s does not match the plan; starting it over", rec_url)
        return Progress()
    os.truncate(rec_tmp, end)
    os.truncate(idx_tmp, sum(len(line) + 1 for line in index_lines[:count]))
    os.truncate(journal_tmp, sum(sizes[:count]))
    if sources_tmp is not None and source_lines is not None:
        with open(sources_tmp, "rb") as f:
            header = f.readline()
        os.truncate(sources_tmp, len(header) + sum(len(line) + 1 for line in source_lines[:count]))
    log.info("resuming %s after %d records (%d bytes)", rec_url, count, end)
    return Progress(count, end, position)


def verify_published(rec_url, idx_url, planned_keys, storage_options=None):
    """``(records, bytes)`` of a published shard that matches its plan, else None."""
    fs, rec_path = url_to_fs(rec_url, storage_options)
    idx_fs, idx_path = url_to_fs(idx_url, storage_options)
    try:
        size = fs.size(rec_path)
        table = parse_idx(idx_fs.cat_file(idx_path), path=idx_url)
    except (FileNotFoundError, RecordFormatError):
        return None
    keys, offsets = list(table.keys), table.offsets.tolist()
    if _keys_position(keys, planned_keys) is None:
        return None
    if not offsets:
        return (0, size) if size == 0 else None
    tail = fs.cat_file(rec_path, start=offsets[-1], end=size)
    try:
        _, end = read_record(SlidingBuffer(BytesSource(tail)), 0, keep_payload=False)
    except RecordFormatError:
        return None
    return (len(keys), size) if offsets[-1] + end == size else None
