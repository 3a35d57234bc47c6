"""Fixtures of the remote-IO tests: a moto S3 server on 127.0.0.1 (a subprocess, started once)."""

import concurrent.futures
import os
import uuid

import pytest


@pytest.fixture(scope="session", autouse=True)
def fsspec_io_thread():
    """fsspec's I/O thread and its loop's executor live for the whole session: started here,
    before any test, so that no test is blamed for them."""
    import fsspec.asyn

    loop = fsspec.asyn.get_loop()
    executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="fsspec-executor")
    executor.submit(lambda: None).result()
    loop.call_soon_threadsafe(loop.set_default_executor, executor)
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
