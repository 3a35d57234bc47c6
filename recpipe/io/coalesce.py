"""Merging many small byte ranges into few range requests.

A linear pass over spans sorted by offset (``fsspec.utils.merge_offset_ranges`` is quadratic):
neighbours closer than ``max_gap`` bytes join one request as long as it stays within
``max_block`` bytes. Each request remembers which spans it serves.
"""

from typing import List, NamedTuple, Tuple

__all__ = ["Request", "coalesce"]


class Request(NamedTuple):
    """One range request ``[start, end)`` and the ``(start, length)`` spans it serves."""

    start: int
    end: int
    spans: List[Tuple[int, int]]

    @property
    def size(self):
        return self.end - self.start


def coalesce(spans, *, max_gap, max_block):
    """Group ``(start, length)`` spans into requests (in offset order); duplicates are kept."""
    requests: List[Request] = []
    ordered = sorted(spans)
    if not ordered:
        return requests
    start, length = ordered[0]
    end = start + length
    members = [ordered[0]]
    for span in ordered[1:]:
        s, n = span
        e = s + n
        if s - end <= max_gap and max(end, e) - start <= max_block:
            end = max(end, e)
            members.append(span)
            continue
        requests.append(Request(start, end, members))
        start, end, members = s, e, [span]
    requests.append(Request(start, end, members))
    return requests
