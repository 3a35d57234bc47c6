"""Where each record of a packed ``.rec`` came from: the ``.sources.jsonl`` sidecar.

``recpipe pack`` writes ``X.sources.jsonl`` beside each ``X.rec`` it publishes (``X.rec`` ->
``X.sources.jsonl``; shards ``data-00001.rec`` -> ``data-00001.sources.jsonl``), in the same
atomic commit as the ``.rec``, ``.idx`` and ``.sums``, and resumed with them. It is JSON lines,
in the ``.rec``'s record order (so in increasing ``offset``)::

    {"recpipe_sources": 1, "root": "/data/photos"}                         header
    {"offset": 0, "key": 17, "path": "cat/img3.jpg", "size": 48213, "sha256": "9f2c..."}
    ...                                                                    one per record
    {"end": true, "records": 1000, "rec_bytes": 65538024, "idx_sha256": "..."}  trailer

``path`` is relative to ``root`` (the pack's SRC folder, or the ``.lst``'s root), ``size`` and
``sha256`` are those of the file's bytes as they were read (before any re-encode), ``offset``
and ``key`` those of the record in the ``.rec`` and ``.idx``. The trailer binds the sidecar to
the ``.rec`` it was written with (its size, and the SHA-256 of its ``.idx``).

``RecordSources.open(rec_url)`` opens it for lookups by record offset: a binary search over
the lines (about 20 small reads for a million records, local or remote), so the loaders,
``verify``, ``inspect`` and ``extract`` can name the source file of a damaged record without
reading the whole sidecar. A sidecar that does not describe the ``.rec`` (another size) is not
used.
"""

import json
import logging
from typing import Dict, NamedTuple, Optional

from ..source import Source
from ..sources import open_source
from .names import SOURCES_SUFFIX, sources_url_for

__all__ = ["SOURCES_SUFFIX", "SOURCES_VERSION", "RecordSources", "SourceEntry", "entry_line",
           "header_line", "sources_at", "sources_summary", "sources_url_for", "trailer_line"]

log = logging.getLogger(__name__)

SOURCES_VERSION = 1
_EXACT_BELOW = 1 << 16  # a byte range this small is read and searched line by line
_LINE_MAX = 1 << 16  # longer lines are not entries of this format


def _line(data):
    return (json.dumps(data, separators=(",", ":")) + "\n").encode("ascii")


def header_line(root):
    """The first line: the format and the folder the paths are relative to."""
    return _line({"recpipe_sources": SOURCES_VERSION, "root": str(root)})


def entry_line(offset, key, path, size, sha256):
    """One record's line (``offset`` first: lookups read it)."""
    return _line({"offset": int(offset), "key": key, "path": str(path), "size": int(size),
                  "sha256": sha256})


def trailer_line(records, rec_bytes, idx_sha256):
    """The last line: how many records, the size of the ``.rec``, the SHA-256 of its ``.idx``."""
    return _line({"end": True, "records": int(records), "rec_bytes": int(rec_bytes),
                  "idx_sha256": idx_sha256})


class SourceEntry(NamedTuple):
    """Where one record came from."""

    offset: int
    key: object
    path: str
    size: int
    sha256: str
    root: str

    def where(self):
        """``root/path`` (the file as the pack read it)."""
        return f"{self.root.rstrip('/')}/{self.path}" if self.root else self.path

    def describe(self):
        """``root/path (size bytes, sha256 9f2c...)``: for messages."""
        return f"{self.where()} ({self.size} bytes, sha256 {self.sha256[:16]}...)"

    def to_dict(self):
        return {"path": self.path, "root": self.root, "file": self.where(), "size": self.size,
                "sha256": self.sha256, "key": self.key}


class RecordSources:
    """An open ``.sources.jsonl``: ``root``, ``records``, ``rec_bytes``, and ``lookup(offset)``."""

    def __init__(self, source: Source, header: dict, trailer: dict, first: int, last: int):
        self.source = source
        self.url = source.url
        self.root = str(header.get("root", ""))
        self.records = int(trailer["records"])
        self.rec_bytes = int(trailer["rec_bytes"])
        self.idx_sha256 = trailer.get("idx_sha256")
        self._first, self._last = first, last  # the byte range of the entry lines

    @classmethod
    def open(cls, rec_url, storage_options=None, rec_size=None) -> Optional["RecordSources"]:
        """The sidecar of ``rec_url``, or None when there is none, it is malformed (logged), or
        it describes a ``.rec`` of another size than ``rec_size``."""
        url = sources_url_for(rec_url)
        if url == str(rec_url):
            return None
        try:
            source = open_source(url, storage_options)
        except FileNotFoundError:
            return None
        except OSError as e:
            log.warning("record sources %s not used: %s", url, e)
            return None
        try:
            opened = cls._parse(source)
        except (ValueError, KeyError, TypeError) as e:
            source.close()
            log.warning("record sources %s not used: not a sources sidecar (%s)", url, e)
            return None
        if rec_size is not None and opened.rec_bytes != rec_size:
            opened.close()
            log.warning("record sources %s not used: it describes a .rec of %d bytes, %s has "
                        "%d (the file changed after it was packed)", url, opened.rec_bytes,
                        rec_url, rec_size)
            return None
        return opened

    @classmethod
    def _parse(cls, source):
        head = bytes(source.read(0, min(source.size, _LINE_MAX)))
        first = head.find(b"\n") + 1
        if first <= 0:
            raise ValueError("no header line")
        header = json.loads(head[:first])
        if header.get("recpipe_sources") != SOURCES_VERSION:
            raise ValueError(f"version {header.get('recpipe_sources')!r}, this recpipe reads "
                             f"{SOURCES_VERSION}")
        tail_start = max(first, source.size - _LINE_MAX)
        tail = bytes(source.read(tail_start, source.size - tail_start))
        if not tail.endswith(b"\n"):
            raise ValueError("no trailer line (the file is cut short)")
        last = tail_start + tail.rfind(b"\n", 0, len(tail) - 1) + 1
        if last < first:
            raise ValueError("no trailer line")
        trailer = json.loads(tail[last - tail_start:])
        if trailer.get("end") is not True:
            raise ValueError("the last line is not the trailer")
        return cls(source, header, trailer, first, last)

    def lookup(self, offset, key=None) -> Optional[SourceEntry]:
        """The entry of the record at byte ``offset`` of the ``.rec`` (and index ``key``, when
        given), or None."""
        offset = int(offset)
        lo, hi = self._first, self._last  # the line sought starts in [lo, hi)
        while hi - lo > _EXACT_BELOW:
            mid = (lo + hi) // 2
            found = self._entry_from(mid, hi)
            if found is None:
                hi = mid
                continue
            entry, end = found
            if entry["offset"] < offset:
                lo = end
            elif entry["offset"] > offset:
                hi = mid
            else:
                return self._checked(entry, key)
        for entry in self._entries(lo, hi):
            if entry["offset"] == offset:
                return self._checked(entry, key)
            if entry["offset"] > offset:
                break
        return None

    def lookup_many(self, offsets) -> Dict[int, SourceEntry]:
        """``{offset: entry}`` of those ``offsets`` the sidecar lists."""
        found = {}
        for offset in sorted(set(int(o) for o in offsets)):
            entry = self.lookup(offset)
            if entry is not None:
                found[offset] = entry
        return found

    def _checked(self, entry, key):
        if key is not None and str(entry.get("key")) != str(key):
            log.warning("record sources %s: the record at byte %d has key %s, the sidecar says "
                        "%s: not used", self.url, entry["offset"], key, entry.get("key"))
            return None
        return SourceEntry(int(entry["offset"]), entry.get("key"), str(entry["path"]),
                           int(entry["size"]), str(entry["sha256"]), self.root)

    def _entry_from(self, position, hi):
        """``(entry, end)`` of the first line that starts at or after ``position`` and before
        ``hi``, or None."""
        data = bytes(self.source.read(position - 1, min(_LINE_MAX * 2, self._last - position + 1)))
        start = data.find(b"\n") + 1  # the byte before ``position`` may end the previous line
        if start <= 0 or position - 1 + start >= hi:
            return None
        stop = data.find(b"\n", start)
        if stop < 0:
            raise ValueError(f"{self.url}: a line longer than {_LINE_MAX} bytes")
        return json.loads(data[start:stop]), position - 1 + stop + 1

    def _entries(self, lo, hi):
        data = bytes(self.source.read(lo, min(self._last, hi + _LINE_MAX) - lo))
        at = 0
        while lo + at < hi:
            stop = data.find(b"\n", at)
            if stop < 0:
                return
            yield json.loads(data[at:stop])
            at = stop + 1

    def close(self):
        self.source.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def sources_at(rec_url, offsets, storage_options=None, rec_size=None) -> Dict[int, SourceEntry]:
    """``{offset: entry}`` for those of ``offsets`` (records of ``rec_url``) that its sidecar
    lists; ``{}`` without a sidecar (or one of another file). For messages: never raises."""
    offsets = [int(o) for o in offsets if o is not None]
    if not offsets:
        return {}
    try:
        opened = RecordSources.open(rec_url, storage_options, rec_size)
        if opened is None:
            return {}
        with opened:
            return opened.lookup_many(offsets)
    except (OSError, ValueError) as e:
        log.warning("record sources of %s cannot be looked up: %s", rec_url, e)
        return {}


def sources_summary(rec_url, storage_options=None, rec_size=None) -> Optional[dict]:
    """``{"file", "root", "records"}`` of the sidecar of ``rec_url``, or None."""
    try:
        opened = RecordSources.open(rec_url, storage_options, rec_size)
    except (OSError, ValueError):
        return None
    if opened is None:
        return None
    with opened:
        return {"file": opened.url, "root": opened.root, "records": opened.records}
