"""Azure Blob Storage range reads: ``AzureHttpRanges`` (recpipe's own GETs, the default) or
``AzureFsspecRanges`` (through the azure-storage-blob client adlfs holds).

adlfs opens the blob (account, credentials, endpoint, ``info``); its service client gives the
blob's URL and credential. ``AzureHttpRanges`` authorises its GETs with, by the credential: the
account key -> a read-only service SAS of the blob made here (``generate_blob_sas``, valid
``SAS_VALID_S``, made again every ``URL_REFRESH_S``); a SAS token -> that token, in the URL; an
Azure AD token credential -> ``Authorization: Bearer`` (a token from the credential, renewed
before it expires); none (a public container) -> nothing. Both readers are pinned to the ETag at
open: every GET carries ``If-Match`` (the service answers 412 once the blob was replaced) and
each response's ETag is compared with it, so a replaced blob raises ``ObjectChangedError``
naming the URL. Each ``fetch`` is one request: the SDK's own retries are off
(``retry_total=0``), so that the retry policy is ``RemoteSource``'s, the same for every store.
"""

import asyncio
import datetime
import re
import threading
import time

from .fsspec import FsspecRanges, ObjectChangedError
from .http import HttpRanges, SignedUrl, http_status_error

__all__ = ["AzureFsspecRanges", "AzureHttpRanges", "azure_ranges"]

_CODE = re.compile(rb"<Code>([^<]{1,100})</Code>")
_MESSAGE = re.compile(rb"<Message>([^<]{0,300})")
_TOKEN_SCOPE = "https://storage.azure.com/.default"


def _etag(info):
    return info.get("etag") or info.get("ETag") or None


def _changed(url, pinned, seen, start):
    return ObjectChangedError(
        f"{url} changed after it was opened (ETag {pinned} at open, {seen or 'another'} now): "
        f"reading on would mix two versions of it; open it again", url=url, offset=start)


async def _awaited(coroutine):
    return await coroutine


class AzureHttpRanges(HttpRanges):
    """Ranged GETs of one blob on connections of its own (``HttpRanges``)."""

    SCHEME = "az"
    SAS_VALID_S = 4 * 3600
    URL_REFRESH_S = 1800.0

    def __init__(self, fs, path, *, ssl_context=None, buffers=None, fallback=None):
        super().__init__(fs, path, ssl_context=ssl_context, buffers=buffers, fallback=fallback)
        self._container, self._blob, self._version_id = fs.split_path(path)
        self._token = None  # (bearer token, expires_on) for token credentials
        self._token_lock = threading.Lock()
        self._api_version = getattr(fs.service_client, "api_version", None) or "2021-08-06"
        self._presign()  # fail now (in open_source) rather than in the first read

    def _credential(self):
        return self._own_fs().service_client.credential

    def _sign(self):
        client = self._own_fs().service_client.get_blob_client(self._container, self._blob)
        url = client.url
        if self._version_id:
            url += ("&" if "?" in url else "?") + f"versionid={self._version_id}"
        credential = client.credential
        key = getattr(credential, "account_key", None)
        if key:
            url += ("&" if "?" in url else "?") + self._sas(client, key)
        elif credential is not None and not hasattr(credential, "get_token"):
            raise ValueError(f"an Azure credential of type {type(credential).__name__}")
        return SignedUrl(url)

    def _sas(self, client, key):
        from azure.storage.blob import BlobSasPermissions, generate_blob_sas

        now = datetime.datetime.now(datetime.timezone.utc)
        return generate_blob_sas(client.account_name, self._container, self._blob,
                                 account_key=key, permission=BlobSasPermissions(read=True),
                                 start=now - datetime.timedelta(minutes=5),
                                 expiry=now + datetime.timedelta(seconds=self.SAS_VALID_S),
                                 version_id=self._version_id)

    def _auth_headers(self):
        headers = {"x-ms-version": self._api_version}
        credential = self._credential()
        if credential is not None and hasattr(credential, "get_token"):
            headers["Authorization"] = f"Bearer {self._bearer(credential)}"
        return headers

    def _bearer(self, credential):
        with self._token_lock:
            token = self._token
            if token is None or token[1] - time.time() < 300:
                from fsspec.asyn import sync

                got = credential.get_token(_TOKEN_SCOPE)
                if asyncio.iscoroutine(got):  # an async credential (azure.identity.aio)
                    got = sync(self.fs.loop, _awaited, got)
                token = self._token = (got.token, got.expires_on)
            return token[0]

    def _status_error(self, status, body):
        code = _CODE.search(body or b"")
        message = _MESSAGE.search(body or b"")
        text = (f"{status} {code.group(1).decode('ascii', 'replace') if code else ''} "
                f"{message.group(1).decode('utf-8', 'replace').strip() if message else ''} "
                f"({self.url})")
        return http_status_error(status, " ".join(text.split()))


class AzureFsspecRanges(FsspecRanges):
    """Ranged downloads through the azure-storage-blob client that adlfs holds, one request
    each (``retry_total=0``), pinned like ``AzureHttpRanges`` (``etag`` + ``IfNotModified``)."""

    def __init__(self, fs, path):
        super().__init__(fs, path)
        self.etag = None
        self._container, self._blob, self._version_id = fs.split_path(path)
        self.url = f"az://{path}"  # (open_ranges names the URL's own scheme)

    def pin(self, info):
        self.etag = _etag(info)

    async def _get(self, start, end):
        from azure.core import MatchConditions
        from azure.core.exceptions import ResourceModifiedError, ResourceNotFoundError

        pinned = {"etag": self.etag, "match_condition": MatchConditions.IfNotModified} \
            if self.etag else {}
        async with self.fs.service_client.get_blob_client(self._container, self._blob) as blob:
            try:
                stream = await blob.download_blob(offset=start, length=end - start,
                                                  version_id=self._version_id, retry_total=0,
                                                  max_concurrency=1, **pinned)
            except ResourceModifiedError:
                raise _changed(self.url, self.etag, None, start) from None
            except ResourceNotFoundError as exc:
                raise FileNotFoundError(f"no such blob: {self.url} ({exc})") from None
            seen = stream.properties.etag
            if self.etag and seen and seen.strip('"') != self.etag.strip('"'):
                raise _changed(self.url, self.etag, seen, start)
            return await stream.readall()

    def fetch(self, start, end, timeout):
        from fsspec.asyn import sync

        if end <= start:
            return b""
        return sync(self.fs.loop, self._get, start, end, timeout=timeout)


AZURE_RANGES = ("auto", "http", "fsspec")


def azure_ranges(fs, path, choice="auto"):
    """The range reader of a blob: ``AzureHttpRanges`` (with ``AzureFsspecRanges`` as its
    fallback for "auto"), or ``AzureFsspecRanges`` for "fsspec" and credentials it cannot use."""
    if choice not in AZURE_RANGES:
        raise ValueError(f"storage_options['recpipe']['ranges']={choice!r}: expected one of "
                         f"{AZURE_RANGES}")
    if choice == "fsspec" or not hasattr(fs, "service_client"):
        return AzureFsspecRanges(fs, path)
    try:
        return AzureHttpRanges(fs, path, fallback=AzureFsspecRanges(fs, path)
                               if choice == "auto" else None)
    except (ValueError, OSError) as exc:
        if choice == "http":
            raise ValueError(f"ranges='http' cannot be used for az://{path}: {exc}") from exc
        return AzureFsspecRanges(fs, path)
