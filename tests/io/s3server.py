"""Test S3 endpoints on 127.0.0.1: moto's real HTTP server with fault injection, and a TCP proxy.

Run as a script (``python tests/io/s3server.py``), this serves moto's S3 app on an ephemeral
loopback port, prints the port, and exits when its stdin closes or after ``--lifetime`` seconds.
Ranged GETs pass through a fault-injecting WSGI middleware controlled over HTTP:
``POST /__faults`` with a JSON body (``p503``, ``pcut``, ``pdrop``, ``p403``, ``stall_s``,
``pstall``, ``seed``) sets the faults and resets the counters; ``GET /__faults`` returns the
counters (ranged GETs seen, faults injected by kind). ``--keepalive`` serves HTTP/1.1 with
persistent connections (werkzeug's default is HTTP/1.0: one connection per request). A
subprocess keeps the server's threads out of the test process (whose tests must not leave
threads running) and off its GIL.

``FaultProxy`` is a small TCP proxy of the tests' own (one thread, stopped by the test) for
connection-level faults: per connection it forwards, resets after some response bytes, or
stalls (holds the connection without forwarding).
"""

import json
import os
import random
import selectors
import socket
import subprocess
import sys
import threading
import time

SLOWDOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
            b"<Message>Please reduce your request rate.</Message></Error>")
DENIED = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
          b"<Message>Request has expired</Message></Error>")


def _hang_up(env):
    sock = env.get("werkzeug.socket")
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class Faults:
    """WSGI middleware injecting faults into ranged GETs."""

    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()
        self.configure({})

    def configure(self, settings):
        with self.lock:
            self.settings = {"p503": 0.0, "pcut": 0.0, "pdrop": 0.0, "pstall": 0.0, "p403": 0.0,
                             "stall_s": 0.0, "seed": 0, **settings}
            self.rng = random.Random(self.settings["seed"])
            self.counters = {"ranged_gets": 0, "gets": 0, "puts": 0, "slowdown": 0, "cut": 0,
                             "drop": 0, "stall": 0, "denied": 0}

    def _pick(self):
        with self.lock:
            self.counters["ranged_gets"] += 1
            roll = self.rng.random()
            for kind in ("p503", "pcut", "pdrop", "pstall", "p403"):
                if roll < self.settings[kind]:
                    return kind
                roll -= self.settings[kind]
        return None

    def _count(self, name):
        with self.lock:
            self.counters[name] += 1

    def _control(self, env, start):
        if env["REQUEST_METHOD"] == "POST":
            size = int(env.get("CONTENT_LENGTH") or 0)
            self.configure(json.loads(env["wsgi.input"].read(size) or b"{}"))
        with self.lock:
            body = json.dumps(self.counters).encode()
        start("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    def __call__(self, env, start):
        if env.get("PATH_INFO", "").startswith("/__faults"):
            return self._control(env, start)
        method = env["REQUEST_METHOD"]
        if method == "PUT":
            self._count("puts")
        if method != "GET" or not env.get("HTTP_RANGE"):
            if method == "GET":
                self._count("gets")
            return self.app(env, start)
        kind = self._pick()
        if kind == "p503":
            self._count("slowdown")
            start("503 Slow Down", [("Content-Type", "application/xml"),
                                    ("Content-Length", str(len(SLOWDOWN)))])
            return [SLOWDOWN]
        if kind == "p403":
            self._count("denied")
            start("403 Forbidden", [("Content-Type", "application/xml"),
                                    ("Content-Length", str(len(DENIED)))])
            return [DENIED]
        if kind == "pdrop":  # connection closed before any response byte
            self._count("drop")
            _hang_up(env)
            raise ConnectionAbortedError("fault: dropped")
        if kind == "pstall":
            self._count("stall")
            time.sleep(self.settings["stall_s"])
        body = b"".join(self.app(env, start))
        if kind == "pcut":
            self._count("cut")

            def cut():
                yield body[:len(body) // 2]
                _hang_up(env)  # the client sees the connection close mid-body
                raise ConnectionAbortedError("fault: body cut")
            return cut()
        return [body]


def serve(lifetime, keepalive=False):
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import WSGIRequestHandler, make_server

    class Handler(WSGIRequestHandler):
        protocol_version = "HTTP/1.1" if keepalive else "HTTP/1.0"

    app = Faults(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Handler)
    print(server.server_port, flush=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                              daemon=True)
    thread.start()
    deadline = time.monotonic() + lifetime
    watcher = threading.Thread(target=sys.stdin.read, daemon=True)  # EOF: the parent is gone
    watcher.start()
    while watcher.is_alive() and time.monotonic() < deadline:
        watcher.join(0.5)
    server.shutdown()


class S3Server:
    """The script above as a subprocess: ``endpoint``, ``faults(**settings)``, ``counters()``."""

    def __init__(self, lifetime=900, keepalive=False):
        env = dict(os.environ, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                   MOTO_ALLOW_NONEXISTENT_REGION="true")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--lifetime", str(lifetime)]
            + (["--keepalive"] if keepalive else []),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        line = self.proc.stdout.readline()
        if not line.strip():
            self.stop()
            raise RuntimeError("the moto S3 test server did not start")
        self.port = int(line)
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def _call(self, data=None):
        import urllib.request

        request = urllib.request.Request(f"{self.endpoint}/__faults", data=data,
                                         method="POST" if data is not None else "GET")
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def faults(self, **settings):
        """Set the fault probabilities (the rest 0) and reset the counters."""
        return self._call(json.dumps(settings).encode())

    def counters(self):
        return self._call()

    def stop(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


class FaultProxy:
    """TCP proxy 127.0.0.1:port -> target; ``policy(n)`` picks what connection ``n`` gets:
    ``"pass"``, ``("reset", nbytes)`` (RST after forwarding ``nbytes`` of the response) or
    ``"stall"`` (the request is never forwarded, nothing comes back)."""

    def __init__(self, target_port, policy):
        self.target = ("127.0.0.1", target_port)
        self.policy = policy
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.listener, selectors.EVENT_READ, None)
        self._stop = threading.Event()
        self._socks = []
        self.thread = threading.Thread(target=self._run, name="fault-proxy")
        self.thread.start()

    def _accept(self):
        client, _ = self.listener.accept()
        action = self.policy(self.connections)
        self.connections += 1
        self._socks.append(client)
        if action == "stall":
            return  # held open, never read: the client waits for a response that never comes
        upstream = socket.create_connection(self.target, timeout=5)
        self._socks.append(upstream)
        budget = action[1] if isinstance(action, tuple) else None
        state = {"peer": None, "budget": budget}
        self.sel.register(client, selectors.EVENT_READ, (upstream, None))
        self.sel.register(upstream, selectors.EVENT_READ, (client, state))

    def _close(self, *socks):
        for sock in socks:
            try:
                self.sel.unregister(sock)
            except (KeyError, ValueError):
                pass
            sock.close()

    def _pump(self, sock, peer, state):
        try:
            data = sock.recv(65536)
        except OSError:
            data = b""
        if not data:
            self._close(sock, peer)
            return
        if state is not None and state["budget"] is not None:
            if len(data) >= state["budget"]:
                peer.sendall(data[:state["budget"]])
                peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                self._close(sock, peer)  # SO_LINGER 0: the client sees a reset
                return
            state["budget"] -= len(data)
        try:
            peer.sendall(data)
        except OSError:
            self._close(sock, peer)

    def _run(self):
        while not self._stop.is_set():
            for key, _ in self.sel.select(0.1):
                if key.data is None:
                    self._accept()
                else:
                    self._pump(key.fileobj, *key.data)

    def close(self):
        self._stop.set()
        self.thread.join(10)
        for sock in self._socks:
            sock.close()
        self.listener.close()
        self.sel.close()


if __name__ == "__main__":
    serve(float(sys.argv[sys.argv.index("--lifetime") + 1]) if "--lifetime" in sys.argv else 900,
          keepalive="--keepalive" in sys.argv)
