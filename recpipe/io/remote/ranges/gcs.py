"""Google Cloud Storage range reads: ``GcsHttpRanges`` (recpipe's own GETs, the default) or
``GcsFsspecRanges`` (through gcsfs's session).

Both read the JSON API's media download (``fs.url(path)``: ``/download/storage/v1/b/B/o/O?
alt=media``, gcsfs's endpoint: Google's, ``endpoint_url`` or ``$STORAGE_EMULATOR_HOST``),
authorised by gcsfs's credentials (a bearer token, refreshed by gcsfs; none for ``token="anon"``),
and are pinned to the generation at open: every GET carries ``ifGenerationMatch=<generation>``
(Google answers 412 once the object was replaced) and each response's ``x-goog-generation`` is
compared with it (for servers that ignore the precondition), so a replaced object raises
``ObjectChangedError`` naming the URL. Each ``fetch`` is one request: gcsfs's own retries
(6 attempts, sleeps up to 32 s, bound when its class is defined) are bypassed, so that the retry
policy is ``RemoteSource``'s, the same for every store.
"""

import json
import urllib.parse

from .fsspec import FsspecRanges, ObjectChangedError
from .http import HttpRanges, SignedUrl, http_status_error

__all__ = ["GcsFsspecRanges", "GcsHttpRanges", "gcs_ranges"]


def _generation(info):
    generation = info.get("generation")
    return str(generation) if generation not in (None, "") else None


def _pinned_url(fs, path, generation):
    """gcsfs's media URL of ``path``, with the generation precondition and the billing project
    of a requester-pays bucket (gcsfs's ``_get_params``)."""
    params = fs._get_params({"ifGenerationMatch": generation})
    return fs.url(path) + "".join(f"&{name}={urllib.parse.quote(str(value))}"
                                  for name, value in params.items())


def _changed(url, pinned, seen, start):
    return ObjectChangedError(
        f"{url} changed after it was opened (generation {pinned} at open, {seen or 'another'} "
        f"now): reading on would mix two versions of it; open it again", url=url, offset=start)


class GcsHttpRanges(HttpRanges):
    """Ranged media downloads of one GCS object on connections of its own (``HttpRanges``)."""

    SCHEME = "gs"
    VERSION_NAME = "generation"

    def __init__(self, fs, path, *, ssl_context=None, buffers=None, fallback=None):
        super().__init__(fs, path, ssl_context=ssl_context, buffers=buffers, fallback=fallback)
        self._presign()  # fail now (in open_source) rather than in the first read

    def _sign(self):
        return SignedUrl(_pinned_url(self._own_fs(), self.path, self.version))

    def _auth_headers(self):
        headers: "dict[str, str]" = {}
        self.fs.credentials.apply(headers)
        return headers

    def _pin_headers(self):
        return {}  # the precondition is in the URL

    def _version(self, response):
        return response.getheader("x-goog-generation")

    def _same_version(self, seen):
        return str(seen).strip() == self.version

    def _version_of_info(self, info):
        return _generation(info)

    def pin(self, info):
        super().pin(info)
        self._presign()

    def _status_error(self, status, body):
        return gcs_status_error(status, body, self.url)


def gcs_status_error(status, body, url):
    """The exception for a GCS error response (JSON ``{"error": {"message": ...}}``)."""
    message = ""
    try:
        error = json.loads(body or b"{}").get("error")
        message = error.get("message", "") if isinstance(error, dict) else str(error or "")
    except (ValueError, AttributeError):
        message = (body or b"")[:300].decode("utf-8", "replace")
    return http_status_error(status, f"{status} {message} ({url})".replace("  ", " "))


class GcsFsspecRanges(FsspecRanges):
    """Ranged GETs through gcsfs's own aiohttp session (``_request`` without its retry loop),
    pinned like ``GcsHttpRanges``."""

    def __init__(self, fs, path):
        super().__init__(fs, path)
        self.generation = None
        self.url = f"gs://{path}"  # (open_ranges names the URL's own scheme)

    def pin(self, info):
        self.generation = _generation(info)

    async def _get(self, start, end):
        request = getattr(type(self.fs)._request, "__wrapped__", None)
        url = _pinned_url(self.fs, self.path, self.generation)
        headers = {"Range": f"bytes={start}-{end - 1}"}
        try:
            if request is not None:
                _, response_headers, _, body = await request(self.fs, "GET", url,
                                                             headers=headers)
            else:
                response_headers, body = await self.fs._call("GET", url, headers=headers)
        except FileExistsError:  # gcsfs's name for 412 Precondition Failed
            if self.generation:
                raise _changed(self.url, self.generation, None, start) from None
            raise
        seen = response_headers.get("x-goog-generation")
        if self.generation and seen and str(seen) != self.generation:
            raise _changed(self.url, self.generation, seen, start)
        return body

    def fetch(self, start, end, timeout):
        from fsspec.asyn import sync

        if end <= start:
            return b""
        return sync(self.fs.loop, self._get, start, end, timeout=timeout)


GCS_RANGES = ("auto", "http", "fsspec")


def gcs_ranges(fs, path, choice="auto"):
    """The range reader of a GCS object: ``GcsHttpRanges`` (with ``GcsFsspecRanges`` as its
    fallback for "auto"), or ``GcsFsspecRanges`` for "fsspec"."""
    if choice not in GCS_RANGES:
        raise ValueError(f"storage_options['recpipe']['ranges']={choice!r}: expected one of "
                         f"{GCS_RANGES}")
    if choice == "fsspec" or not hasattr(fs, "credentials"):
        return GcsFsspecRanges(fs, path)
    try:
        return GcsHttpRanges(fs, path, fallback=GcsFsspecRanges(fs, path)
                             if choice == "auto" else None)
    except (ValueError, OSError) as exc:
        if choice == "http":
            raise ValueError(f"ranges='http' cannot be used for gs://{path}: {exc}") from exc
        return GcsFsspecRanges(fs, path)

