"""Dataset health: ``verify`` a ``.rec``/``.idx`` pair (``rebuild_index`` lives in
``recpipe.io.sidecars.rebuild``, ``inspect`` in ``recpipe.io.health.contents``).

``verify`` walks the whole file with resynchronisation (a bad record does not hide the ones
after it), checks the index against the record heads it found, every record against the
``.sums`` sidecar when there is one, and, on request, decodes every image (then, with
``write_sums``, it writes the sidecar when every record passed). It lists the records a loader
quarantined and clears the entries whose record now passes (``integrity_check``).
"""

import array
import bisect
import collections
import copy
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, List, NamedTuple, Optional, Protocol, Union

import numpy as np

from ...errors import DecodeError, RecordFormatError
from ..format.header import unpack_header
from ..sidecars.index import resolve_index_url
from ..sidecars.opening import load_index_table
from .integrity_check import IntegrityCheck
from ..format.layout import face_layout_of
from ..sidecars.crc32c import crc32c
from ..sidecars.record_sources import sources_at
from ..format.scan import scan_records, scan_with_progress
from ..sources import open_source

__all__ = [
    "PROBLEM_KINDS",
    "Problem",
    "VerifyReport",
    "ImageDecoder",
    "SpanChecks",
    "verify",
]

log = logging.getLogger(__name__)


# problem kind -> what it means; the codes are stable, for counting and JSON reports

PROBLEM_KINDS = {
    "bad-record": "a record that cannot be read; bytes [offset, end) are skipped up to the next "
                  "record head",
    "index-unreadable": "the .idx file does not parse",
    "index-past-end": "an .idx offset at or past the end of the .rec",
    "index-not-at-head": "an .idx offset that is not the first byte of a readable record",
    "index-duplicate-key": "a key listed more than once in the .idx (lookups get the last one)",
    "index-duplicate-offset": "two .idx entries pointing at the same record",
    "index-string-keys": "keys that are not integers: readers need key_type=str for this index",
    "not-in-index": "a readable record that no .idx entry points at",
    "bad-header": "a payload too short for its IRHeader and packed labels",
    "decode-failed": "an image that does not decode",
    "checksum-mismatch": "a record whose CRC32C differs from the .sums sidecar's: it is damaged",
    "not-in-sums": "a readable record the .sums sidecar has no checksum for",
    "sums-unusable": "the .sums sidecar is damaged (or not a regular file)",
    "sums-stale": "the .sums sidecar does not describe the .rec as it is now (another file's, or "
                  "left beside a re-packed .rec): no record is called damaged by it",
    "quarantined": "a record a loader quarantined that this run did not clear (decode failures "
                   "are re-checked only with --decode)",
}


class ImageDecoder(Protocol):
    """What ``verify`` needs of a decoder (``recpipe.decode.get_decoder`` gives one):
    ``decode(bytes)`` raising ``DecodeError`` for an image that does not decode, and a name."""

    name: str

    def decode(self, data: Any) -> Any: ...


class Problem(NamedTuple):
    """One finding. ``offset`` is a byte offset in the ``.rec``; ``record`` the record's position
    in the file (for ``index-*`` kinds: the entry's position in the ``.idx``); ``end`` closes the
    skipped byte range of a ``bad-record``."""

    kind: str
    offset: Optional[int]
    record: Optional[int]
    reason: str
    end: Optional[int] = None

    def to_dict(self):
        return {name: value for name, value in self._asdict().items() if value is not None}


@dataclass
class VerifyReport:
    """What ``verify`` found. ``ok`` is true when there is no problem of any kind.

    ``problems`` lists at most ``limit`` findings per kind; ``counts`` has the full numbers.
    """

    url: str
    index_url: Optional[str]
    size: int
    records: int = 0
    skipped_bytes: int = 0
    index_entries: Optional[int] = None
    decoded: Optional[int] = None
    decode_failures: Optional[int] = None
    sums_checked: Optional[int] = None
    sums_written: Optional[str] = None
    sums_state: Optional[str] = None  # 'bound', 'absent', 'stale', 'unusable'; None: not looked
    sums_replaced: Optional[str] = None  # why the old sidecar did not count (stale, damaged)
    accepted: List[Problem] = field(default_factory=list)  # accept_current_bytes
    quarantined: list = field(default_factory=list)
    quarantine_cleared: int = 0
    quarantine_void: int = 0
    bad_ranges: list = field(default_factory=list, repr=False)
    problems: List[Problem] = field(default_factory=list)
    counts: collections.Counter = field(default_factory=collections.Counter)
    sources: dict = field(default_factory=dict)  # offset -> the file a problem record came from
    limit: int = 1000

    @property
    def ok(self):
        return not self.counts

    @property
    def checked(self):
        """What this run checked, in words (``recpipe verify`` prints it): a file without a
        sidecar that describes it is said to be unprotected, with the command that fixes it."""
        done = ["framing"] + (["index"] if self.index_url else [])
        if self.sums_state == "bound" and self.sums_checked is not None:
            done.append(f"checksums ({self.sums_checked} records match the .sums sidecar)")
        if self.decoded is not None:
            done.append(f"image decoding ({self.decoded} decoded)")
        text = ", ".join(done[:-1]) + " and " + done[-1] if len(done) > 1 else done[0]
        if self.sums_written:
            return f"{text}; checksums written to {self.sums_written}"
        if self.sums_state is None:
            return f"{text} (checksums not checked: --no-sums)"
        if self.sums_state == "bound":
            return text
        why = {"absent": "no checksums for this file", "stale": "no checksums: the .sums "
               "sidecar is stale", "unusable": "no checksums: the .sums sidecar is damaged"}
        misses = (" (decoding misses most damage inside JPEG data: a flipped bit usually "
                  "still decodes)" if self.decoded is not None else "")
        return (f"{text} only{misses}: {why[self.sums_state]}; `recpipe verify --decode "
                f"--write-sums {self.url}` protects it")

    def add(self, kind, offset, record, reason, end=None):
        self.counts[kind] += 1
        if self.counts[kind] <= self.limit:
            self.problems.append(Problem(kind, offset, record, reason, end))

    def accept(self, kind, offset, record, reason):
        """A record the old sidecar called damaged, taken as it is now (not a problem)."""
        if len(self.accepted) < self.limit:
            self.accepted.append(Problem(kind, offset, record, reason))

    def to_dict(self):
        return {
            "url": self.url,
            "index_url": self.index_url,
            "ok": self.ok,
            "bytes": self.size,
            "records": self.records,
            "skipped_bytes": self.skipped_bytes,
            "index_entries": self.index_entries,
            "decoded": self.decoded,
            "decode_failures": self.decode_failures,
            "sums_checked": self.sums_checked,
            "sums_written": self.sums_written,
            "sums_state": self.sums_state,
            "checked": self.checked,
            "sums_replaced": self.sums_replaced,
            "accepted": [p.to_dict() for p in self.accepted],
            "quarantined": [entry._asdict() for entry in self.quarantined],
            "quarantine_cleared": self.quarantine_cleared,
            "quarantine_void": self.quarantine_void,
            "counts": dict(sorted(self.counts.items())),
            "problems": [p.to_dict() for p in self.problems],
            "sources": {str(offset): entry.to_dict() for offset, entry in self.sources.items()},
        }


def verify(url: str, index_url: Union[str, None, bool] = None, *,
           decoder: Optional[ImageDecoder] = None, storage_options: Optional[dict] = None,
           limit: int = 1000, progress: Optional[Callable[[int], None]] = None, sums: bool = True,
           write_sums: bool = False, accept_current_bytes: bool = False,
           spans: Optional[Callable] = None) -> VerifyReport:
    """Check every record of ``url``, its index, its checksums and (given a ``decoder``) every
    image.

    ``index_url=None`` checks the ``.idx`` beside the ``.rec`` when there is one; ``False``
    checks no index. ``decoder``: decode every image with it, as the loaders' default does
    with ``recpipe.decode.get_decoder("auto")`` (this layer reads records and does not choose
    a decoder). ``sums``: check each record's CRC32C against the ``.sums`` sidecar when
    it exists (no decoding needed). ``write_sums`` (needs a ``decoder``): write the sidecar,
    atomically, when every record read, decoded and, where a sidecar that describes the file
    exists, matched it (files made by MXNet or InsightFace; a stale or damaged sidecar is
    replaced): a record the sidecar calls damaged is never certified, unless
    ``accept_current_bytes`` (with ``write_sums``) takes its bytes as they are now, listed in
    ``report.accepted``. The
    loaders' quarantine entries of this file are listed in the report and those whose record
    passed are removed. Returns a ``VerifyReport``; raises only when the ``.rec`` (or a given
    ``index_url``) cannot be opened. Memory: 8 bytes per record (int64 arrays, 12 more to
    write sums), whatever the size; ``progress(bytes)`` is called as the scan advances.
    ``spans``: walk the file as byte-range tasks instead (``spans(checks, source, progress)``
    with a ``SpanChecks``, returning the heads: ``recpipe.packing.wholefile`` on a cluster).
    """
    if decoder is True or decoder is False:
        raise TypeError("decoder: pass a decoder object (recpipe.decode.get_decoder('auto')), "
                        "not a bool")
    if write_sums and decoder is None:
        raise ValueError("write_sums needs a decoder: a sidecar is written only for records "
                         "that decoded")
    if accept_current_bytes and not write_sums:
        raise ValueError("accept_current_bytes needs write_sums: it certifies the current "
                         "bytes in a new sidecar")
    url = str(url)
    index_path = resolve_index_url(url, index_url, storage_options)
    with open_source(url, storage_options) as source:
        report = VerifyReport(url, index_path, source.size, limit=limit)
        integrity = IntegrityCheck(report, source, storage_options, check_sums=sums,
                                   write_sums=write_sums, decoded=decoder is not None,
                                   accept_current_bytes=accept_current_bytes)
        checker = _ImageChecker(report, decoder) if decoder is not None else None
        if spans is None:
            heads, _ = _scan_records(report, source, checker, integrity, progress)
        else:  # the same checks in byte-range tasks, merged in file order
            heads = spans(SpanChecks(report, checker, integrity), source, progress)
        report.records = len(heads)
    heads = np.frombuffer(heads, dtype=np.int64)
    integrity.finish(heads, report.size)
    if index_path:
        _check_index(report, index_path, heads, report.bad_ranges, storage_options)
    if checker is not None:
        report.decoded, report.decode_failures = checker.decoded, checker.failures
    report.sources = sources_at(url, [p.offset for p in report.problems], storage_options,
                                report.size)  # which file each damaged record was packed from
    log.info("verified %s: %d records, %d problems", url, report.records,
             sum(report.counts.values()))
    return report


def _scan_records(report, source, checker, integrity, progress, start=0, stop=None):
    """Walk every record (of bytes ``start``..``stop``): framing, checksum, decode. Returns
    the record heads (array 'q') and the byte where the walk goes on."""
    heads = array.array("q")
    end = start
    keep = checker is not None or integrity.needs_payload
    for item in scan_with_progress(source, keep_payload=keep, progress=progress, start=start,
                                   stop=stop):
        end = item.end
        if item.error is not None:
            report.bad_ranges.append((item.offset, item.end))
            report.skipped_bytes += item.end - item.offset
            report.add("bad-record", item.offset, item.record,
                       f"{item.error.reason}, at byte {item.error.offset}", item.end)
            integrity.fail(item.offset)
            continue
        heads.append(item.offset)
        integrity.record(item)
        if checker is not None and not checker.check(item):
            integrity.fail(item.offset)
    return heads, end


class _ImageChecker:
    """Decodes each record's image with the caller's decoder and files the failures in a report.
    In a file in InsightFace's layout (announced by its first record) the records without image
    bytes (the header and identity records) are not images and pass."""

    def __init__(self, report, decoder):
        self.decoder = decoder
        self.report = report
        self.decoded = 0
        self.failures = 0
        self.face_layout = None
        self.finds_layout = True  # False in a span after the first (SpanChecks.part)

    def check(self, item):
        """True when the record's image decodes (or it is a layout's non-image record)."""
        try:
            _, start = unpack_header(item.payload)
        except RecordFormatError as e:
            self.failures += 1
            self.report.add("bad-header", item.offset, item.record, e.reason)
            return False
        if item.record == 0 and self.finds_layout:
            self.face_layout = face_layout_of(item.payload, None)
        image = memoryview(item.payload)[start:]
        if self.face_layout is not None and not len(image):
            return True
        try:
            self.decoder.decode(image)
        except DecodeError as e:
            self.failures += 1
            self.report.add("decode-failed", item.offset, item.record,
                            f"{len(image)}-byte image does not decode ({self.decoder.name}): "
                            f"{e.reason}")
            return False
        self.decoded += 1
        return True


def _check_index(report, index_url, heads, bad_ranges, storage_options):
    """Compare the ``.idx`` entries with the record heads found by the scan (``heads``: sorted
    int64 array), with numpy: no Python object per record."""
    table = _index_table(report, index_url, storage_options)
    if table is None:
        return
    offsets = table.offsets
    report.index_entries = len(offsets)
    at = np.searchsorted(heads, offsets)
    found = at < len(heads)
    found[found] = heads[at[found]] == offsets[found]
    unmatched = np.flatnonzero(~found)
    past_end = int((offsets[unmatched] >= report.size).sum())
    listed = unmatched[:report.limit].tolist()
    for entry in listed:
        offset, key = int(offsets[entry]), table.keys[entry]
        if offset >= report.size:
            report.add("index-past-end", offset, entry,
                       f"index entry {entry} (key {key}): offset {offset} is past the end of "
                       f"the file ({report.size} bytes)")
        else:
            report.add("index-not-at-head", offset, entry,
                       f"index entry {entry} (key {key}): offset {offset} is "
                       f"{_where_in_file(offset, heads, bad_ranges)}")
    _uncounted(report, "index-past-end",
               past_end - sum(int(offsets[e]) >= report.size for e in listed))
    _uncounted(report, "index-not-at-head",
               len(unmatched) - past_end - sum(int(offsets[e]) < report.size for e in listed))
    for key, entries in _repeats(table.keys, report.limit):
        report.add("index-duplicate-key", int(offsets[entries[0]]), entries[0],
                   f"key {key} appears {len(entries)} times in the index (entries "
                   f"{_some(entries)})")
    for offset, entries in _repeats(offsets, report.limit):
        report.add("index-duplicate-offset", int(offset), entries[0],
                   f"{len(entries)} index entries point at offset {offset} (entries "
                   f"{_some(entries)})")
    missing = np.flatnonzero(~np.isin(heads, offsets))
    for position in missing[:report.limit].tolist():
        head = int(heads[position])
        report.add("not-in-index", head, position,
                   f"record {position} at offset {head} has no index entry")
    _uncounted(report, "not-in-index", len(missing) - report.limit)


def _uncounted(report, kind, count):
    """Count ``count`` more problems of ``kind`` beyond those listed (the listing is capped)."""
    if count > 0:
        report.counts[kind] += count


def _index_table(report, index_url, storage_options):
    """The index as arrays, read as readers read it (integer keys; string keys reported)."""
    try:
        return load_index_table(index_url, storage_options, key_type=int)  # as readers do
    except RecordFormatError as e:
        if "is not int" not in e.reason:
            report.add("index-unreadable", None, None, str(e))
            return None
        report.add("index-string-keys", None, None,
                   f"{e.reason}; RecordReader and MXIndexedRecordIO need key_type=str here")
    try:
        return load_index_table(index_url, storage_options, key_type=str)
    except RecordFormatError as e:
        report.add("index-unreadable", None, None, str(e))
        return None


def _repeats(values, limit=1000):
    """``(value, entry positions)`` for values listed more than once, in first-seen order
    (at most ``limit + 1`` of them)."""
    if isinstance(values, range):
        return []
    if not isinstance(values, list):  # an int64 array: sort instead of a dict of every value
        values = np.asarray(values)
        order = np.argsort(values, kind="stable")
        ordered = values[order]
        repeated = np.flatnonzero(ordered[1:] == ordered[:-1])
        if not len(repeated):
            return []
        groups = collections.defaultdict(list)
        for i in np.union1d(repeated, repeated + 1).tolist():
            groups[ordered[i].item()].append(int(order[i]))
        found = sorted((sorted(where) for where in groups.values()), key=lambda w: w[0])
        return [(values[w[0]].item(), w) for w in found[:limit + 1]]
    entries = collections.defaultdict(list)
    for position, value in enumerate(values):
        entries[value].append(position)
    return [(value, where) for value, where in entries.items() if len(where) > 1][:limit + 1]


def _some(numbers, shown=5):
    text = ", ".join(str(n) for n in numbers[:shown])
    return text + ", ..." if len(numbers) > shown else text


def _where_in_file(offset, heads, bad_ranges):
    if offset % 4:
        return "not 4-byte aligned"
    k = bisect.bisect_right(bad_ranges, (offset, float("inf"))) - 1
    if k >= 0 and bad_ranges[k][0] <= offset < bad_ranges[k][1]:
        return f"in the unreadable byte range {bad_ranges[k][0]}..{bad_ranges[k][1]}"
    j = int(np.searchsorted(heads, offset, side="right")) - 1
    if j < 0:
        return "before the first readable record"
    return f"inside record {j}, which starts at offset {int(heads[j])}"


class SpanChecks:
    """The record-level checks of one ``verify`` run (framing, checksums, decoding) for byte
    ranges of the file: on a cluster (``recpipe.packing.wholefile``) each task walks its span
    with ``part(start, stop)``, an empty copy, and sends back its ``state``; ``merge`` adds
    the states to this run's report, checksums and counts in file order, so that ``verify``
    ends as after one walk of the whole file."""

    def __init__(self, report, checker, integrity):
        self.report = report
        self.checker = checker
        self.integrity = integrity
        self.listed = None  # problems listed per kind, while merging

    def prepare(self, source):
        """Before any ``part``: the layout a checker finds at record 0 (the first readable
        record), for the spans that do not start the file."""
        if self.checker is None:
            return
        for item in scan_records(source):
            if item.error is None:
                self.checker.face_layout = face_layout_of(item.payload, None)
                return

    def key(self):
        """What the checks depend on besides the file (JSON): a task's result is kept for a
        later run only while this is the same."""
        sums = self.integrity.sums
        return {"limit": self.report.limit,
                "decoder": repr(self.checker.decoder) if self.checker else None,
                "layout": list(self.checker.face_layout or ()) if self.checker else None,
                "sums": None if sums is None else [len(sums), crc32c(sums.offsets.tobytes()),
                                                   crc32c(sums.crcs.tobytes())],
                "write_sums": self.integrity.builder is not None}

    def part(self, start, stop):
        """Empty checks for the records of bytes ``[start, stop)`` (picklable: a task's)."""
        report = VerifyReport(self.report.url, None, self.report.size, limit=self.report.limit,
                              sums_checked=None if self.report.sums_checked is None else 0)
        checker = None
        if self.checker is not None:
            checker = copy.copy(self.checker)
            checker.report, checker.decoded, checker.failures = report, 0, 0
            checker.finds_layout = start == 0
        return SpanChecks(report, checker, self.integrity.part(report, start, stop))

    def walk(self, source, start, stop):
        """Check the records of ``[start, stop)`` (in a task): returns the ``state``."""
        heads, end = _scan_records(self.report, source, self.checker, self.integrity, None,
                                   start, stop)
        return self.state(np.frombuffer(heads, dtype=np.int64), end)

    def state(self, heads, end):
        """``(facts, arrays)``: what this part found, as JSON and numpy arrays."""
        report, integrity = self.report, self.integrity
        facts = {"end": end, "records": len(heads), "problems": [list(p) for p in report.problems],
                 "counts": dict(report.counts), "skipped_bytes": report.skipped_bytes,
                 "bad_ranges": [list(r) for r in report.bad_ranges],
                 "sums_checked": report.sums_checked,
                 "decoded": self.checker.decoded if self.checker else 0,
                 "decode_failures": self.checker.failures if self.checker else 0}
        arrays = {"heads": heads, "failed": np.array(sorted(integrity.failed), dtype=np.int64)}
        if integrity.builder is not None:
            arrays["sums_offsets"] = np.asarray(integrity.builder.offsets, dtype=np.int64)
            arrays["sums_crcs"] = np.asarray(integrity.builder.crcs, dtype=np.uint32)
        return facts, arrays

    def merge(self, facts, arrays, first_record):
        """Add a part's ``state`` (the next span in file order; its records numbered from
        ``first_record``); returns its heads."""
        report = self.report
        if self.listed is None:
            self.listed = collections.Counter(p.kind for p in report.problems)
        for kind, offset, record, reason, end in facts["problems"]:
            if self.listed[kind] < report.limit:
                self.listed[kind] += 1
                report.problems.append(Problem(kind, offset, None if record is None else
                                               record + first_record, reason, end))
        report.counts.update(facts["counts"])
        report.skipped_bytes += facts["skipped_bytes"]
        report.bad_ranges.extend(tuple(r) for r in facts["bad_ranges"])
        if report.sums_checked is not None:
            report.sums_checked += facts["sums_checked"]
        if self.checker is not None:
            self.checker.decoded += facts["decoded"]
            self.checker.failures += facts["decode_failures"]
        self.integrity.merge(arrays["failed"], arrays.get("sums_offsets"),
                             arrays.get("sums_crcs"))
        return arrays["heads"]
