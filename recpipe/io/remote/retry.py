"""Retrying remote range reads: which errors are transient, how long to back off, when to give up.

Transient: throttling (503 SlowDown, surfaced by s3fs as ``OSError(EBUSY)``), server errors
(``EREMOTEIO``/``EIO``), connection resets, timeouts, bodies cut short (aiohttp's
``ClientPayloadError``, which is not an OSError) and short reads. Permanent: missing objects,
denied access, bad arguments. Every attempt has a timeout and the whole read a deadline, so no
request waits forever; on giving up ``RemoteReadError`` names the URL, offset and length.
"""

import asyncio
import errno
import logging
import random
import time
from typing import NamedTuple

from ...errors import RemoteReadError

__all__ = ["RetryPolicy", "ShortReadError", "is_transient", "call_with_retry"]

log = logging.getLogger(__name__)

_TRANSIENT_ERRNOS = {
    errno.EBUSY, errno.EIO, errno.EAGAIN, errno.ECONNRESET, errno.ECONNABORTED, errno.ECONNREFUSED,
    errno.ETIMEDOUT, errno.EPIPE, errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EREMOTEIO,
}
_PERMANENT = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError,
              ValueError, TypeError, NotImplementedError, KeyError)
# transport errors of optional clients, matched by name so that none of them must be imported
_TRANSIENT_NAMES = {
    "ClientPayloadError", "ContentLengthError", "ServerDisconnectedError", "ClientOSError",
    "ClientConnectionError", "ClientConnectorError", "ServerTimeoutError", "ConnectionTimeoutError",
    "SocketTimeoutError", "FSTimeoutError", "IncompleteRead", "ProtocolError", "ReadTimeoutError",
    "ConnectTimeoutError", "EndpointConnectionError", "ConnectionClosedError", "HTTPClientError",
    "ResponseStreamingError", "ChunkedEncodingError", "ReadTimeout", "ConnectTimeout",
    "BadStatusLine",  # http.client: a garbled or cut status line (RemoteDisconnected is a reset)
}
_TRANSIENT_CODES = ("SlowDown", "Throttl", "RequestTimeout", "InternalError", "ServiceUnavailable",
                    "503", "500", "502", "504", "reduce your request rate")


class ShortReadError(OSError):
    """A range request returned fewer bytes than asked for (a body cut short)."""


class RetryPolicy(NamedTuple):
    """``attempts`` requests at most per range; full-jitter backoff ``backoff * 2**k`` capped at
    ``max_backoff``; each request times out after ``request_timeout`` s and the whole read after
    ``deadline`` s."""

    attempts: int = 5
    backoff: float = 0.1
    max_backoff: float = 2.0
    request_timeout: float = 30.0
    deadline: float = 120.0


def _names(exc):
    return {cls.__name__ for cls in type(exc).__mro__}


def is_transient(exc):
    """True when a retry of the same request may succeed."""
    if isinstance(exc, ShortReadError):
        return True
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError, ConnectionError)):
        return True
    if _names(exc) & _TRANSIENT_NAMES:
        return True
    if isinstance(exc, _PERMANENT):
        return False
    if isinstance(exc, OSError):
        if exc.errno in _TRANSIENT_ERRNOS:
            return True
        text = str(exc)
        return any(code in text for code in _TRANSIENT_CODES)
    cause = exc.__cause__ or exc.__context__
    return cause is not None and cause is not exc and is_transient(cause)


def _backoff(policy, attempt, rng):
    return rng.uniform(0, min(policy.max_backoff, policy.backoff * (2 ** attempt)))


def call_with_retry(request, policy, *, url, offset, length, on_retry=None, rng=random):
    """Return ``request(timeout)``; retry transient failures until attempts or deadline run out.

    ``on_retry(exc)`` is called before each new attempt (for counting).
    """
    deadline = time.monotonic() + policy.deadline
    attempt = 0
    while True:
        attempt += 1
        left = deadline - time.monotonic()
        try:
            return request(max(0.001, min(policy.request_timeout, left)))
        except Exception as exc:
            transient = is_transient(exc)
            pause = _backoff(policy, attempt - 1, rng)
            if not transient or attempt >= policy.attempts or time.monotonic() + pause >= deadline:
                why = "failed" if not transient else "still failing after retries"
                raise RemoteReadError(f"range read {why}: {type(exc).__name__}: {exc}", url=url,
                                      offset=offset, length=length, attempts=attempt) from exc
            log.info("retrying %s [%d, +%d) after %s: %s", url, offset, length,
                     type(exc).__name__, exc)
            if on_retry is not None:
                on_retry(exc)
            time.sleep(pause)
