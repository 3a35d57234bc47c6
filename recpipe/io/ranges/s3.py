"""S3 range reads: ``S3HttpRanges`` sends S3's ranged GETs itself; ``s3_ranges`` chooses it or
s3fs's own requests.

``S3HttpRanges`` (the default for ``s3://`` when the client configuration allows it, see
``sources.s3_ranges``; ``storage_options["recpipe"]["s3_ranges"]`` chooses): s3fs still opens
the file (``info``, credentials, endpoint, addressing style, TLS settings), and its own botocore
client signs a presigned GET URL of the object (SigV4 query authentication, signed again every
``URL_REFRESH_S`` seconds and after a 403); each fetching thread then sends ``GET`` + ``Range``
on its own keep-alive ``http.client`` connection and reads the body with ``recv_into`` straight
into one buffer per request. Through s3fs every body goes through aiohttp's event-loop thread
(a protocol callback per socket read, chunk objects, a join at the end): about 0.9 CPU-s of
client CPU per GB against 0.4 here (loopback, tools/bench_s3.py), CPU that the decode threads
lose when they share the cores. Request buffers are reused (``RequestBufferPool``, one per process) and the prefetcher
and the stream hand out slices of them: a record's bytes are copied twice, from the socket into
the request buffer and from there into the payload ``RecordReader`` returns (from a local file:
from the page cache into a block, then the same). Error statuses become the exceptions s3fs
raises for them (503 SlowDown -> ``OSError(EBUSY)``, 404 -> ``FileNotFoundError``, 403 ->
``PermissionError``...), so the retry rules are the same.
"""

import errno
import http.client
import logging
import re
import threading
import time
import urllib.parse

from ...system.fork import after_fork_in_child
from ..buffers import shared_pool
from ..retry import ShortReadError
from .fsspec import FsspecRanges, ObjectChangedError

__all__ = ["S3_RANGES", "S3FsspecRanges", "S3HttpRanges", "StatusError", "s3_http_context",
           "s3_ranges", "status_error"]

log = logging.getLogger(__name__)


_READ_STEP = 1 << 20  # body bytes per readinto call: the deadline is checked between calls
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError,
          ConnectionAbortedError)


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
    from ``buffers``: a ``RequestBufferPool``, by default the process's ``shared_pool()``) or raises.

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
        self._fs_inherited = False  # set in a forked child: fsspec's event loop is the parent's
        self.etag = None  # pinned by ``pin``: every GET carries If-Match
        self.fell_back = False
        self.presigned = 0
        self.connections = 0
        self.resent = 0
        self.buffers_reused = 0
        self.buffers_new = 0
        self._presign()  # fail now (in open_source) rather than in the first read
        after_fork_in_child(self, S3HttpRanges._forget_parent)

    def _forget_parent(self):
        """In a forked child: the connections and fsspec's event loop are the parent's."""
        self._lock = threading.Lock()
        self._local = threading.local()
        self._open = set()
        self._fs_inherited = True

    def pin(self, info):
        """Read only the version of the object that ``info`` (``fs.info`` at open) describes:
        every ranged GET carries ``If-Match: <ETag>``, and a changed object (412, or another
        ETag in a response) raises ``ObjectChangedError`` naming the URL."""
        self.etag = info.get("ETag") or info.get("etag") or None
        if self.fallback is not None and hasattr(self.fallback, "pin"):
            self.fallback.pin(info)

    # -- URL and connections -----------------------------------------------------------------

    def _presign(self):
        from fsspec.asyn import sync

        if self._fs_inherited:
            with self._lock:
                if self._fs_inherited:
                    self.fs = type(self.fs)(**self.fs.storage_options, skip_instance_cache=True)
                    self._fs_inherited = False

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
        headers = {"Range": f"bytes={start}-{end - 1}", "Accept-Encoding": "identity"}
        if self.etag:
            headers["If-Match"] = self.etag
        conn.request("GET", url.target, headers=headers)
        sock = conn.sock  # the response keeps it when the server closes the connection after it
        sock.settimeout(left())
        response = conn.getresponse()
        try:
            return self._body(sock, response, start, end, left)
        except _STALE as exc:
            # the request was answered: not a stale connection (read back with getattr)
            setattr(exc, "after_status", True)
            raise

    def _changed(self, response, start):
        """``ObjectChangedError`` when the response says the object is not the pinned one."""
        etag = response.getheader("ETag")
        if response.status == 412 or (etag and _unquoted(etag) != _unquoted(self.etag)):
            if not response.isclosed():
                response.read(self.ERROR_BODY_LIMIT)
            return ObjectChangedError(
                f"s3://{self.path} changed after it was opened (ETag {self.etag} at open, "
                f"{etag or 'another'} now): reading on would mix two versions of it; open it "
                f"again", url=f"s3://{self.path}", offset=start)
        return None

    def _body(self, sock, response, start, end, left):
        length = end - start
        if self.etag:
            changed = self._changed(response, start)
            if changed is not None:
                self._drop()
                raise changed
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
            raise StatusError(response.status, status_error(response.status, body, self.path))
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


def _unquoted(etag):
    return (etag or "").strip().strip('"')


class StatusError(Exception):
    """An error status (the exception to raise is ``error``)."""

    def __init__(self, status, error):
        super().__init__(status)
        self.status = status
        self.error = error


_CODE = re.compile(rb"<Code>([^<]{1,100})</Code>")
_MESSAGE = re.compile(rb"<Message>([^<]{0,500})</Message>")


def status_error(status, body, path):
    """The exception s3fs raises for this error response (``s3fs.errors``' table)."""
    from s3fs.errors import ERROR_CODE_TO_EXCEPTION

    code_match = _CODE.search(body or b"")
    code = code_match.group(1).decode("ascii", "replace") if code_match else None
    message_match = _MESSAGE.search(body or b"")
    message = message_match.group(1).decode("utf-8", "replace") if message_match else ""
    text = f"{status} {code or ''} {message} ({path})".replace("  ", " ")
    constructor = ERROR_CODE_TO_EXCEPTION.get(code) or ERROR_CODE_TO_EXCEPTION.get(str(status))
    if constructor is not None:
        return constructor(text)
    if status >= 500:
        return OSError(errno.EREMOTEIO, text)
    return OSError(errno.EIO if status in (408, 429) else errno.EINVAL, text)




class S3FsspecRanges(FsspecRanges):
    """Ranged GETs through s3fs's own client (its session, configuration and extra request
    arguments: ``fs._call_s3("get_object", Range=...)``), pinned like ``S3HttpRanges``: after
    ``pin`` every GET carries ``IfMatch=<ETag at open>`` (or the version id on a version-aware
    filesystem), and each response's ETag is compared with it, so a replaced object raises
    ``ObjectChangedError`` naming the URL, also from a server that ignores ``If-Match``.
    ``send_if_match`` (True) may be cleared by tests to play such a server."""

    def __init__(self, fs, path):
        super().__init__(fs, path)
        bucket, key, version = fs.split_path(path)
        self._params = {"Bucket": bucket, "Key": key}
        if version:
            self._params["VersionId"] = version
        self.etag = None
        self.send_if_match = True
        self._fs_inherited = False
        after_fork_in_child(self, S3FsspecRanges._forget_parent)

    def _forget_parent(self):
        self._fs_inherited = True  # fsspec's event loop is the parent's

    def pin(self, info):
        super().pin(info)
        if self._version:
            self._params["VersionId"] = self._version["version_id"]
        self.etag = info.get("ETag") or info.get("etag") or None

    def _changed(self, etag, start):
        return ObjectChangedError(
            f"s3://{self.path} changed after it was opened (ETag {self.etag} at open, "
            f"{etag or 'another'} now): reading on would mix two versions of it; open it again",
            url=f"s3://{self.path}", offset=start)

    async def _get(self, start, end):
        params = dict(self._params, Range=f"bytes={start}-{end - 1}")
        if self.etag and self.send_if_match:
            params["IfMatch"] = self.etag
        try:
            response = await self.fs._call_s3("get_object", **params)
        except OSError as exc:
            if self.etag and _precondition_failed(exc):
                raise self._changed(None, start) from None
            raise
        try:
            etag = response.get("ETag")
            if self.etag and etag and _unquoted(etag) != _unquoted(self.etag):
                raise self._changed(etag, start)
            return await response["Body"].read()
        finally:
            response["Body"].close()

    def fetch(self, start, end, timeout):
        from fsspec.asyn import sync

        if end <= start:
            return b""
        if self._fs_inherited:
            self.fs = type(self.fs)(**self.fs.storage_options, skip_instance_cache=True)
            self._fs_inherited = False
        return sync(self.fs.loop, self._get, start, end, timeout=timeout)


def _precondition_failed(exc):
    """True when s3fs's ``exc`` translates a 412 / PreconditionFailed response."""
    cause = getattr(exc, "__cause__", None)
    response = getattr(cause, "response", None) or {}
    code = (response.get("Error") or {}).get("Code")
    status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    return code in ("PreconditionFailed", "412") or status == 412


S3_RANGES = ("auto", "http", "fsspec")


def s3_ranges(fs, path, choice="auto"):
    """The range reader of an S3 object: ``S3HttpRanges`` unless ``choice`` is "fsspec" or (with
    "auto") the client's configuration is one that only s3fs's own requests honour, then
    ``S3FsspecRanges``; both pinned to the ETag at open."""
    if choice not in S3_RANGES:
        raise ValueError(f"storage_options['recpipe']['s3_ranges']={choice!r}: expected one of "
                         f"{S3_RANGES}")
    if choice == "fsspec" or not hasattr(fs, "_call_s3"):
        return S3FsspecRanges(fs, path) if hasattr(fs, "_call_s3") else FsspecRanges(fs, path)
    try:
        context = s3_http_context(fs)
        fallback = S3FsspecRanges(fs, path) if choice == "auto" else None
        return S3HttpRanges(fs, path, ssl_context=context, fallback=fallback)
    except Exception as exc:
        if choice == "http":
            raise ValueError(f"s3_ranges='http' cannot be used here: {exc}") from exc
        log.debug("s3 range reads through s3fs (%s)", exc)
        return S3FsspecRanges(fs, path)


def s3_http_context(fs):
    """The SSL context of ``fs``'s botocore HTTP session, after checking that nothing in the
    client configuration needs s3fs's own requests (raises ValueError naming what does)."""
    from fsspec.asyn import sync

    if not hasattr(fs, "split_path") or not hasattr(fs, "get_s3"):
        raise ValueError(f"{type(fs).__name__} is not s3fs")
    extra = {**getattr(fs, "req_kw", {}), **getattr(fs, "s3_additional_kwargs", {})}
    if extra:
        raise ValueError(f"extra request arguments {sorted(extra)}")
    client = sync(fs.loop, fs.set_session)
    session = client._endpoint.http_session
    endpoint = client.meta.endpoint_url
    if session._proxy_config.proxy_url_for(endpoint):
        raise ValueError(f"a proxy for {endpoint}")
    if getattr(session, "_cert_file", None):
        raise ValueError("a client certificate")
    if not endpoint.startswith("https:"):
        return None
    return session._build_verify_context()
