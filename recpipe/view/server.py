"""The HTTP side: the standard library's ``http.server`` with a bounded pool of worker threads.

``ViewServer`` accepts connections on one thread and hands each to one of ``workers`` threads
through a queue of ``backlog`` places; a connection that finds the queue full gets ``503``
at once instead of a thread (``ThreadingHTTPServer`` would start one per connection, without
bound). Every connection has a socket timeout, so a client that stops sending holds a worker
for at most ``timeout`` seconds. ``close`` stops accepting, lets the workers finish what they
hold and joins them.

``Handler`` parses a request, refuses what a local page never sends (a ``Host`` that is not this
server: DNS rebinding; a cross-site ``POST``; URLs over ``MAX_URL``; methods other than GET,
HEAD and POST), and asks the application (``app.App.respond``) for a ``Response``. Errors
become a JSON body (``/api/...``) or a short HTML page (anything else) with the message, never
a traceback.
"""

import html
import http.server
import json
import logging
import math
import queue
import socket
import threading
from typing import Dict, NamedTuple, Optional
from urllib.parse import parse_qs, urlsplit

__all__ = ["HttpError", "Response", "ViewServer", "MAX_URL", "json_response"]

log = logging.getLogger(__name__)

MAX_URL = 2048
MAX_QUERY_FIELDS = 16


class HttpError(Exception):
    """An error answer: ``status`` and a message for the user (``details`` go into the JSON)."""

    def __init__(self, status, message, **details):
        super().__init__(message)
        self.status = status
        self.message = message
        self.details = details


class Response(NamedTuple):
    status: int
    content_type: str
    body: bytes
    headers: Optional[Dict[str, str]] = None


def json_response(data, status=200, headers=None):
    """``data`` as a JSON response (numpy scalars and arrays as numbers and lists; NaN and
    infinities, which JSON lacks, as null)."""
    try:
        text = json.dumps(data, separators=(",", ":"), allow_nan=False, default=_json_default)
    except ValueError:
        text = json.dumps(_finite(data), separators=(",", ":"), allow_nan=False,
                          default=_json_default)
    return Response(status, "application/json", text.encode("utf-8"), headers)


def _finite(value):
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return _finite(_json_default(value)) if type(value).__module__ == "numpy" else value


def _json_default(value):
    import numpy as np

    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value) if np.isfinite(value) else None
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def _error_page(status, message):
    reason = http.server.BaseHTTPRequestHandler.responses.get(status, ("Error",))[0]
    text = (f"<!doctype html><meta charset=utf-8><title>{status} {html.escape(reason)}</title>"
            f"<link rel=stylesheet href=/static/style.css><main class=error-page>"
            f"<h1>{status} {html.escape(reason)}</h1><p class=error>{html.escape(message)}</p>"
            f"<p><a href=/>Back to the viewer</a></p></main>")
    return text.encode("utf-8")


class Handler(http.server.BaseHTTPRequestHandler):
    """One request: checks, then ``server.app.respond(method, path, query, headers)``."""

    protocol_version = "HTTP/1.0"  # one request per connection: a worker is never held idle
    server_version = "recpipe-view"
    sys_version = ""

    def setup(self):
        self.timeout = self.server.timeout_seconds
        super().setup()

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        log.debug("%s %s", self.address_string(), format % args)

    def do_GET(self):
        self._answer("GET")

    def do_HEAD(self):
        self._answer("HEAD")

    def do_POST(self):
        self._answer("POST")

    def _refuse_other_methods(self):
        self._send(self._error(405, f"method {self.command} is not served here"))

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse_other_methods

    def _answer(self, method):
        try:
            path, query = self._checked(method)
            response = self.server.app.respond(method if method != "HEAD" else "GET", path,
                                               query, self.headers)
        except HttpError as exc:
            response = self._error(exc.status, exc.message, **exc.details)
        except Exception as exc:  # noqa: BLE001 - a bug: logged with its traceback, 500 to the page
            log.exception("error answering %s %s", method, self.path)
            response = self._error(500, f"internal error: {type(exc).__name__}: {exc}")
        self._send(response, head=method == "HEAD")

    def _checked(self, method):
        if len(self.path) > MAX_URL:
            raise HttpError(414, f"URL longer than {MAX_URL} characters")
        allowed = self.server.allowed_hosts
        host = (self.headers.get("Host") or "").strip().lower()
        if allowed is not None and host not in allowed:
            raise HttpError(421, f"this server answers requests for {sorted(allowed)[0]} only "
                                 f"(Host {host!r})")
        if method == "POST":
            origin = self.headers.get("Origin")
            if self.headers.get("X-Recpipe-View") != "1" or (
                    origin is not None and allowed is not None and
                    urlsplit(origin).netloc.lower() not in allowed):
                raise HttpError(403, "POST is accepted from the viewer's own page only")
            if int(self.headers.get("Content-Length") or 0) > 0:
                raise HttpError(413, "requests to this server carry no body")
        parts = urlsplit(self.path)
        try:
            query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=False,
                             max_num_fields=MAX_QUERY_FIELDS)
        except ValueError as exc:
            raise HttpError(400, f"bad query string: {exc}") from None
        return parts.path, {k: v[-1] for k, v in query.items()}

    def _error(self, status, message, **details):
        if self.path.startswith("/api/") or self.command == "POST" or \
                "text/html" not in (self.headers.get("Accept") or ""):
            return json_response({"error": message, "status": status, **details}, status)
        return Response(status, "text/html; charset=utf-8", _error_page(status, message))

    def _send(self, response, head=False):
        try:
            self.send_response(response.status)
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(response.body)))
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            if response.content_type.startswith("text/html"):
                self.send_header("Content-Security-Policy",
                                 "default-src 'self'; img-src 'self' blob: data:; "
                                 "style-src 'self'; script-src 'self'; frame-ancestors 'none'")
            for name, value in (response.headers or {}).items():
                self.send_header(name, value)
            if "Cache-Control" not in (response.headers or {}):
                self.send_header("Cache-Control", "no-store")
            self.end_headers()
            if not head:
                self.wfile.write(response.body)
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            pass  # the browser went away (a page change cancels its image requests)


class ViewServer(http.server.HTTPServer):
    """``HTTPServer`` whose connections are served by ``workers`` threads (see the module
    docstring). ``app`` answers the requests; ``allowed_hosts`` (None: any) are the ``Host``
    headers accepted."""

    daemon_threads = False
    request_queue_size = 128

    def __init__(self, address, app, *, workers=8, backlog=64, timeout=15.0,
                 allowed_hosts=None):
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, Handler)
        self.app = app
        self.timeout_seconds = timeout
        self.allowed_hosts = allowed_hosts
        self._queue: "queue.Queue" = queue.Queue(backlog)
        self._stopping = threading.Event()
        self._workers = [threading.Thread(target=self._work, name=f"recpipe-view-http-{i}")
                         for i in range(workers)]
        for thread in self._workers:
            thread.start()

    def process_request(self, request, client_address):
        try:
            self._queue.put_nowait((request, client_address))
        except queue.Full:
            self._refuse(request)
            self.shutdown_request(request)

    @staticmethod
    def _refuse(request):
        body = b'{"error":"the viewer is busy: too many requests at once","status":503}'
        try:
            request.settimeout(1.0)
            request.sendall(b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: "
                            b"application/json\r\nRetry-After: 1\r\nContent-Length: " +
                            str(len(body)).encode() + b"\r\n\r\n" + body)
        except OSError:
            pass

    def _work(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            request, client_address = item
            try:
                if not self._stopping.is_set():
                    self.finish_request(request, client_address)
            except Exception:  # noqa: BLE001 - one connection's failure, logged
                self.handle_error(request, client_address)
            finally:
                self.shutdown_request(request)

    def handle_error(self, request, client_address):
        log.debug("connection from %s failed", client_address, exc_info=True)

    def close(self, timeout=10.0):
        """Stop the workers (after the connections they hold) and close the socket; call after
        ``shutdown()`` when ``serve_forever`` ran in another thread."""
        self._stopping.set()
        self.server_close()
        for _ in self._workers:
            self._queue.put(None)
        for thread in self._workers:
            thread.join(timeout)
