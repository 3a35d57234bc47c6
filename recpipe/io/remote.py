"""``RemoteSource``: a byte source over range requests, with retries, prefetching and a block cache.

A range reader (``fetch(start, end, timeout) -> bytes-like``) does the I/O: ``FsspecRanges`` wraps
``fs.cat_file`` (one ranged GET on S3, never an fsspec file object, whose read-ahead cache would
fetch far more than a record), ``S3HttpRanges`` sends S3's ranged GETs itself (below),
``ThreadLocalRanges`` gives each thread its own filesystem instance (for ``requests``-based
clients such as webhdfs), and ``recpipe.io.hdfs`` adds the native HDFS clients.

``S3HttpRanges`` (the default for ``s3://`` when the client configuration allows it, see
``sources.s3_ranges``; ``storage_options["recpipe"]["s3_ranges"]`` chooses): s3fs still opens
the file (``info``, credentials, endpoint, addressing style, TLS settings), and its own botocore
client signs a presigned GET URL of the object (SigV4 query authentication, signed again every
``URL_REFRESH_S`` seconds and after a 403); each fetching thread then sends ``GET`` + ``Range``
on its own keep-alive ``http.client`` connection and reads the body with ``recv_into`` straight
into one buffer per request. Through s3fs every body goes through aiohttp's event-loop thread
(a protocol callback per socket read, chunk objects, a join at the end): about 0.9 CPU-s of
client CPU per GB against 0.4 here (loopback, tools/bench_s3.py), CPU that the decode threads
lose when they share the cores. Request buffers are reused (``BufferPool``, one per process) and the prefetcher
and the stream hand out slices of them: a record's bytes are copied twice, from the socket into
the request buffer and from there into the payload ``RecordReader`` returns (from a local file:
from the page cache into a block, then the same). Error statuses become the exceptions s3fs
raises for them (503 SlowDown -> ``OSError(EBUSY)``, 404 -> ``FileNotFoundError``, 403 ->
``PermissionError``...), so the retry rules are the same.

``RemoteSource`` adds on top:

- retries with backoff and a deadline per read, and a length check of every response;
- sequential streaming (``ReadAhead``) when reads move forward through the file;
- indexed access (``prefetch(spans, groups)``): announced records fetched by coalesced,
  concurrent range requests (at most ``max_inflight`` in flight);
- an optional local block cache, so that later epochs are served from disk;
- counters (``stats()``): requests, bytes requested and fetched, most requests in flight, retries.
"""

import errno
import http.client
import logging
import os
import re
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

from fsspec.asyn import AsyncFileSystem

from .cache import BlockCache
from .prefetch import Prefetcher
from .readahead import ReadAhead
from .retry import ShortReadError, call_with_retry
from .sources import Source

__all__ = ["RemoteSource", "FsspecRanges", "S3HttpRanges", "ThreadLocalRanges", "ReadStats",
           "BufferPool", "shared_pool"]

log = logging.getLogger(__name__)
_STREAM_MIN_READ = 1 << 20  # forward reads at least this big switch to streaming


class FsspecRanges:
    """Range reads through ``fs.cat_file`` (keywords: s3fs's third positional is version_id)."""

    def __init__(self, fs, path):
        self.fs = fs
        self.path = path
        self._timeout_kw = isinstance(fs, AsyncFileSystem)

    def fetch(self, start, end, timeout):
        if self._timeout_kw:  # fsspec's sync() cancels the request after ``timeout`` seconds
            return self.fs.cat_file(self.path, start=start, end=end, timeout=timeout)
        return self.fs.cat_file(self.path, start=start, end=end)

    def close(self):
        pass


_READ_STEP = 1 << 20  # body bytes per readinto call: the deadline is checked between calls
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError,
          ConnectionAbortedError)


class BufferPool:
    """Request buffers kept for reuse: a body read into a buffer that was used before lands in
    pages already mapped, where a new ``bytearray`` of several MiB costs a fresh mapping, page
    faults and zero-filling on every request (glibc hands such sizes back to the kernel when freed).

    ``get(n)`` returns ``(view, reused)``: a writable memoryview of ``n`` bytes and whether its
    buffer was used before. A buffer is free again once nothing refers to it: every holder of a
    slice holds a memoryview, which holds the buffer, so this is read from the buffer's reference
    count. At most ``keep_bytes`` are kept (past that, buffers are plain new ones), and buffers
    left unused for ``idle_s`` seconds are dropped at the next ``get``.
    """

    STEP = 1 << 20

    def __init__(self, keep_bytes, idle_s=60.0):
        self.keep_bytes = keep_bytes
        self.idle_s = idle_s
        self._buffers = []
        self._used = []  # time.monotonic() of each buffer's last get
        self._lock = threading.Lock()
        self.reused = 0
        self.allocated = 0
        probe = [bytearray(1)]
        self._idle_refs = self._refs(probe, 0)

    @staticmethod
    def _refs(buffers, i):
        return sys.getrefcount(buffers[i])

    def _idle(self, i):
        return self._refs(self._buffers, i) == self._idle_refs

    def _forget(self, i):
        self._used.pop(i)
        return len(self._buffers.pop(i))

    def get(self, n):
        now = time.monotonic()
        with self._lock:
            for i in reversed(range(len(self._buffers))):
                if now - self._used[i] > self.idle_s and self._idle(i):
                    self._forget(i)
            best = None
            for i in range(len(self._buffers)):
                size = len(self._buffers[i])
                if size >= n and (best is None or size < len(self._buffers[best])) and self._idle(i):
                    best = i
            if best is not None:
                self.reused += 1
                self._used[best] = now
                return memoryview(self._buffers[best])[:n], True
            self.allocated += 1
            size = -(-n // self.STEP) * self.STEP
            held = sum(len(b) for b in self._buffers)
            for i in reversed(range(len(self._buffers))):  # make room: forget idle buffers
                if held + size <= self.keep_bytes:
                    break
                if self._idle(i):
                    held -= self._forget(i)
            if held + size > self.keep_bytes:
                return memoryview(bytearray(n)), False
            buffer = bytearray(size)
            self._buffers.append(buffer)
            self._used.append(now)
            return memoryview(buffer)[:n], False

    def held_bytes(self):
        with self._lock:
            return sum(len(b) for b in self._buffers)

    def clear(self):
        with self._lock:
            self._buffers = []
            self._used = []


_SHARED_POOL = None
_SHARED_POOL_LOCK = threading.Lock()
SHARED_POOL_BYTES = 256 << 20


def shared_pool():
    """The process's ``BufferPool`` for S3 request bodies (all sources share it, so that idle
    buffers stay under ``SHARED_POOL_BYTES`` however many files are open)."""
    global _SHARED_POOL
    with _SHARED_POOL_LOCK:
        if _SHARED_POOL is None or _SHARED_POOL[0] != os.getpid():
            _SHARED_POOL = (os.getpid(), BufferPool(SHARED_POOL_BYTES))
        return _SHARED_POOL[1]


class _Presigned:
    """One presigned GET URL: where to connect and what to ask."""

    __slots__ = ("scheme", "host", "port", "target", "made")

    def __init__(self, url):
        parts = urllib.parse.urlsplit(url)
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port
        self.target = parts.path + ("?" + parts.query if parts.query else "")
        self.made = time.monotonic()


class S3HttpRanges:
    """Ranged GETs of one S3 object on connections of its own; see the module docstring.

    ``fs`` is the ``s3fs.S3FileSystem`` that opened ``path``: its client presigns the URL
    (``Params`` holds ``VersionId`` for versioned paths) and its HTTP session's TLS settings make
    the SSL context. ``fetch`` returns a memoryview of exactly ``end - start`` bytes (of a buffer
    from ``buffers``: a ``BufferPool``, by default the process's ``shared_pool()``) or raises.

    ``fallback`` (a range reader, e.g. ``FsspecRanges``): used from then on when the server
    refuses the presigned URL (400, 401, 403, 405, 501) before any request of ours succeeded;
    a server that takes s3fs's signed headers but not query authentication still works.
    Counters for tests and diagnostics: ``presigned`` (URLs signed), ``connections`` (opened),
    ``resent`` (requests sent again on a new connection after a kept-alive one turned out closed),
    ``buffers_reused`` and ``buffers_new`` (bodies read into a reused or a new buffer).
    """

    URL_REFRESH_S = 300.0  # re-sign this often (the URL itself is valid for URL_EXPIRES_S)
    URL_EXPIRES_S = 3600
    ERROR_BODY_LIMIT = 64 << 10
    REFUSED = (400, 401, 403, 405, 501)

    def __init__(self, fs, path, *, ssl_context=None, buffers=None, fallback=None):
        self.fs = fs
        self.path = path
        self.buffers = buffers if buffers is not None else shared_pool()
        self.fallback = fallback
        bucket, key, version = fs.split_path(path)
        self._params = {"Bucket": bucket, "Key": key}
        if version:
            self._params["VersionId"] = version
        self._ssl_context = ssl_context
        self._lock = threading.Lock()
        self._url = None
        self._local = threading.local()
        self._open = set()
        self._proven = False  # a request of ours succeeded
        self._pid = os.getpid()
        self.fell_back = False
        self.presigned = 0
        self.connections = 0
        self.resent = 0
        self.buffers_reused = 0
        self.buffers_new = 0
        self._presign()  # fail now (in open_source) rather than in the first read

    # -- URL and connections -----------------------------------------------------------------

    def _presign(self):
        from fsspec.asyn import sync

        if self._pid != os.getpid():  # a forked child: fsspec's event loop is the parent's
            with self._lock:
                if self._pid != os.getpid():
                    self.fs = type(self.fs)(**self.fs.storage_options, skip_instance_cache=True)
                    self._pid = os.getpid()

        async def sign():
            await self.fs.set_session()
            client = await self.fs.get_s3(self._params["Bucket"])
            url = await client.generate_presigned_url("get_object", Params=self._params,
                                                      ExpiresIn=self.URL_EXPIRES_S)
            return await _as_sigv4(client, url, self.URL_EXPIRES_S)

        url = _Presigned(sync(self.fs.loop, sign))
        if url.scheme not in ("http", "https"):
            raise ValueError(f"cannot send range requests to {url.scheme}:// endpoints")
        with self._lock:
            self._url = url
            self.presigned += 1
        return url

    def _current_url(self):
        url = self._url
        if url is None or time.monotonic() - url.made > self.URL_REFRESH_S:
            url = self._presign()
        return url

    def _connection(self, url, timeout):
        """This thread's connection to ``url``'s host and whether it served a request before."""
        held = getattr(self._local, "held", None)
        if held is not None and held[2] != os.getpid():
            held = self._local.held = None  # inherited through fork: the parent's socket
        if held is not None and held[1] == (url.scheme, url.host, url.port):
            return held[0], True
        self._drop()
        if url.scheme == "https":
            conn = http.client.HTTPSConnection(url.host, url.port, timeout=timeout,
                                               context=self._ssl_context)
        else:
            conn = http.client.HTTPConnection(url.host, url.port, timeout=timeout)
        self._local.held = (conn, (url.scheme, url.host, url.port), os.getpid())
        with self._lock:
            self._open.add(conn)
            self.connections += 1
        return conn, False

    def _drop(self):
        """Close this thread's connection (after an error, or when its state is unknown)."""
        held = getattr(self._local, "held", None)
        self._local.held = None
        if held is not None:
            held[0].close()
            with self._lock:
                self._open.discard(held[0])

    # -- requests ----------------------------------------------------------------------------

    def fetch(self, start, end, timeout):
        if end <= start:
            return memoryview(bytearray())
        deadline = time.monotonic() + timeout
        if self.fell_back:
            return self.fallback.fetch(start, end, timeout)
        resent = refreshed = False
        while True:
            url = self._current_url()
            conn, reused = self._connection(url, max(0.001, deadline - time.monotonic()))
            try:
                data = self._get(conn, url, start, end, deadline)
                self._proven = True
                return data
            except _StatusError as exc:
                if exc.status == 403 and not refreshed and time.monotonic() - url.made > 1.0:
                    refreshed = True  # the URL (or the credentials it was signed with) expired
                    self._presign()
                    continue
                if exc.status in self.REFUSED and self.fallback is not None and not self._proven:
                    log.warning("%s refused a presigned range request (%s); reading %s through "
                                "s3fs from now on", url.host, exc.error, self.path)
                    self.fell_back = True
                    return self.fallback.fetch(start, end, max(0.001, deadline - time.monotonic()))
                raise exc.error from None
            except _STALE as exc:
                self._drop()
                if reused and not resent and not getattr(exc, "after_status", False):
                    resent = True  # a kept-alive connection the server had closed: send again
                    with self._lock:
                        self.resent += 1
                    continue
                raise
            except BaseException:
                self._drop()
                raise

    def _get(self, conn, url, start, end, deadline):
        def left():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"range request [{start}, {end}) of {self.path} timed out")
            return remaining

        if conn.sock is not None:
            conn.sock.settimeout(left())
        else:
            conn.timeout = left()
        conn.request("GET", url.target, headers={"Range": f"bytes={start}-{end - 1}",
                                                 "Accept-Encoding": "identity"})
        sock = conn.sock  # the response keeps it when the server closes the connection after it
        sock.settimeout(left())
        response = conn.getresponse()
        try:
            return self._body(sock, response, start, end, left)
        except _STALE as exc:
            exc.after_status = True  # the request was answered: not a stale connection
            raise

    def _body(self, sock, response, start, end, left):
        length = end - start
        if response.status == 206:
            expected = f"bytes {start}-{end - 1}/"
            if not (response.getheader("Content-Range") or "").startswith(expected):
                raise ShortReadError(f"asked for bytes {start}-{end - 1} of {self.path}, got "
                                     f"Content-Range {response.getheader('Content-Range')!r}")
        elif response.status == 200 and start == 0 and response.length == length:
            pass  # the whole object, sent without Content-Range
        elif response.status == 200:
            raise OSError(errno.EPROTO, f"the server ignored the Range header of {self.path} "
                                        "(200 instead of 206)")
        else:
            body = response.read(self.ERROR_BODY_LIMIT)
            if not response.isclosed():
                self._drop()
            raise _StatusError(response.status, _status_error(response.status, body, self.path))
        view, reused = self.buffers.get(length)
        with self._lock:
            if reused:
                self.buffers_reused += 1
            else:
                self.buffers_new += 1
        got = 0
        while got < length:
            sock.settimeout(left())
            n = response.readinto(view[got:got + _READ_STEP])
            if not n:
                break
            got += n
        if got < length:
            raise ShortReadError(f"asked for {length} bytes at {start}, got {got}")
        if not response.isclosed():
            self._drop()  # more body than asked for: the connection's state is unknown
        return view

    def close(self):
        with self._lock:
            connections, self._open = self._open, set()
        for conn in connections:
            conn.close()
        if self.fallback is not None:
            self.fallback.close()


_SIGV2_PARAMS = ("AWSAccessKeyId", "Signature", "Expires", "x-amz-security-token")


async def _as_sigv4(client, url, expires):
    """``url`` signed with SigV4 query authentication.

    botocore presigns S3 URLs with SigV2 when the client's region is one that still accepts it
    and no signature version was configured (for backward compatibility); S3-compatible servers
    may not accept SigV2 at all. Such a URL is signed again here, by the client's own signer and
    credentials, for SigV4 (``s3v4-query``); SigV4 or unsigned (anonymous) URLs are kept.
    """
    from botocore.awsrequest import AWSRequest

    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    if not {"AWSAccessKeyId", "Signature"} <= {name for name, _ in query}:
        return url
    kept = urllib.parse.urlencode([(k, v) for k, v in query if k not in _SIGV2_PARAMS])
    try:
        auth = await client._request_signer.get_auth_instance(
            signing_name="s3", region_name=client.meta.region_name or "us-east-1",
            signature_version="s3v4-query", expires=expires)
        request = AWSRequest(method="GET", url=urllib.parse.urlunsplit(parts._replace(query=kept)))
        auth.add_auth(request)
        return request.url
    except Exception as exc:  # botocore internals changed: SigV2 it is
        log.debug("cannot sign %s for SigV4, keeping SigV2: %r", parts.path, exc)
        return url


class _StatusError(Exception):
    """An error status (the exception to raise is ``error``)."""

    def __init__(self, status, error):
        super().__init__(status)
        self.status = status
        self.error = error


_CODE = re.compile(rb"<Code>([^<]{1,100})</Code>")
_MESSAGE = re.compile(rb"<Message>([^<]{0,500})</Message>")


def _status_error(status, body, path):
    """The exception s3fs raises for this error response (``s3fs.errors``' table)."""
    from s3fs.errors import ERROR_CODE_TO_EXCEPTION

    code = _CODE.search(body or b"")
    code = code.group(1).decode("ascii", "replace") if code else None
    message = _MESSAGE.search(body or b"")
    message = message.group(1).decode("utf-8", "replace") if message else ""
    text = f"{status} {code or ''} {message} ({path})".replace("  ", " ")
    constructor = ERROR_CODE_TO_EXCEPTION.get(code) or ERROR_CODE_TO_EXCEPTION.get(str(status))
    if constructor is not None:
        return constructor(text)
    if status >= 500:
        return OSError(errno.EREMOTEIO, text)
    return OSError(errno.EIO if status in (408, 429) else errno.EINVAL, text)


class ThreadLocalRanges(FsspecRanges):
    """One filesystem instance per thread, for clients whose sessions are not thread-safe."""

    def __init__(self, fs, path):
        super().__init__(fs, path)
        self._local = threading.local()

    def _fs(self):
        fs = getattr(self._local, "fs", None)
        if fs is None:
            fs = type(self.fs)(**self.fs.storage_options, skip_instance_cache=True)
            self._local.fs = fs
        return fs

    def fetch(self, start, end, timeout):
        return self._fs().cat_file(self.path, start=start, end=end)


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


class RemoteSource(Source):
    """Positional reads of a remote file of ``size`` bytes through ``ranges``."""

    remote = True

    def __init__(self, ranges, url, size, options, *, identity=None, storage_options=None):
        self.ranges = ranges
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
        self._pool = None
        self._pid = None
        self._closed = False
        self._last = None  # (offset, end) of the previous direct read
        timeout = options.deadline + options.request_timeout
        self._stream = ReadAhead(self._submit, size, chunk=options.chunk_bytes,
                                 depth=options.readahead_chunks, timeout=timeout)
        self._prefetcher = Prefetcher(self._submit, budget=options.budget_bytes,
                                      max_gap=options.max_gap, max_block=options.max_block,
                                      plan_window=options.plan_window, timeout=timeout)

    # -- requests -------------------------------------------------------------------------

    def _executor(self):
        with self._lock:
            if self._closed:
                raise ValueError(f"read from a closed source: {self.url}")
            if self._pool is None or self._pid != os.getpid():
                self._pool = ThreadPoolExecutor(self.options.max_inflight,
                                                thread_name_prefix="recpipe-fetch")
                self._pid = os.getpid()
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
        """Announce reads of ``(offset, length)`` spans in this order; return a PrefetchPlan.

        ``groups`` (one key per span) coalesces each group's spans on its own (block-shuffle runs);
        without it spans are coalesced per window of ``plan_window`` consecutive spans.
        """
        self._executor()  # raises on a closed source
        return self._prefetcher.plan(spans, groups)

    def stats(self):
        """Counters: requests, bytes_requested, bytes_fetched, bytes_returned, retries, max_inflight
        (+ cache hits and misses).

        ``requests`` and ``bytes_requested`` count when a request is sent, ``bytes_fetched`` when
        its body has arrived (short bodies included), ``bytes_returned`` what reads returned; so
        over a time window ``bytes_requested`` and ``requests`` describe the same requests, while
        ``bytes_fetched`` may include bodies of requests sent before the window began.
        """
        snapshot = self.counters.snapshot()
        if self.cache is not None:
            snapshot.update(cache_hits=self.cache.hits, cache_misses=self.cache.misses)
        return snapshot

    def close(self):
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        self._stream.close()
        self._prefetcher.close()
        if pool is not None and self._pid == os.getpid():
            pool.shutdown(wait=True, cancel_futures=True)
        self.ranges.close()

    def __reduce__(self):
        from .sources import open_source

        options = dict(self.storage_options or {})
        options["recpipe"] = self.options._asdict()
        return open_source, (self.url, options)
