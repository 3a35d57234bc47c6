"""``RemoteSource``: a byte source over range requests, with retries, prefetching and a block cache.

A range reader (``fetch(start, end, timeout) -> bytes-like``, ``recpipe.io.remote.ranges``) does the
I/O; ``RemoteSource`` adds on top:

- retries with backoff and a deadline per read, and a length check of every response;
- sequential streaming (``ReadAhead``) when reads move forward through the file;
- indexed access (``prefetch(spans, groups)``): announced records fetched by coalesced,
  concurrent range requests (at most ``max_inflight`` in flight);
- an optional local block cache, so that later epochs are served from disk;
- counters (``stats()``): requests, bytes requested and fetched, most requests in flight, retries.
"""

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...system.fork import after_fork_in_child
from .cache import BlockCache
from .prefetch import Prefetcher
from .readahead import ReadAhead
from .retry import ShortReadError, call_with_retry
from ..source import Source

__all__ = ["ReadStats", "RemoteSource", "WindowClaim"]

log = logging.getLogger(__name__)
_STREAM_MIN_READ = 1 << 20  # forward reads at least this big switch to streaming


class ReadStats:
    """Thread-safe counters of one source's requests."""

    def __init__(self):
        self._lock = threading.Lock()
        self.requests = 0
        self.bytes_requested = 0
        self.bytes_fetched = 0
        self.bytes_returned = 0
        self.retries = 0
        self.inflight = 0
        self.max_inflight = 0

    def start(self, nbytes=0):
        with self._lock:
            self.requests += 1
            self.bytes_requested += nbytes
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)

    def finish(self, nbytes):
        with self._lock:
            self.inflight -= 1
            self.bytes_fetched += nbytes

    def add(self, name, value=1):
        with self._lock:
            setattr(self, name, getattr(self, name) + value)

    def snapshot(self):
        with self._lock:
            return {"requests": self.requests, "bytes_requested": self.bytes_requested,
                    "bytes_fetched": self.bytes_fetched,
                    "bytes_returned": self.bytes_returned, "retries": self.retries,
                    "max_inflight": self.max_inflight}


class WindowClaim:
    """Spans of a ``RemoteSource`` taken from its prefetch plan (``claim_windows``);
    ``windows()`` waits for them once (thread-safe: every caller gets the same list)."""

    def __init__(self, source, claimed, nbytes):
        self._source, self._claimed, self._nbytes = source, claimed, nbytes
        self._lock = threading.Lock()
        self._windows = None

    def windows(self):
        with self._lock:
            if self._windows is None:
                windows, missing = self._claimed.windows()
                source = self._source
                source.counters.add("bytes_returned", self._nbytes
                                    - sum(length for _, length in missing))
                for offset, length in missing:
                    data = source._read_or_empty(offset, length)
                    if len(data) == length:
                        windows.append((data, offset))
                self._windows = windows
            return self._windows


class RemoteSource(Source):
    """Positional reads of a remote file of ``size`` bytes through ``ranges``."""

    remote = True

    def __init__(self, ranges, url, size, options, *, identity=None, storage_options=None,
                 reopen=None):
        self.ranges = ranges
        self.reopen = reopen  # callable(url, storage_options) -> a new source, for pickling
        self.url = url
        self.size = size
        self.options = options
        self.storage_options = storage_options
        self.counters = ReadStats()
        self.cache = None
        if options.cache_dir:
            self.cache = BlockCache(options.cache_dir, identity or f"{url}@{size}",
                                    max_bytes=options.cache_bytes, block_size=options.cache_block)
        self._lock = threading.Lock()
        self._pool = None  # this process's request threads (a forked child drops the parent's)
        self._closed = False
        self._last = None  # (offset, end) of the previous direct read
        timeout = options.deadline + options.request_timeout
        self._stream = ReadAhead(self._submit, size, chunk=options.chunk_bytes,
                                 depth=options.readahead_chunks, timeout=timeout)
        self._prefetcher = Prefetcher(self._submit, budget=options.budget_bytes,
                                      max_gap=options.max_gap, max_block=options.max_block,
                                      plan_window=options.plan_window, timeout=timeout)
        after_fork_in_child(self, RemoteSource._forget_parent)

    def _forget_parent(self):
        self._lock = threading.Lock()
        self._pool = None  # its threads stayed in the parent

    # -- requests -------------------------------------------------------------------------

    def _executor(self):
        with self._lock:
            if self._closed:
                raise ValueError(f"read from a closed source: {self.url}")
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.options.max_inflight,
                                                thread_name_prefix="recpipe-fetch")
            return self._pool

    def _submit(self, start, end):
        return self._executor().submit(self._fetch, start, end)

    def _request(self, start, end, timeout):
        self.counters.start(end - start)
        data = b""
        try:
            data = self.ranges.fetch(start, end, timeout)
        finally:
            self.counters.finish(len(data) if data else 0)
        if len(data) != end - start:
            raise ShortReadError(f"asked for {end - start} bytes at {start}, got {len(data)}")
        return data

    def _fetch_uncached(self, start, end):
        return call_with_retry(lambda timeout: self._request(start, end, timeout),
                               self.options.retry, url=self.url, offset=start, length=end - start,
                               on_retry=lambda exc: self.counters.add("retries"))

    def _fetch(self, start, end):
        """Bytes ``[start, end)``: from the block cache when enabled, else one range request."""
        if self.cache is None:
            return self._fetch_uncached(start, end)
        block = self.cache.block_size
        parts = []
        for number in range(start // block, (end - 1) // block + 1):
            lo, hi = number * block, min((number + 1) * block, self.size)
            data = self.cache.get(number, hi - lo)
            if data is None:
                data = self._fetch_uncached(lo, hi)
                self.cache.put(number, data)
            parts.append(memoryview(data)[max(start, lo) - lo:min(end, hi) - lo])
        return b"".join(parts)

    # -- reads ----------------------------------------------------------------------------

    def _read(self, offset, length):
        data = self._prefetcher.take(offset, length)
        if data is None:
            data = self._stream.read(offset, length)
        if data is None:
            data = self._direct(offset, length)
        self.counters.add("bytes_returned", len(data))
        return data

    def read_windows(self, spans):
        """The bytes holding each ``(offset, length)`` of ``spans`` (a run of records, each
        within the file: pairs or an ``(n, 2)`` array), as ``(buffer, offset)`` windows of the
        file: the prefetched requests holding them, taken under one lock, and one window for
        each other span, read on its own (none for a span whose read fails: the caller's own
        read of it reports the error)."""
        return self.claim_windows(spans).windows()

    def claim_windows(self, spans):
        """``read_windows`` in two steps: the spans are taken from the prefetch plan now (in
        the order of reading, e.g. by the thread that issues batches), their bytes waited for
        and the rest read by the returned ``WindowClaim``'s ``windows()`` (e.g. on the thread
        that decodes them)."""
        spans = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
        return WindowClaim(self, self._prefetcher.claim(spans), int(spans[:, 1].sum()))

    def _read_or_empty(self, offset, length):
        try:
            return self.read(offset, length)
        except Exception:  # noqa: BLE001 - b"": the caller reads it again, which reports it
            return b""

    def _direct(self, offset, length):
        last, self._last = self._last, (offset, offset + length)
        forward = last is not None and last[0] < offset <= last[1] < offset + length
        if forward and length >= _STREAM_MIN_READ:
            self._stream.restart(offset)
            data = self._stream.read(offset, length)
            if data is not None:
                return data
        return self._fetch(offset, offset + length)

    def prefetch(self, spans, groups=None):
        """Announce reads of ``(offset, length)`` spans in this order; return the PrefetchRequests.

        ``groups`` (one key per span) coalesces each group's spans on its own (block-shuffle runs);
        without it spans are coalesced per window of ``plan_window`` consecutive spans.
        """
        self._executor()  # raises on a closed source
        return self._prefetcher.announce(spans, groups)

    def stats(self):
        """Counters: requests, bytes_requested, bytes_fetched, bytes_returned, retries, max_inflight
        (+ cache hits, misses and failed cache writes).

        ``requests`` and ``bytes_requested`` count when a request is sent, ``bytes_fetched`` when
        its body has arrived (short bodies included), ``bytes_returned`` what reads returned; so
        over a time window ``bytes_requested`` and ``requests`` describe the same requests, while
        ``bytes_fetched`` may include bodies of requests sent before the window began.
        """
        snapshot = self.counters.snapshot()
        if self.cache is not None:
            snapshot.update(cache_hits=self.cache.hits, cache_misses=self.cache.misses,
                            cache_write_errors=self.cache.write_errors)
        return snapshot

    def close(self):
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        self._stream.close()
        self._prefetcher.close()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        self.ranges.close()

    def __reduce__(self):
        # pickles as "open this URL again" through the opener that made it (``open_source``)
        options = dict(self.storage_options or {})
        options["recpipe"] = self.options._asdict()
        return self.reopen, (self.url, options)
