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
client CPU per GB against 0.4 here (loopback, benchmarks/suites/stores.py), CPU that the decode
threads lose when they share the cores. Request buffers are reused (``RequestBufferPool``, one per
process) and the prefetcher and the stream hand out slices of them: a record's bytes are copied
twice, from the socket into the request buffer and from there into the payload ``RecordReader``
returns (from a local file: from the page cache into a block, then the same). Error statuses
become the exceptions s3fs raises for them (503 SlowDown -> ``OSError(EBUSY)``, 404 ->
``FileNotFoundError``, 403 -> ``PermissionError``...), so the retry rules are the same.
"""

import errno
import logging
import re
import urllib.parse

from ....system.fork import after_fork_in_child
from .fsspec import FsspecRanges, ObjectChangedError
from .http import HttpRanges, SignedUrl, StatusError, unquoted_etag

__all__ = ["S3_RANGES", "S3FsspecRanges", "S3HttpRanges", "StatusError", "s3_http_context",
           "s3_ranges", "status_error"]

log = logging.getLogger(__name__)


class S3HttpRanges(HttpRanges):
    """Ranged GETs of one S3 object on connections of its own (``HttpRanges``), by presigned
    URL; see the module docstring.

    ``fs`` is the ``s3fs.S3FileSystem`` that opened ``path``: its client presigns the URL
    (``Params`` holds ``VersionId`` for versioned paths) and its HTTP session's TLS settings make
    the SSL context. ``fallback`` (e.g. ``S3FsspecRanges``): used from then on when the server
    refuses the presigned URL (400, 401, 403, 405, 501) before any request of ours succeeded; a
    server that takes s3fs's signed headers but not query authentication still works.
    """

    URL_EXPIRES_S = 3600
    SCHEME = "s3"

    def __init__(self, fs, path, *, ssl_context=None, buffers=None, fallback=None):
        super().__init__(fs, path, ssl_context=ssl_context, buffers=buffers, fallback=fallback)
        bucket, key, version = fs.split_path(path)
        self._params = {"Bucket": bucket, "Key": key}
        if version:
            self._params["VersionId"] = version
        self._presign()  # fail now (in open_source) rather than in the first read

    @property
    def etag(self):
        """The ETag pinned by ``pin``: every ranged GET carries ``If-Match``, and a changed
        object (412, or another ETag in a response) raises ``ObjectChangedError``."""
        return self.version

    def _sign(self):
        from fsspec.asyn import sync

        fs = self._own_fs()

        async def sign():
            await fs.set_session()
            client = await fs.get_s3(self._params["Bucket"])
            url = await client.generate_presigned_url("get_object", Params=self._params,
                                                      ExpiresIn=self.URL_EXPIRES_S)
            return await _as_sigv4(client, url, self.URL_EXPIRES_S)

        return SignedUrl(sync(fs.loop, sign))

    def _status_error(self, status, body):
        return status_error(status, body, self.path)


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
    except Exception as exc:  # noqa: BLE001 - botocore internals changed: SigV2 it is
        log.debug("cannot sign %s for SigV4, keeping SigV2: %r", parts.path, exc)
        return url


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
            if self.etag and etag and unquoted_etag(etag) != unquoted_etag(self.etag):
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
