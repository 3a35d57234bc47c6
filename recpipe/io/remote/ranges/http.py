"""``HttpRanges``: ranged GETs of one object on keep-alive ``http.client`` connections of
recpipe's own, bodies read with ``recv_into`` straight into one reused buffer per request.

The object stores' clients (s3fs/aiobotocore, gcsfs/aiohttp, adlfs/azure-core) send every body
through an event loop and a chain of chunk objects and wrappers: on loopback, per GB read in
8 MiB ranges, 0.5-1.8 client CPU-s against 0.4 here, and per 128 KiB range several times more
(BENCHMARKS.md, "Remote stores"). The client libraries still open the object (credentials,
endpoint, ``info``); a store's subclass says how to address and authorise a GET
(``_sign``/``_auth_headers``), how a response names the object's version (``_version``) and
which exception an error status is (``_status_error``). A store's own retries are not used: one
request per ``fetch``, under ``RemoteSource``'s retry policy (the same for every store).

Pinning: after ``pin(info)`` every GET asks for the version opened (``_pin_headers``/the URL)
and each response's version is compared with it; a changed object raises
``ObjectChangedError`` naming the URL (never retried).
"""

import errno
import http.client
import logging
import threading
import time
import urllib.parse

from ....system.fork import after_fork_in_child
from ..buffers import shared_pool
from ..retry import ShortReadError
from .fsspec import ObjectChangedError

__all__ = ["HttpRanges", "SignedUrl", "StatusError", "http_status_error", "unquoted_etag"]

log = logging.getLogger(__name__)

_READ_STEP = 1 << 20  # body bytes per readinto call: the deadline is checked between calls
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError,
          ConnectionAbortedError)


class SignedUrl:
    """One URL to GET: where to connect and what to ask; ``made`` is when it was signed."""

    __slots__ = ("scheme", "host", "port", "target", "made")

    def __init__(self, url):
        parts = urllib.parse.urlsplit(url)
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port
        self.target = parts.path + ("?" + parts.query if parts.query else "")
        self.made = time.monotonic()
        if self.scheme not in ("http", "https"):
            raise ValueError(f"cannot send range requests to {self.scheme}:// endpoints")


class StatusError(Exception):
    """An error status (the exception to raise is ``error``)."""

    def __init__(self, status, error):
        super().__init__(status)
        self.status = status
        self.error = error


def http_status_error(status, text):
    """The exception for an error status of a store without its own table: 404 missing, 401/403
    denied, 429 and 5xx transient, others permanent."""
    if status == 404:
        return FileNotFoundError(errno.ENOENT, text)
    if status in (401, 403):
        return PermissionError(errno.EACCES, text)
    if status == 429 or status == 408:
        return OSError(errno.EBUSY, text)
    if status >= 500:
        return OSError(errno.EREMOTEIO, text)
    return OSError(errno.EINVAL, text)


class HttpRanges:
    """Ranged GETs of one object; see the module docstring.

    ``fetch`` returns a memoryview of exactly ``end - start`` bytes (of a buffer from
    ``buffers``: a ``RequestBufferPool``, by default the process's ``shared_pool()``) or raises.
    ``fallback`` (a range reader through the store's own client): used from then on when the
    server refuses our requests (``REFUSED``) before any of them succeeded. Counters:
    ``presigned`` (URLs signed), ``connections`` (opened), ``resent`` (requests sent again on a
    new connection after a kept-alive one turned out closed), ``buffers_reused``/``buffers_new``.
    """

    URL_REFRESH_S = 300.0  # sign again this often
    ERROR_BODY_LIMIT = 64 << 10
    REFUSED = (400, 401, 403, 405, 501)
    SCHEME = "http"  # for messages: the URL of the object is f"{SCHEME}://{path}"
    VERSION_NAME = "ETag"

    def __init__(self, fs, path, *, ssl_context=None, buffers=None, fallback=None):
        self.fs = fs
        self.path = path
        self.buffers = buffers if buffers is not None else shared_pool()
        self.fallback = fallback
        self._ssl_context = ssl_context
        self._lock = threading.Lock()
        self._url = None
        self._local = threading.local()
        self._open = set()
        self._proven = False  # a request of ours succeeded
        self._fs_inherited = False  # set in a forked child: fsspec's event loop is the parent's
        self.version = None  # pinned by ``pin``
        self.scheme = self.SCHEME  # the URL's (open_ranges sets it: "abfs" for abfs:// URLs)
        self.fell_back = False
        self.presigned = 0
        self.connections = 0
        self.resent = 0
        self.buffers_reused = 0
        self.buffers_new = 0
        after_fork_in_child(self, HttpRanges._forget_parent)

    @property
    def url(self):
        return f"{self.scheme}://{self.path}"

    def _forget_parent(self):
        """In a forked child: the connections and fsspec's event loop are the parent's."""
        self._lock = threading.Lock()
        self._local = threading.local()
        self._open = set()
        self._fs_inherited = True

    def _own_fs(self):
        """The filesystem, made again in a forked child."""
        if self._fs_inherited:
            with self._lock:
                if self._fs_inherited:
                    self.fs = type(self.fs)(**self.fs.storage_options, skip_instance_cache=True)
                    self._fs_inherited = False
        return self.fs

    # -- what a store says ---------------------------------------------------------------------

    def _sign(self):
        """A new ``SignedUrl`` of the object (called at most every ``URL_REFRESH_S``)."""
        raise NotImplementedError

    def _auth_headers(self):
        """Headers authorising a GET (besides what the URL carries)."""
        return {}

    def _pin_headers(self):
        """Headers asking for the pinned version only (``If-Match``)."""
        return {"If-Match": self.version} if self.version else {}

    def _version(self, response):
        """The object version a response names (None: not said)."""
        return response.getheader("ETag")

    def _same_version(self, seen):
        return unquoted_etag(seen) == unquoted_etag(self.version)

    def _status_error(self, status, body):
        return http_status_error(status, f"{status} {body[:300]!r} ({self.url})")

    def pin(self, info):
        """Read only the version of the object that ``info`` (``fs.info`` at open) describes."""
        self.version = self._version_of_info(info)
        if self.fallback is not None and hasattr(self.fallback, "pin"):
            self.fallback.pin(info)

    def _version_of_info(self, info):
        return info.get("ETag") or info.get("etag") or None

    # -- URL and connections -----------------------------------------------------------------

    def _presign(self):
        url = self._sign()
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
        if held is not None and held[1] == (url.scheme, url.host, url.port):
            return held[0], True
        self._drop()
        conn: http.client.HTTPConnection
        if url.scheme == "https":
            conn = http.client.HTTPSConnection(url.host, url.port, timeout=timeout,
                                               context=self._ssl_context)
        else:
            conn = http.client.HTTPConnection(url.host, url.port, timeout=timeout)
        self._local.held = (conn, (url.scheme, url.host, url.port))
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
            except StatusError as exc:
                if exc.status in (401, 403) and not refreshed and \
                        time.monotonic() - url.made > 1.0:
                    refreshed = True  # the URL (or the credentials it was signed with) expired
                    self._presign()
                    continue
                if exc.status in self.REFUSED and self.fallback is not None and not self._proven:
                    log.warning("%s refused a range request of recpipe's (%s); reading %s "
                                "through the store's client from now on", url.host, exc.error,
                                self.url)
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
                raise TimeoutError(f"range request [{start}, {end}) of {self.url} timed out")
            return remaining

        if conn.sock is not None:
            conn.sock.settimeout(left())
        else:
            conn.timeout = left()
        headers = {"Range": f"bytes={start}-{end - 1}", "Accept-Encoding": "identity",
                   **self._auth_headers(), **self._pin_headers()}
        conn.request("GET", url.target, headers=headers)
        sock = conn.sock  # the response keeps it when the server closes the connection after it
        sock.settimeout(left())
        response = conn.getresponse()
        try:
            return self._body(sock, response, start, end, left)
        except _STALE as exc:
            # the request was answered: not a stale connection (read back with getattr)
            setattr(exc, "after_status", True)  # noqa: B010 - exceptions declare no such field
            raise

    def _changed(self, response, start):
        """``ObjectChangedError`` when the response says the object is not the pinned one."""
        seen = self._version(response)
        if response.status == 412 or (seen and not self._same_version(seen)):
            if not response.isclosed():
                response.read(self.ERROR_BODY_LIMIT)
            return ObjectChangedError(
                f"{self.url} changed after it was opened ({self.VERSION_NAME} {self.version} at "
                f"open, {seen or 'another'} now): reading on would mix two versions of it; open "
                f"it again", url=self.url, offset=start)
        return None

    def _body(self, sock, response, start, end, left):
        length = end - start
        if self.version:
            changed = self._changed(response, start)
            if changed is not None:
                self._drop()
                raise changed
        if response.status == 206:
            expected = f"bytes {start}-{end - 1}/"
            if not (response.getheader("Content-Range") or "").startswith(expected):
                raise ShortReadError(f"asked for bytes {start}-{end - 1} of {self.url}, got "
                                     f"Content-Range {response.getheader('Content-Range')!r}")
        elif response.status == 200 and start == 0 and response.length == length:
            pass  # the whole object, sent without Content-Range
        elif response.status == 200:
            raise OSError(errno.EPROTO, f"the server ignored the Range header of {self.url} "
                                        "(200 instead of 206)")
        else:
            body = response.read(self.ERROR_BODY_LIMIT)
            if not response.isclosed():
                self._drop()
            raise StatusError(response.status, self._status_error(response.status, body))
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


def unquoted_etag(etag):
    """An ETag without its quotes (stores quote them, or not, inconsistently), "" for None."""
    return (etag or "").strip().strip('"')
