"""Fixtures of the remote-IO tests: a moto S3 server on 127.0.0.1 (a subprocess, started once)."""

import concurrent.futures
import os
import uuid

import pytest


@pytest.fixture(scope="session", autouse=True)
def fsspec_io_thread():
    """fsspec's I/O thread and its loop's executor (and gcsfs's deferred-close thread) live for
    the whole session: started here, before any test, so that no test is blamed for them."""
    import fsspec.asyn

    loop = fsspec.asyn.get_loop()
    executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="fsspec-executor")
    executor.submit(lambda: None).result()
    loop.call_soon_threadsafe(loop.set_default_executor, executor)
    try:  # gcsfs's process-wide thread that closes dropped files, likewise
        import gcsfs.core

        getattr(gcsfs.core, "_start_deferred_close_worker", lambda: None)()
    except ImportError:
        pass
    yield


@pytest.fixture(scope="session")
def s3_server():
    pytest.importorskip("s3fs", reason="s3fs not installed: pip install -e '.[test,s3]'")
    pytest.importorskip("moto.moto_server.werkzeug_app", reason="moto[server] not installed")
    from .s3server import S3Server

    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        os.environ.pop(name, None)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("BOTO_CONFIG", "/dev/null")
    server = S3Server()
    yield server
    server.stop()


def _bucket(server):
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    server.faults()
    options = {
        "endpoint_url": server.endpoint, "key": "testing", "secret": "testing",
        "config_kwargs": {"retries": {"total_max_attempts": 1}, "connect_timeout": 2,
                          "read_timeout": 2},
        "recpipe": {"backoff": 0.01, "max_backoff": 0.05, "request_timeout": 5, "deadline": 20},
    }
    bucket = f"t-{uuid.uuid4().hex[:12]}"
    fs = s3fs.S3FileSystem(endpoint_url=server.endpoint, key="testing", secret="testing")
    fs.mkdir(bucket)
    return f"s3://{bucket}", options


@pytest.fixture
def s3(s3_server):
    """``(bucket url, storage_options)`` of a fresh bucket; recpipe retries with short pauses."""
    yield _bucket(s3_server)
    s3_server.faults()


@pytest.fixture(scope="session")
def s3_keepalive_server(s3_server):
    """A second moto server, speaking HTTP/1.1 with persistent connections."""
    from .s3server import S3Server

    server = S3Server(keepalive=True)
    yield server
    server.stop()


@pytest.fixture
def s3_keepalive(s3_keepalive_server):
    """Like ``s3``, on the keep-alive server."""
    yield _bucket(s3_keepalive_server)
    s3_keepalive_server.faults()


# -- GCS and Azure Blob (tests/io/storeservers.py; installed by ci/setup_stores.sh) ---------

class Store:
    """A fresh bucket/container on one store's test server: ``base`` URL, ``options``
    (storage_options with short retry pauses), ``server`` (faults, counters), ``fs``."""

    def __init__(self, kind, server, base, options, fs):
        self.kind, self.server, self.base, self.options, self.fs = kind, server, base, options, fs

    def url(self, name):
        return f"{self.base}/{name}"


_FAST_RETRIES = {"backoff": 0.01, "max_backoff": 0.05, "request_timeout": 5, "deadline": 20}


def _store_server(kind, tmp_path_factory):
    from . import storeservers

    module, cls = {"gcs": ("gcsfs", storeservers.GcsServer),
                   "azure": ("adlfs", storeservers.AzuriteServer)}[kind]
    pytest.importorskip(module, reason=f"{module} not installed (bash ci/setup_stores.sh)")
    try:
        return cls(str(tmp_path_factory.mktemp(f"{kind}-server")))
    except LookupError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory):
    server = _store_server("gcs", tmp_path_factory)
    import gcsfs.core

    getattr(gcsfs.core, "_start_deferred_close_worker", lambda: None)()  # (see fsspec_io_thread)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def azure_server(tmp_path_factory):
    server = _store_server("azure", tmp_path_factory)
    yield server
    server.stop()


def new_store(kind, server):
    from recpipe.io.sources import url_to_fs

    server.faults()
    name = f"t-{uuid.uuid4().hex[:12]}"
    base = f"{'gs' if kind == 'gcs' else 'az'}://{name}"
    options = {**server.storage_options(), "recpipe": dict(_FAST_RETRIES)}
    fs, _ = url_to_fs(base, options)
    fs.mkdir(name)
    return Store(kind, server, base, options, fs)


@pytest.fixture(params=["gcs", "azure"])
def store(request):
    """A fresh bucket (GCS) or container (Azure) on its loopback server, behind the fault
    proxy."""
    server = request.getfixturevalue(f"{request.param}_server")
    yield new_store(request.param, server)
    server.faults()
