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
from typing import Any, Deque, Dict, List, Optional, Tuple

import numpy as np

from .coalesce import coalesce

__all__ = ["Prefetcher", "PrefetchRequests"]


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


class PrefetchRequests:
    """The requests planned for one sequence of reads; ``cancel()`` drops the unused ones."""

    def __init__(self, prefetcher, requests):
        self._prefetcher = prefetcher
        self.requests = requests
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
        self._by_span = {}  # span offset -> planned requests serving it, oldest first
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
        """Plan reads of the ``(offset, length)`` ``spans`` (in reading order), grouped by
        ``groups`` (one key per span) when given."""
        table = np.array(list(spans), dtype=np.int64).reshape(-1, 2)
        planned = []
        for batch in self._batches(table[:, 1], None if groups is None else list(groups)):
            offsets, lengths = table[batch, 0], table[batch, 1]
            for request in coalesce(offsets, lengths, max_gap=self.max_gap,
                                    max_block=self.max_block):
                item = _Announced(request.start, request.end, len(request.members))
                planned.append(item)
                keys = zip(offsets[request.members].tolist(), lengths[request.members].tolist())
                with self._lock:
                    for key in keys:
                        self._by_span.setdefault(key, []).append(item)
                    self._queue.append(item)
        with self._lock:
            self._pump()
        return PrefetchRequests(self, planned)

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

    def take(self, offset, length):
        """The announced bytes ``[offset, offset+length)``, or None when no request holds them."""
        with self._lock:
            items = self._by_span.get((offset, length))
            if not items:
                return None
            item = items.pop(0)
            if not items:
                del self._by_span[(offset, length)]
            if not item.issued:
                self._issue(item)
            future = item.future
            item.remaining -= 1
            if item.remaining == 0:
                self._release(item)
            self._pump()
        data = future.result(self.timeout)
        # a view, not a copy: the request's buffer lives as long as a span taken from it
        return memoryview(data)[offset - item.start:offset - item.start + length]

    def take_windows(self, spans):
        """``take`` of each ``(offset, length)`` of ``spans`` (a run of records) under one lock,
        by request: ``(windows, missing)``, the ``(buffer, start)`` of each request holding some
        of them (its bytes and their file offset, in order of first use) and the spans no request
        holds or whose request failed (the caller reads those on its own, which reports the
        error)."""
        picked: List[Optional[Tuple[int, Any]]] = []
        with self._lock:
            for span in spans:
                items = self._by_span.get(span)
                if not items:
                    picked.append(None)
                    continue
                item = items.pop(0)
                if not items:
                    del self._by_span[span]
                if not item.issued:
                    self._issue(item)
                picked.append((item.start, item.future))
                item.remaining -= 1
                if item.remaining == 0:
                    self._release(item)
            self._pump()
        windows: List[Tuple[memoryview, int]] = []
        missing: List[Tuple[int, int]] = []
        by_request: Dict[int, Any] = {}
        for span, entry in zip(spans, picked):
            window = None if entry is None else by_request.get(id(entry[1]))
            if entry is not None and window is None:
                window = by_request[id(entry[1])] = self._window_of(*entry)
                if window:
                    windows.append(window)
            if not window:
                missing.append(span)
        return windows, missing

    def _window_of(self, start, future):
        try:
            return memoryview(future.result(self.timeout)), start
        except Exception:  # noqa: BLE001 - reported when the span is read on its own
            return ()

    def cancel(self, requests):
        with self._lock:
            dropped = set()
            for item in requests.requests:
                if not item.done:
                    if item.future is not None:
                        item.future.cancel()
                    self._release(item)
                    dropped.add(id(item))
            for key in [k for k, items in self._by_span.items()
                        if any(id(i) in dropped for i in items)]:
                kept = [i for i in self._by_span[key] if id(i) not in dropped]
                if kept:
                    self._by_span[key] = kept
                else:
                    del self._by_span[key]
            self._pump()

    @property
    def held_bytes(self):
        return self._held

    def close(self):
        with self._lock:
            for items in self._by_span.values():
                for item in items:
                    if item.future is not None:
                        item.future.cancel()
            self._by_span.clear()
            self._queue.clear()
            self._held = 0
