"""Writing one shard so that an interrupted pack can be resumed.

A ``ShardWriter`` writes ``.rec``/``.idx`` under fixed hidden temporary names (``.NAME.pack.tmp``)
and publishes them with their checksum sidecar (``.sums``, ``recpipe.io.sums``) as one commit
(``recpipe.io.atomic.commit_group``). On a local filesystem the temporary files are
kept when writing stops early; ``recover_partial`` then finds the last record that is complete in
both files, truncates both to it and tells where to continue. ``verify_published`` checks that a
shard published by an earlier run holds what the plan says. With ``checksums=True`` the writer
also keeps the SHA-256 of both files as it writes them (for a manifest); ``file_digest`` hashes
a file already published. The sidecar is built in memory and written at publish time; a
resumed shard first sums the records already in its temporary ``.rec``.
"""

import hashlib
import logging
import os
from typing import NamedTuple

from fsspec.implementations.local import LocalFileSystem

from ..errors import RecordFormatError
from ..io.atomic import AtomicOutput, commit_group, temporary_name
from ..io.format import frame
from ..io.index import format_index_line, parse_index
from ..io.scan import SlidingBuffer, iter_records, read_record
from ..io.sources import BytesSource, LocalSource, url_to_fs
from ..io.sums import SumsBuilder, sums_url_for

__all__ = ["TEMP_TAG", "Progress", "ShardWriter", "recover_partial", "verify_published",
           "is_local", "file_digest"]

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


class ShardWriter:
    """Append records to a shard's temporary files; ``publish()`` renames them into place."""

    def __init__(self, rec_url, idx_url, storage_options=None, progress=Progress(),
                 checksums=False):
        resume = progress.records > 0
        self._rec = AtomicOutput(rec_url, storage_options, temp_tag=TEMP_TAG, append=resume)
        try:
            self._idx = AtomicOutput(idx_url, storage_options, temp_tag=TEMP_TAG, append=resume)
        except BaseException:
            self._rec.discard()
            raise
        try:  # opened now, so that publishing runs no import and no lookup
            self._sums_file = AtomicOutput(sums_url_for(rec_url), storage_options,
                                           temp_tag=TEMP_TAG)
        except BaseException:
            self._rec.discard()
            self._idx.discard()
            raise
        self.records = progress.records
        self.offset = progress.offset
        self._sums = SumsBuilder()
        if resume:
            _sum_local(self._rec.temp_path, self._sums)
        self._hashes = None
        if checksums:
            self._hashes = (hashlib.sha256(), hashlib.sha256())
            if resume:  # appending to local temporary files: hash what is already there
                for output, digest in zip((self._rec, self._idx), self._hashes):
                    _hash_local(output.temp_path, digest)

    @property
    def resumable(self):
        return self._rec.local

    def write(self, payload, key):
        data = frame(payload)
        line = format_index_line(key, self.offset).encode()
        self._rec.write(data)
        self._idx.write(line)
        self._sums.add(self.offset, payload)
        if self._hashes is not None:
            self._hashes[0].update(data)
            self._hashes[1].update(line)
        self.offset += len(data)
        self.records += 1

    def digests(self):
        """``(rec_sha256, idx_sha256)`` of what was written (hex), or None without checksums."""
        if self._hashes is None:
            return None
        return tuple(digest.hexdigest() for digest in self._hashes)

    def flush(self):
        """Push buffered bytes to the OS, so a killed process leaves them for ``--resume``."""
        self._rec.file.flush()
        self._idx.file.flush()

    def publish(self):
        """Write the checksum sidecar, then rename the three files into place as one commit
        (``commit_group``)."""
        try:
            self._sums_file.write(self._sums.to_bytes(self.offset))
        except BaseException:
            self._sums_file.discard()
            raise
        commit_group(self._rec, [self._idx, self._sums_file])

    def abandon(self, keep):
        """Stop without publishing; ``keep`` leaves local temporary files for ``--resume``."""
        if keep and self.resumable:
            for output in (self._rec, self._idx):
                if not output.done:
                    output.file.close()
                    output.done = True
            log.info("kept partial shard %s (%d records) for --resume", self._rec.url, self.records)
        else:
            self._rec.discard()
            self._idx.discard()
        self._sums_file.discard()


def _sum_local(path, sums):
    """Add the records of a local temporary ``.rec`` (being resumed) to ``sums``."""
    with LocalSource(path) as source:
        for offset, payload in iter_records(source):
            sums.add(offset, payload)


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


def _complete_prefix(rec_path, offsets):
    """``(count, end)``: the longest prefix of records at ``offsets`` complete in ``rec_path``."""
    if not offsets:
        return 0, 0
    with LocalSource(rec_path) as source:
        window = SlidingBuffer(source, 1 << 16)
        for i in range(len(offsets) - 1, -1, -1):
            try:
                _, end = read_record(window, offsets[i], keep_payload=False)
            except RecordFormatError:
                continue
            return i + 1, end
    return 0, 0


def recover_partial(rec_url, idx_url, planned_keys):
    """Continue point of a local shard's temporary files, truncated to their last complete
    record; ``Progress()`` (start over) when there is nothing usable."""
    fs, rec_path = url_to_fs(rec_url)
    _, idx_path = url_to_fs(idx_url)
    rec_tmp = temporary_name(rec_path, TEMP_TAG)
    idx_tmp = temporary_name(idx_path, TEMP_TAG)
    if not (os.path.exists(rec_tmp) and os.path.exists(idx_tmp)):
        return Progress()
    with open(idx_tmp, "rb") as f:
        text = f.read()
    text = text[:text.rfind(b"\n") + 1]  # drop a torn last line
    try:
        keys, offsets = parse_index(text.decode(), path=idx_tmp)
    except (RecordFormatError, UnicodeDecodeError) as e:
        log.warning("partial shard %s: unusable index (%s); starting it over", rec_url, e)
        return Progress()
    if offsets[:1] not in ([], [0]) or any(b <= a for a, b in zip(offsets, offsets[1:])):
        log.warning("partial shard %s: index offsets out of order; starting it over", rec_url)
        return Progress()
    count, end = _complete_prefix(rec_tmp, offsets)
    position = _keys_position(keys[:count], planned_keys)
    if position is None:
        log.warning("partial shard %s does not match the plan; starting it over", rec_url)
        return Progress()
    idx_bytes = sum(len(line) + 1 for line in text.split(b"\n")[:count])
    os.truncate(rec_tmp, end)
    os.truncate(idx_tmp, idx_bytes)
    log.info("resuming %s after %d records (%d bytes)", rec_url, count, end)
    return Progress(count, end, position)


def verify_published(rec_url, idx_url, planned_keys, storage_options=None):
    """``(records, bytes)`` of a published shard that matches its plan, else None."""
    fs, rec_path = url_to_fs(rec_url, storage_options)
    idx_fs, idx_path = url_to_fs(idx_url, storage_options)
    try:
        size = fs.size(rec_path)
        keys, offsets = parse_index(idx_fs.cat_file(idx_path).decode(), path=idx_url)
    except (FileNotFoundError, RecordFormatError, UnicodeDecodeError):
        return None
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
