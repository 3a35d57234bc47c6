"""HDFS: webhdfs:// against a loopback WebHDFS REST stub of our own, contract tests of the native
adapters with fakes, and a real-cluster conformance run when ``RECPIPE_HDFS_URL`` is set.

No Hadoop server can be installed here: the stub exercises fsspec's webhdfs client (redirects to
a "DataNode", offsets, error mapping), not HDFS semantics; the fakes check that recpipe calls the
native clients' positional reads (``read_range``, ``read_at``) and picks the client explicitly.
"""

import json
import os
import sys
import threading
import types
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import fsspec
import numpy as np
import pytest
from fsspec import AbstractFileSystem

from recpipe.io import RecordReader, RecordWriter
from recpipe.io.format.framing import frame
from recpipe.io.remote.hdfs import hdfs_filesystem_class
from recpipe.io.remote.ranges.hdfs import ArrowHdfsRanges
from recpipe.io.sidecars.index import format_index_line
from recpipe.io.sources import open_source


def _dataset(n=30, seed=0):
    rng = np.random.default_rng(seed)
    payloads = [rng.bytes(int(s)) for s in rng.integers(1, 5000, n)]
    chunks, offsets, pos = [], [], 0
    for payload in payloads:
        offsets.append(pos)
        chunks.append(frame(payload))
        pos += len(chunks[-1])
    index = "".join(format_index_line(i, o) for i, o in enumerate(offsets)).encode()
    return payloads, b"".join(chunks), index


# -- a WebHDFS REST stub on 127.0.0.1 ------------------------------------------------------------

class WebHdfsStub:
    """NameNode: GETFILESTATUS, LISTSTATUS, OPEN (307 to a DataNode path); DataNode: bytes."""

    def __init__(self, files):
        self.files = files
        self.opens = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _json(self, code, obj):
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _missing(self, path):
                self._json(404, {"RemoteException": {
                    "exception": "FileNotFoundException",
                    "javaClassName": "java.io.FileNotFoundException",
                    "message": f"File does not exist: {path}"}})

            def _status(self, path, data):
                kind = "FILE" if data is not None else "DIRECTORY"
                return {"pathSuffix": path.rsplit("/", 1)[-1], "type": kind,
                        "length": len(data or b""), "modificationTime": 0, "owner": "t",
                        "group": "t", "permission": "644", "replication": 1,
                        "blockSize": 128 << 20, "accessTime": 0}

            def do_GET(self):
                parts = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                if parts.path.startswith("/dn/"):
                    data = stub.files[parts.path[3:]]
                    offset = int(query.get("offset", 0))
                    length = int(query.get("length", len(data) - offset))
                    body = data[offset:offset + length]
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                path = parts.path[len("/webhdfs/v1"):]
                op = query.get("op", "").upper()
                children = [p for p in stub.files if p.startswith(path.rstrip("/") + "/")]
                if op == "GETFILESTATUS":
                    if path in stub.files:
                        return self._json(200, {"FileStatus": self._status(path, stub.files[path])})
                    if children:
                        return self._json(200, {"FileStatus": self._status(path, None)})
                    return self._missing(path)
                if op == "LISTSTATUS":
                    return self._json(200, {"FileStatuses": {"FileStatus": [
                        self._status(p, stub.files[p]) for p in children]}})
                if op == "OPEN":
                    if path not in stub.files:
                        return self._missing(path)
                    stub.opens += 1
                    host, port = self.server.server_address
                    extra = "&".join(f"{k}={query[k]}" for k in ("offset", "length") if k in query)
                    self.send_response(307)
                    self.send_header("Location", f"http://{host}:{port}/dn{path}?{extra}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self._json(400, {"RemoteException": {"exception": "IllegalArgumentException",
                                                     "message": f"op {op}"}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.1}, name="webhdfs-stub")
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


@pytest.fixture
def webhdfs():
    pytest.importorskip("requests")
    payloads, data, index = _dataset()
    stub = WebHdfsStub({"/data/x.rec": data, "/data/x.idx": index})
    yield stub, payloads
    stub.close()


def test_webhdfs_reads_match_and_use_range_requests(webhdfs):
    stub, payloads = webhdfs
    url = f"webhdfs://127.0.0.1:{stub.port}/data/x.rec"
    with RecordReader(url, storage_options={"recpipe": {"max_inflight": 4}}) as reader:
        assert reader.index_url.endswith("/data/x.idx")
        opened = stub.opens
        assert [reader[i] for i in (3, 0, 29, 7)] == [payloads[i] for i in (3, 0, 29, 7)]
        assert stub.opens - opened == 4  # one OPEN (range) per record
        plan = reader.prefetch(range(len(reader)))
        assert [reader[i] for i in range(len(reader))] == payloads
        plan.cancel()
        assert reader.source_stats()["requests"] == 4 + plan.planned_requests
        assert list(reader) == payloads


def test_webhdfs_missing_file(webhdfs):
    stub, _ = webhdfs
    with pytest.raises(FileNotFoundError, match="nope.rec"):
        RecordReader(f"webhdfs://127.0.0.1:{stub.port}/data/nope.rec")


# -- native clients, with fakes ------------------------------------------------------------------

class FakeNativeReader:
    def __init__(self, data, log):
        self.data = data
        self.log = log

    def read_range(self, offset, length):
        self.log.append((offset, length))
        return self.data[offset:offset + length]

    def close(self):
        self.log.append("closed")


class FakeClient:
    files = {}
    log = []

    def __init__(self, url):
        self.url = url

    def read(self, path):
        return FakeNativeReader(self.files[path], self.log)


class FakeNativeFS(AbstractFileSystem):
    protocol = ("hdfs", "viewfs")

    def __init__(self, host, port=None, **kwargs):
        super().__init__(host, port, **kwargs)
        self.client = FakeClient(f"hdfs://{host}:{port}")

    def info(self, path, **kwargs):
        if path not in FakeClient.files:
            raise FileNotFoundError(path)
        return {"name": path, "size": len(FakeClient.files[path]), "type": "file"}

    def _open(self, path, mode="rb", **kwargs):
        raise AssertionError("recpipe must not read through file objects")

    def cat_file(self, path, start=None, end=None, **kwargs):
        return FakeClient.files[path][start:end]


@pytest.fixture
def fake_hdfs_native(monkeypatch):
    package = types.ModuleType("hdfs_native")
    package.Client = FakeClient
    module = types.ModuleType("hdfs_native.fsspec")
    module.HdfsFileSystem = FakeNativeFS
    package.fsspec = module
    monkeypatch.setitem(sys.modules, "hdfs_native", package)
    monkeypatch.setitem(sys.modules, "hdfs_native.fsspec", module)
    payloads, data, index = _dataset(seed=1)
    FakeClient.files = {"/d/x.rec": data, "/d/x.idx": index}
    FakeClient.log = []
    yield payloads
    FakeNativeFS.clear_instance_cache()


def test_native_client_is_chosen_explicitly_and_read_by_ranges(fake_hdfs_native):
    payloads = fake_hdfs_native
    options = {"recpipe": {"hdfs": "native"}}
    with RecordReader("hdfs://nn:8020/d/x.rec", index_url=False, storage_options=options) as reader:
        source = reader._source
        assert source.ranges.reader.read_range.__self__.data == FakeClient.files["/d/x.rec"]
        assert [reader[i] for i in range(len(reader))] == payloads
    assert FakeClient.log[-1] == "closed"
    assert all(isinstance(call, tuple) for call in FakeClient.log[:-1])


def test_environment_picks_the_client(fake_hdfs_native, monkeypatch):
    monkeypatch.setenv("RECPIPE_HDFS_IMPL", "native")
    with open_source("hdfs://nn:8020/d/x.rec") as source:
        assert bytes(source.read(0, 8)) == FakeClient.files["/d/x.rec"][:8]
    monkeypatch.setenv("RECPIPE_HDFS_IMPL", "jvm")
    with pytest.raises(ValueError, match="HDFS client 'jvm'"):
        open_source("hdfs://nn:8020/d/x.rec")


def test_arrow_is_not_replaced_by_whatever_registered_hdfs(fake_hdfs_native, monkeypatch):
    # what installing hdfs-native does: fsspec's "hdfs" now names the native client
    fsspec.register_implementation("hdfs", FakeNativeFS, clobber=True)
    try:
        assert fsspec.get_filesystem_class("hdfs") is FakeNativeFS
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            with pytest.raises(ImportError, match=r"recpipe\[hdfs\]"):
                hdfs_filesystem_class("arrow")
        else:
            assert hdfs_filesystem_class("arrow").__module__ == "fsspec.implementations.arrow"
    finally:
        from fsspec.registry import _registry

        _registry.pop("hdfs", None)


def test_arrow_ranges_use_positional_reads():
    calls = []

    class FakeArrowFile:
        def read_at(self, nbytes, offset):
            calls.append((nbytes, offset))
            return memoryview(b"0123456789"[offset:offset + nbytes])

        def close(self):
            calls.append("closed")

    class FakeArrowFS:
        def open_input_file(self, path):
            assert path == "/d/x.rec"
            return FakeArrowFile()

    ranges = ArrowHdfsRanges(FakeArrowFS(), "/d/x.rec")
    assert ranges.fetch(2, 6, timeout=1) == b"2345"
    ranges.close()
    assert calls == [(4, 2), "closed"]


# -- a real cluster ------------------------------------------------------------------------------

@pytest.mark.skipif(not os.environ.get("RECPIPE_HDFS_URL"),
                    reason="no HDFS cluster: set "
                           "RECPIPE_HDFS_URL=hdfs://namenode:port/writable/dir (and "
                           "RECPIPE_HDFS_IMPL=arrow|native) to run against a real one")
@pytest.mark.parametrize("impl", ["arrow", "native"])
def test_real_cluster_conformance(impl):
    pytest.importorskip("pyarrow" if impl == "arrow" else "hdfs_native")
    base = os.environ["RECPIPE_HDFS_URL"].rstrip("/") + f"/recpipe-test-{uuid.uuid4().hex[:8]}"
    options = {"recpipe": {"hdfs": impl}}
    payloads, _, _ = _dataset(seed=2)
    with RecordWriter(f"{base}/x.rec", storage_options=options) as writer:
        for payload in payloads:
            writer.write(payload)
    with RecordReader(f"{base}/x.rec", storage_options=options) as reader:
        assert list(reader) == payloads
        plan = reader.prefetch(range(len(reader)))
        assert [reader[i] for i in range(len(reader))] == payloads
        plan.cancel()
