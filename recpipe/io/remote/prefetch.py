"""Indexed access to a remote file: records announced ahead are fetched by coalesced range requests.

``Prefetcher.announce(spans, groups)`` takes the ``(offset, length)`` spans that will be read,
in the order they will be read. Spans are coalesced (neighbours within ``max_gap`` bytes, up to
``max_block`` bytes per request) either per window of consecutive spans (``plan_window`` of them,
more while they hold less than half of ``budget`` bytes), or per group (a run of a block
shuffle: every record of a run then comes from one or few requests).
Requests are issued in order while the bytes held stay under ``budget``; ``take(offset, length)``
serves a planned span as a memoryview of its request's buffer (waiting for the request, or
issuing it at once when it is still queued), ``take_windows(spans)`` a run of them as the
requests holding them; the prefetcher drops its reference to a request's
bytes when the last span has been taken. ``PrefetchRequests.cancel()`` forgets the requests
an announcement has not used yet; ``PrefetchRequests.all_sent`` says when none of them waits for
the budget any more (the time to announce what comes next: its requests queue behind).
"""

import threading
from collections import deque
from typing import Any, Deque, List, Tuple

import numpy as np

from .coalesce import coalesce

__all__ = ["Claimed", "Prefetcher", "PrefetchRequests"]


class _Announced:
    __slots__ = ("start", "end", "remaining", "future", "issued", "done")

    def __init__(self, start, end, spans):
        self.start = start
        self.end = end
        self.remaining = spans
        self.future = None
        self.issued = False
        self.done = False

    @property
    def size(self):
        return self.end - self.start


class _SpanTable:
    """One announcement's spans sorted by ``(offset, length)`` (int64 arrays), the index in
    ``items`` of the request serving each, which were taken, and how many are left: a run's
    spans are found by one ``searchsorted``, not a Python step each."""

    __slots__ = ("offsets", "lengths", "request", "taken", "items", "left")

    def __init__(self, offsets, lengths, request, items):
        order = np.lexsort((lengths, offsets))
        self.offsets = offsets[order]
        self.lengths = lengths[order]
        self.request = request[order]
        self.taken = np.zeros(len(order), dtype=bool)
        self.items = items
        self.left = len(order)

    def claim(self, offsets, lengths):
        """Take one untaken entry of each ``(offsets[i], lengths[i])`` span: the indices of the
        entries taken (-1: none left here)."""
        found = np.full(len(offsets), -1, dtype=np.int64)
        n = len(self.offsets)
        if n == 0 or len(offsets) == 0:
            return found
        pos = np.searchsorted(self.offsets, offsets, "left")
        at = np.minimum(pos, n - 1)
        held = (pos < n) & (self.offsets[at] == offsets)
        fast = np.flatnonzero(held & (self.lengths[at] == lengths) & ~self.taken[at])
        _, first = np.unique(at[fast], return_index=True)  # a span asked twice: once here
        fast = fast[first]
        found[fast] = at[fast]
        self.taken[at[fast]] = True
        for i in np.flatnonzero(held & (found < 0)).tolist():  # repeats, other lengths: rare
            j, offset, length = int(at[i]), int(offsets[i]), int(lengths[i])
            while j < n and self.offsets[j] == offset:
                if self.lengths[j] == length and not self.taken[j]:
                    found[i] = j
                    self.taken[j] = True
                    break
                j += 1
        self.left -= int(np.count_nonzero(found >= 0))
        return found


class PrefetchRequests:
    """The requests planned for one sequence of reads; ``cancel()`` drops the unused ones."""

    def __init__(self, prefetcher, requests, plan=None):
        self._prefetcher = prefetcher
        self.requests = requests
        self.plan = plan
        self.planned_requests = len(requests)
        self.planned_bytes = sum(r.size for r in requests)
        self._unsent = 0  # requests[:_unsent] have been sent (or dropped)

    @property
    def all_sent(self):
        """True once every planned request has been sent, taken in full or dropped: nothing of
        this plan waits for the budget any more (a following plan's requests go next)."""
        requests = self.requests
        while self._unsent < len(requests) and (requests[self._unsent].issued
                                                or requests[self._unsent].done):
            self._unsent += 1
        return self._unsent == len(requests)

    def cancel(self):
        if self._prefetcher is not None:
            self._prefetcher.cancel(self)
            self._prefetcher = None


class Claimed:
    """Spans taken from a ``Prefetcher``'s plans (``claim``): the request of each (``which``:
    an index in ``used``, -1 for none) and each request's ``(item, future)``. ``windows()``
    waits for the requests: ``(windows, missing)`` as ``Prefetcher.take_windows``; the
    bookkeeping is done here, where the spans are claimed, so that the thread waiting does
    little more than wait."""

    def __init__(self, table, which, used, timeout):
        self.table, self.which, self.used, self.timeout = table, which, used, timeout
        held = which >= 0
        _, first = np.unique(which[held], return_index=True)
        self.first_use = which[held][np.sort(first)].tolist()  # requests, in order of first use
        self.unheld = [tuple(span) for span in table[~held].tolist()]

    def windows(self):
        windows: List[Tuple[memoryview, int]] = []
        failed = []
        for index in self.first_use:
            item, future = self.used[index]
            try:
                windows.append((memoryview(future.result(self.timeout)), item.start))
            except Exception:  # noqa: BLE001 - reported when the span is read on its own
                failed.append(index)
        if not failed:
            return windows, list(self.unheld)
        lost = np.isin(self.which, failed) | (self.which < 0)
        return windows, [tuple(span) for span in self.table[lost].tolist()]


class Prefetcher:
    """Coalesced, budgeted read-ahead of announced spans; ``submit(start, end)`` returns a
    Future."""

    def __init__(self, submit, *, budget, max_gap, max_block, plan_window, timeout):
        self.submit = submit
        self.budget = budget
        self.max_gap = max_gap
        self.max_block = max_block
        self.plan_window = plan_window
        self.timeout = timeout
        self._lock = threading.Lock()
        self._queue: Deque[Any] = deque()
        self._plans: List[_SpanTable] = []  # the announcements with spans left, oldest first
        self._held = 0

    def _batches(self, lengths, groups):
        """Index arrays of the spans coalesced together: per group (in order of each group's
        first span), or per window."""
        if groups is None:
            yield from self._windows(lengths)
            return
        _, first, inverse = np.unique(np.asarray(groups), return_index=True,
                                      return_inverse=True)
        rank = np.empty(len(first), dtype=np.int64)
        rank[np.argsort(first)] = np.arange(len(first))
        key = rank[inverse.reshape(-1)]
        order = np.argsort(key, kind="stable")
        yield from np.split(order, np.flatnonzero(np.diff(key[order])) + 1)

    def _windows(self, lengths):
        """Consecutive windows of at least ``plan_window`` spans and half the budget's bytes:
        a shuffled order over a file that fits in half the budget is coalesced whole (each byte
        fetched once an epoch, not once per window whose records straddle it)."""
        held = np.concatenate(([0], np.cumsum(lengths)))  # bytes before each span
        first = 0
        while first < len(lengths):
            last = min(len(lengths), first + self.plan_window)
            if held[last] - held[first] < self.budget // 2:
                wanted = int(np.searchsorted(held, held[first] + self.budget // 2, "left"))
                last = min(len(lengths), max(last, wanted))
            yield np.arange(first, last)
            first = last

    def announce(self, spans, groups=None):
        """Plan reads of the ``(offset, length)`` ``spans`` (in reading order: pairs or an
        ``(n, 2)`` array), grouped by ``groups`` (one key per span) when given."""
        table = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
        request = np.zeros(len(table), dtype=np.int64)  # index in ``planned`` of each span's
        planned: List[_Announced] = []
        for batch in self._batches(table[:, 1], None if groups is None else np.asarray(groups)):
            for r in coalesce(table[batch, 0], table[batch, 1], max_gap=self.max_gap,
                              max_block=self.max_block):
                request[batch[r.members]] = len(planned)
                planned.append(_Announced(r.start, r.end, len(r.members)))
        plan = _SpanTable(table[:, 0], table[:, 1], request, planned)
        with self._lock:
            if plan.left:
                self._plans.append(plan)
            self._queue.extend(planned)
            self._pump()
        return PrefetchRequests(self, planned, plan)

    def _issue(self, item):
        item.issued = True
        item.future = self.submit(item.start, item.end)
        self._held += item.size

    def _pump(self):
        while self._queue:
            item = self._queue[0]
            if item.issued or item.done:
                self._queue.popleft()
                continue
            if self._held and self._held + item.size > self.budget:
                return
            self._queue.popleft()
            self._issue(item)

    def _release(self, item):
        item.done = True
        item.future = None
        if item.issued:
            self._held -= item.size

    def _claim(self, offsets, lengths):
        """Under the lock: take each span from the oldest plan holding it. Returns ``(which,
        used)``: per span the index in ``used`` of its request (-1: no plan holds it), and
        ``used``, the ``(item, future)`` of each request serving some (sent now if still
        queued; let go when its last span is taken)."""
        which = np.full(len(offsets), -1, dtype=np.int64)
        used: List[Tuple[_Announced, Any]] = []
        pending = np.arange(len(offsets))
        for plan in list(self._plans):
            found = plan.claim(offsets[pending], lengths[pending])
            hit = found >= 0
            if hit.any():
                requests, inverse, counts = np.unique(plan.request[found[hit]],
                                                      return_inverse=True, return_counts=True)
                which[pending[hit]] = len(used) + inverse.reshape(-1)
                for index, count in zip(requests.tolist(), counts.tolist()):
                    item = plan.items[index]
                    if not item.issued:
                        self._issue(item)
                    used.append((item, item.future))
                    item.remaining -= count
                    if item.remaining == 0:
                        self._release(item)
                pending = pending[~hit]
            if plan.left == 0:
                self._plans.remove(plan)
            if not len(pending):
                break
        self._pump()
        return which, used

    def take(self, offset, length):
        """The announced bytes ``[offset, offset+length)``, or None when no request holds them."""
        with self._lock:
            if not self._plans:
                return None
            which, used = self._claim(np.array([offset], dtype=np.int64),
                                      np.array([length], dtype=np.int64))
        if which[0] < 0:
            return None
        item, future = used[0]
        data = future.result(self.timeout)
        # a view, not a copy: the request's buffer lives as long as a span taken from it
        return memoryview(data)[offset - item.start:offset - item.start + length]

    def take_windows(self, spans):
        """``take`` of each ``(offset, length)`` of ``spans`` (a run of records: pairs or an
        ``(n, 2)`` array) under one lock, by request: ``(windows, missing)``, the ``(buffer,
        start)`` of each request holding some of them (its bytes and their file offset, in order
        of first use) and the ``(offset, length)`` spans no request holds or whose request
        failed (the caller reads those on its own, which reports the error)."""
        return self.claim(spans).windows()

    def claim(self, spans):
        """Take ``spans`` (pairs or an ``(n, 2)`` array) from the plans now, without waiting for
        their bytes: a ``Claimed`` whose ``windows()`` waits for them (``take_windows``'s
        result), e.g. on the thread that decodes them."""
        table = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
        with self._lock:
            which, used = self._claim(table[:, 0], table[:, 1]) if self._plans else \
                (np.full(len(table), -1, dtype=np.int64), [])
        return Claimed(table, which, used, self.timeout)

    def cancel(self, requests):
        with self._lock:
            if requests.plan in self._plans:
                self._plans.remove(requests.plan)
            for item in requests.requests:
                if not item.done:
                    if item.future is not None:
                        item.future.cancel()
                    self._release(item)
            self._pump()

    @property
    def held_bytes(self):
        return self._held

    def close(self):
        with self._lock:
            for plan in self._plans:
                for item in plan.items:
                    if item.future is not None:
                        item.future.cancel()
            self._plans.clear()
            self._queue.clear()
            self._held = 0
