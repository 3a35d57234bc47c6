"""``coalesce``: spans merged into range requests in numpy, against the plain greedy pass over
spans sorted by offset that it replaces (spans of a file's records never overlap)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from recpipe.io.remote.coalesce import coalesce


def greedy(spans, max_gap, max_block):
    """The reference: one pass over the sorted spans, a request grows while the next span is
    within ``max_gap`` of its end and the request within ``max_block``."""
    requests = []
    for start, length in sorted(spans):
        end = start + length
        if requests:
            first, last, members = requests[-1]
            if start - last <= max_gap and max(last, end) - first <= max_block:
                requests[-1] = (first, max(last, end), members + [(start, length)])
                continue
        requests.append((start, end, [(start, length)]))
    return requests


@st.composite
def record_spans(draw):
    """Spans of records of one file (gaps between them), in a shuffled reading order, some
    read twice."""
    sizes = draw(st.lists(st.integers(1, 300), min_size=1, max_size=60))
    gaps = draw(st.lists(st.integers(0, 200), min_size=len(sizes), max_size=len(sizes)))
    spans, at = [], 0
    for size, gap in zip(sizes, gaps):
        at += gap
        spans.append((at, size))
        at += size
    spans += draw(st.lists(st.sampled_from(spans), max_size=5))
    return draw(st.permutations(spans))


@settings(max_examples=300, deadline=None)
@given(spans=record_spans(), max_gap=st.integers(0, 250), max_block=st.integers(1, 2000))
def test_requests_equal_the_greedy_pass(spans, max_gap, max_block):
    offsets = np.array([s for s, _ in spans], dtype=np.int64)
    lengths = np.array([n for _, n in spans], dtype=np.int64)
    got = [(r.start, r.end, sorted(zip(offsets[r.members].tolist(),
                                        lengths[r.members].tolist())))
           for r in coalesce(offsets, lengths, max_gap=max_gap, max_block=max_block)]
    assert got == greedy(spans, max_gap, max_block)
    served = np.concatenate([r.members for r in coalesce(offsets, lengths, max_gap=max_gap,
                                                         max_block=max_block)])
    assert sorted(served.tolist()) == list(range(len(spans)))  # each span once


def test_no_spans_no_requests():
    assert coalesce([], [], max_gap=10, max_block=100) == []
