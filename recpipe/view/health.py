"""Which records are known bad, and why: the quarantine, ``verify``, and what the viewer met.

Three sources, each entry with its error, path and offset:

- the quarantine loaders keep for this version of the file (``recpipe.io.sidecars.quarantine``:
checksum,
  framing and decode failures met while training), read when asked (it may grow while the
  viewer runs);
- the last ``verify`` run from the page (its problems: bad byte ranges, checksum mismatches,
  decode failures, index problems);
- the records the viewer itself failed to read or decode while showing them (at most
  ``SEEN_LIMIT``, the first ones kept).

``marks(positions)`` gives the page the mark of each record it shows.
"""

import threading

import numpy as np

from ..io.sidecars.quarantine import QuarantineFile

__all__ = ["Health", "SEEN_LIMIT"]

SEEN_LIMIT = 10000
_VERIFY_RECORD_KINDS = ("checksum-mismatch", "decode-failed", "bad-header", "quarantined",
                        "not-in-sums")


class Health:
    """The known-bad records of ``dataset`` (see the module docstring)."""

    def __init__(self, dataset):
        self.dataset = dataset
        self._lock = threading.Lock()
        self._seen = {}
        self._verify = None  # (by position: problem dict, bad byte ranges, report)
        # the quarantine of the version of the file the viewer opened
        self._quarantine = QuarantineFile(dataset.identity)

    # -- sources ---------------------------------------------------------------------------

    def quarantined(self):
        """The quarantine entries of this file as dicts, by position (entries whose offset is
        not a record of the index are listed under position None)."""
        entries = self._quarantine.entries()
        table = self.dataset.reader.table
        ordered = table.sorted_offsets
        found = []
        for entry in sorted(entries.values()):
            found.append({"source": "quarantine",
                          "position": _position_at(table, ordered, entry.offset),
                          "offset": entry.offset, "kind": entry.kind, "reason": entry.reason,
                          "path": self.dataset.url})
        return found

    def saw(self, position, error):
        """Remember that the viewer met ``error`` (a ``record_error`` dict) at ``position``."""
        with self._lock:
            if position in self._seen or len(self._seen) < SEEN_LIMIT:
                self._seen[position] = {"source": "viewer", "position": position,
                                        "offset": int(self.dataset.reader.table.offsets[position]),
                                        "path": self.dataset.url, **error}

    def took_verify(self, report):
        """Keep the problems of a ``verify`` report (``VerifyReport.to_dict``)."""
        table = self.dataset.reader.table
        order = table.sorted_offsets
        by_position, ranges = {}, []
        for problem in report.get("problems", []):
            entry = {"source": "verify", "path": report.get("url"), **problem}
            if problem["kind"] == "bad-record" and "offset" in problem:
                ranges.append((problem["offset"], problem.get("end", problem["offset"] + 1),
                               entry))
                continue
            if problem["kind"] in _VERIFY_RECORD_KINDS and problem.get("offset") is not None:
                position = _position_at(table, order, problem["offset"])
                if position is not None:
                    by_position[position] = {**entry, "position": position}
        with self._lock:
            self._verify = (by_position, ranges, report)

    # -- what the page shows ---------------------------------------------------------------

    def marks(self, positions, offsets):
        """``{position: [entries]}`` for the records at ``positions`` (with their byte
        ``offsets``) that some source says are bad."""
        quarantine = {e["offset"]: e for e in self.quarantined()}
        with self._lock:
            seen = dict(self._seen)
            verified = self._verify
        out = {}
        for position, offset in zip(positions, offsets):
            found = []
            if offset in quarantine:
                found.append(quarantine[offset])
            if verified is not None:
                by_position, ranges, _ = verified
                if position in by_position:
                    found.append(by_position[position])
                found += [entry for start, end, entry in ranges if start <= offset < end]
            if position in seen:
                found.append(seen[position])
            if found:
                out[position] = found
        return out

    def listing(self) -> dict:
        """Everything known: quarantine entries, verify's problems and counts, the viewer's."""
        with self._lock:
            seen = sorted(self._seen.values(), key=lambda e: e["position"])
            verified = self._verify
        out = {"quarantine": self.quarantined(), "viewer": seen, "viewer_limit": SEEN_LIMIT,
               "verify": None}
        if verified is not None:
            report = verified[2]
            out["verify"] = {k: report.get(k) for k in ("ok", "records", "bytes", "counts",
                                                         "decoded", "decode_failures",
                                                         "sums_checked", "skipped_bytes",
                                                         "quarantine_cleared", "index_url")}
            table = self.dataset.reader.table
            order = table.sorted_offsets
            out["verify"]["problems"] = [
                {"source": "verify", "path": report.get("url"), **p,
                 "position": _position_at(table, order, p.get("offset"))}
                for p in report.get("problems", [])]
        return out


def _position_at(table, ordered, offset):
    """The index position of the record at byte ``offset``, or None."""
    if offset is None or not len(ordered):
        return None
    at = int(np.searchsorted(ordered, offset))
    if at >= len(ordered) or int(ordered[at]) != offset:
        return None
    if ordered is table.offsets:
        return at
    found = np.flatnonzero(table.offsets == offset)
    return int(found[-1]) if len(found) else None
