"""What ``verify`` does with checksums and the quarantine, record by record.

``IntegrityCheck`` checks each readable record against the ``.sums`` sidecar (when there is
one), collects the sums of every record for ``--write-sums``, notes which records failed
anything, and at the end clears the quarantine entries of records that now pass and publishes
the sidecar when every record passed.
"""

import copy
import logging

import numpy as np

from ..errors import RecordFormatError
from .atomic import publish
from .quarantine import QuarantineFile
from .sources import source_identity
from .sums import SumsBuilder, load_sums, sums_url_for

__all__ = ["IntegrityCheck", "RECORD_PROBLEMS"]

log = logging.getLogger(__name__)

# problem kinds that mean a record itself is bad (a sidecar is written only without them)
RECORD_PROBLEMS = ("bad-record", "bad-header", "decode-failed", "checksum-mismatch",
                   "not-in-sums", "sums-unusable")


class IntegrityCheck:
    """Checksums and quarantine for one ``verify`` run over ``source``.

    ``check_sums``: check records against the existing sidecar; ``write_sums``: build a new
    one (the existing one is then not consulted: the decode is the judge); ``decoded``: whether
    images are decoded in this run (decode entries of the quarantine are cleared only then).
    """

    def __init__(self, report, source, storage_options=None, *, check_sums=True,
                 write_sums=False, decoded=False):
        self.report = report
        self.url = report.url
        self.storage_options = storage_options
        self.decoded = decoded
        self.failed = set()
        self.sums = self._load(source.size) if check_sums and not write_sums else None
        self.builder = SumsBuilder() if write_sums else None
        self.quarantine = QuarantineFile(source_identity(source))
        report.quarantined = sorted(self.quarantine.entries().values())
        report.sums_checked = 0 if self.sums is not None else None

    @property
    def needs_payload(self):
        return self.sums is not None or self.builder is not None

    def _load(self, size):
        try:
            return load_sums(self.url, size, self.storage_options)
        except RecordFormatError as exc:
            self.report.add("sums-unusable", None, None, exc.reason)
            return None

    def record(self, item):
        """Check and collect one readable record (a ``ScanItem``)."""
        if self.builder is not None:
            self.builder.add(item.offset, item.payload)
        if self.sums is None:
            return
        try:
            self.sums.check(item.payload, item.offset, rec_url=self.url, record=item.record)
        except RecordFormatError as exc:
            kind = "checksum-mismatch" if "mismatch" in exc.reason else "not-in-sums"
            self.report.add(kind, item.offset, item.record, exc.reason)
            self.failed.add(item.offset)
        else:
            self.report.sums_checked += 1

    def part(self, report, start, stop):
        """An empty copy checking the records of bytes ``[start, stop)`` into ``report`` (a
        byte-range task of ``verify``, ``verify.SpanChecks``): the sidecar's sums of those
        records only (the quarantine is left to this run's ``finish``)."""
        part = copy.copy(self)
        part.report, part.failed = report, set()
        part.builder = SumsBuilder() if self.builder is not None else None
        if self.sums is not None:
            low, high = np.searchsorted(self.sums.offsets, [start, stop])
            part.sums = copy.copy(self.sums)
            part.sums.offsets = self.sums.offsets[low:high]
            part.sums.crcs = self.sums.crcs[low:high]
        return part

    def merge(self, failed, sums_offsets=None, sums_crcs=None):
        """Add what a ``part`` found (the next span in file order): the offsets of its records
        that failed a check, and the sums it collected."""
        self.failed.update(np.asarray(failed).tolist())
        if self.builder is not None:
            self.builder.extend(sums_offsets, sums_crcs)

    def fail(self, offset):
        """Note that the record at ``offset`` failed another check (framing, decoding)."""
        self.failed.add(offset)

    def finish(self, heads, size):
        """Clear the quarantine entries that pass; publish the new sidecar if all passed."""
        self._clear_quarantine(heads)
        if self.builder is None:
            return
        if any(self.report.counts.get(kind) for kind in RECORD_PROBLEMS):
            log.warning("%s: not writing checksums: some records failed", self.url)
            return
        url = sums_url_for(self.url)
        publish(url, self.builder.to_bytes(size), self.storage_options)
        self.report.sums_written = url

    def _clear_quarantine(self, heads):
        entries = self.report.quarantined
        if not entries:
            return
        readable = set(heads.tolist()) if len(entries) > 64 else None
        kept = [e for e in entries if not self._passes(e, heads, readable)]
        self.report.quarantine_cleared = len(entries) - len(kept)
        if len(kept) < len(entries):
            self.quarantine.rewrite(kept)
        for entry in kept:
            self.report.add("quarantined", entry.offset, entry.record,
                            f"quarantined by a loader ({entry.kind}: {entry.reason})")

    def _passes(self, entry, heads, readable):
        if entry.offset in self.failed or (entry.kind == "decode" and not self.decoded):
            return False
        if entry.kind == "sum" and self.sums is None and not (self.builder and self.decoded):
            return False  # nothing checked it in this run
        if readable is not None:
            return entry.offset in readable
        return bool((heads == entry.offset).any())
