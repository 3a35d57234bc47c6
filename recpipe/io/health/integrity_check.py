"""What ``verify`` does with checksums and the quarantine, record by record.

``IntegrityCheck`` checks each readable record against the ``.sums`` sidecar (when there is
one), collects the sums of every record for ``--write-sums``, notes which records failed
anything, and at the end clears the quarantine entries of records that now pass and publishes
the sidecar when every record passed.
"""

import copy
import logging

import numpy as np

from ...errors import CHECKSUM, RecordFormatError, StaleSumsError
from ..atomic import publish
from ..sidecars.quarantine import QuarantineFile, entry_holds
from ..sources import source_identity
from ..sidecars.sums import RecordSums, SumsBuilder, load_sums, sums_url_for

__all__ = ["IntegrityCheck", "RECORD_PROBLEMS"]

log = logging.getLogger(__name__)

# problem kinds that mean a record itself is bad (a sidecar is written only without them)
RECORD_PROBLEMS = ("bad-record", "bad-header", "decode-failed", "checksum-mismatch",
                   "not-in-sums", "sums-unusable")


class IntegrityCheck:
    """Checksums and quarantine for one ``verify`` run over ``source``.

    ``check_sums``: check records against the existing sidecar when it describes the file;
    ``write_sums``: build a new one, published only when every record passed, the existing
    sidecar's checks included: a record it calls damaged is never certified (its quarantine
    entry stays) unless ``accept_current_bytes`` says to take the bytes as they are now (each
    such record is listed in ``report.accepted``). A stale or damaged old sidecar says nothing
    of the records: ``write_sums`` replaces it (``report.sums_replaced``). ``decoded``: whether
    images are decoded in this run (decode entries of the quarantine are cleared only then).
    """

    def __init__(self, report, source, storage_options=None, *, check_sums=True,
                 write_sums=False, decoded=False, accept_current_bytes=False):
        self.report = report
        self.url = report.url
        self.storage_options = storage_options
        self.decoded = decoded
        self.failed = set()
        self.builder = SumsBuilder() if write_sums else None
        self.accept = accept_current_bytes and write_sums
        self.sidecar_problem = None  # (kind, reason) of an old sidecar write_sums replaces
        self.checked_sums = check_sums
        self.sums = self._load(source) if check_sums else None
        self.quarantine = QuarantineFile(source_identity(source))
        report.quarantined = sorted(self.quarantine.entries().values())
        report.sums_checked = 0 if self.sums is not None else None

    @property
    def needs_payload(self):
        return self.sums is not None or self.builder is not None

    def _load(self, source):
        """The sidecar bound to the file (``report.sums_state``: 'bound', 'absent', 'stale' or
        'unusable'), else None."""
        try:
            sums = load_sums(self.url, source.size, self.storage_options, source=source)
        except StaleSumsError as exc:
            self._sidecar_failed("stale", "sums-stale", exc.reason)
            return None
        except (RecordFormatError, OSError) as exc:
            self._sidecar_failed("unusable", "sums-unusable", getattr(exc, "reason", str(exc)))
            return None
        self.report.sums_state = "absent" if sums is None else "bound"
        return sums

    def _sidecar_failed(self, state, kind, reason):
        """The old sidecar is stale or damaged: a problem, or, when a new one is written, what
        it replaces (a problem again if it is not written after all)."""
        self.report.sums_state = state
        if self.builder is not None:
            self.sidecar_problem = (kind, reason)
        else:
            self.report.add(kind, None, None, reason)

    def record(self, item):
        """Check and collect one readable record (a ``ScanItem``)."""
        if self.builder is not None:
            self.builder.add(item.offset, item.payload)
        if self.sums is None:
            return
        try:
            self.sums.check(item.payload, item.offset, rec_url=self.url, record=item.record)
        except StaleSumsError as exc:  # found at the first record that differs: not used
            self.sums = None
            self.report.sums_checked = None
            self._sidecar_failed("stale", "sums-stale", exc.reason)
        except RecordFormatError as exc:
            kind = "checksum-mismatch" if exc.fault == CHECKSUM else "not-in-sums"
            if self.accept:  # the caller takes these bytes as they are now
                self.report.accept(kind, item.offset, item.record, exc.reason)
            else:
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
        """Publish the new sidecar if every record passed; clear the quarantine entries that
        pass and those void now (found with a sidecar that is gone, replaced or stale)."""
        written = self._write_sums(size)
        self._clear_quarantine(heads, written)

    def _write_sums(self, size):
        """The new sidecar (``RecordSums``) when one is asked for and every record passed."""
        if self.builder is None:
            return None
        if any(self.report.counts.get(kind) for kind in RECORD_PROBLEMS):
            log.warning("%s: not writing checksums: some records failed", self.url)
            if self.sidecar_problem is not None:
                self.report.add(*self.sidecar_problem, None, None)
            return None
        url = sums_url_for(self.url)
        data = self.builder.to_bytes(size)
        publish(url, data, self.storage_options)
        self.report.sums_written = url
        if self.sidecar_problem is not None:
            self.report.sums_replaced = self.sidecar_problem[1]
        if self.report.accepted:
            log.warning("%s: the current bytes of %d records the old sidecar called damaged "
                        "were accepted (accept_current_bytes)", self.url,
                        len(self.report.accepted))
        return RecordSums.from_bytes(data, path=url)

    def _holds(self, written):
        """``holds(entry)``: whether a quarantine entry still stands after this run ('sum'
        entries die with the sidecar that found them), or None when this run did not look
        at the sidecar (``--no-sums``: entries are kept as they are)."""
        if written is not None:
            token = written.token
        elif self.checked_sums:
            token = self.sums.token if self.sums is not None else None
        else:
            return None
        return lambda entry: entry_holds(entry, token)

    def _clear_quarantine(self, heads, written):
        entries = self.report.quarantined
        if not entries:
            return
        holds = self._holds(written)
        live = entries if holds is None else [e for e in entries if holds(e)]
        readable = set(heads.tolist()) if len(live) > 64 else None
        kept = [e for e in live if not self._passes(e, heads, readable)]
        if len(kept) < len(entries) and not self.quarantine.rewrite(kept):
            kept = live = entries  # the file could not be rewritten (a full disk): as it was
        self.report.quarantine_cleared = len(entries) - len(kept)
        self.report.quarantine_void = len(entries) - len(live)
        for entry in kept:
            self.report.add("quarantined", entry.offset, entry.record,
                            f"quarantined by a loader ({entry.kind}, found by "
                            f"{entry.detector or '?'}: {entry.reason})")

    def _passes(self, entry, heads, readable):
        if entry.offset in self.failed or (entry.kind == "decode" and not self.decoded):
            return False
        if entry.kind == "sum" and self.sums is None and not (self.builder and self.decoded):
            return False  # nothing checked it in this run
        if readable is not None:
            return entry.offset in readable
        return bool((heads == entry.offset).any())
