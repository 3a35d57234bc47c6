"""Merging many small byte ranges into few range requests.

Spans sorted by offset (``fsspec.utils.merge_offset_ranges`` is quadratic), all in numpy: a
neighbour closer than ``max_gap`` bytes to what comes before it joins the same request as long
as the request stays within ``max_block`` bytes (a span longer than that is a request of its
own). Each request names the spans it serves by their indices.
"""

from typing import List, NamedTuple

import numpy as np

__all__ = ["Request", "coalesce"]


class Request(NamedTuple):
    """One range request ``[start, end)`` and the indices of the spans it serves (int64, in
    offset order)."""

    start: int
    end: int
    members: np.ndarray

    @property
    def size(self):
        return self.end - self.start


def coalesce(offsets, lengths, *, max_gap, max_block) -> List[Request]:
    """Group the spans ``offsets[i], lengths[i]`` into requests (in offset order); duplicates
    are kept."""
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.lexsort((lengths, offsets))
    starts = offsets[order]
    reach = np.maximum.accumulate(starts + lengths[order])  # the furthest end so far
    cuts = (np.flatnonzero(starts[1:] - reach[:-1] > max_gap) + 1).tolist()
    requests: List[Request] = []
    for first, stop in zip([0] + cuts, cuts + [len(starts)]):  # runs of spans within max_gap
        while first < stop:
            start = int(starts[first])
            last = first + int(np.searchsorted(reach[first:stop], start + max_block, "right"))
            last = max(last, first + 1)
            requests.append(Request(start, int(reach[last - 1]), order[first:last]))
            first = last
    return requests
