"""Faults: throttling, cut bodies, dropped, reset and stalled connections against a real S3 server.

Transient faults are retried and every record arrives once and intact; persistent ones fail with
a RemoteReadError naming URL and offset after a bounded number of attempts (pytest-timeout
bounds the time).
"""

import errno
import http.client
import random

import numpy as np
import pytest

from recpipe.errors import RemoteReadError
from recpipe.io import RecordReader, RecordWriter
from recpipe.io.remote.source import RemoteSource
from recpipe.io.remote.options import RemoteOptions
from recpipe.io.remote.retry import RetryPolicy, ShortReadError, call_with_retry, is_transient

from .s3server import FaultProxy


def _records(base, options, n=120, seed=0):
    rng = np.random.default_rng(seed)
    payloads = [rng.bytes(2000 + int(rng.integers(0, 3000))) for _ in range(n)]
    url = f"{base}/f.rec"
    with RecordWriter(url, storage_options=options) as writer:
        for payload in payloads:
            writer.write(payload)
    return url, payloads


def _with(options, **recpipe):
    return {**options, "recpipe": {**options["recpipe"], **recpipe}}


@pytest.mark.timeout(60)
def test_transient_faults_lose_nothing(s3, s3_server):
    base, options = s3
    url, payloads = _records(base, options)
    order = [int(p) for p in np.random.default_rng(2).permutation(len(payloads))]
    # a budget far under the file: windows of 16 records, many requests to fault
    opts = _with(options, plan_window=16, max_gap=2000, attempts=10, budget_bytes=64 << 10)
    with RecordReader(url, storage_options=opts) as reader:
        s3_server.faults(p503=0.2, pcut=0.1, pdrop=0.05, seed=5)
        plan = reader.prefetch(order)
        prefetched = [reader[p] for p in order]
        direct = [reader[p] for p in range(0, len(payloads), 7)]
        plan.cancel()
        stats = reader.source_stats()
    faults = s3_server.counters()
    assert prefetched == [payloads[p] for p in order]
    assert direct == payloads[::7]
    assert faults["slowdown"] and faults["cut"] and faults["drop"]
    # every 503 costs one retry of ours; a connection closed by the server may instead be
    # retried once by aiohttp itself (a stale pooled connection), which the server also sees
    injected = faults["slowdown"] + faults["cut"] + faults["drop"]
    assert faults["slowdown"] <= stats["retries"] <= injected
    assert stats["requests"] - stats["retries"] == faults["ranged_gets"] - injected


@pytest.mark.timeout(60)
def test_persistent_throttling_fails_with_url_and_offset(s3, s3_server):
    base, options = s3
    url, payloads = _records(base, options, n=10)
    with RecordReader(url, storage_options=_with(options, attempts=3)) as reader:
        s3_server.faults(p503=1.0)
        start = reader.span(4)[0]
        with pytest.raises(RemoteReadError) as info:
            reader[4]
    err = info.value
    assert err.url == url and err.offset == start and err.attempts == 3
    assert url in str(err) and str(start) in str(err)
    assert isinstance(err.__cause__, OSError) and err.__cause__.errno == errno.EBUSY
    assert s3_server.counters()["ranged_gets"] == 3


@pytest.mark.timeout(60)
def test_stalled_responses_time_out_and_retry(s3, s3_server):
    base, options = s3
    url, payloads = _records(base, options, n=15)
    opts = _with(options, attempts=6, request_timeout=0.5)
    with RecordReader(url, storage_options=opts) as reader:
        s3_server.faults(pstall=0.2, stall_s=1.5, seed=1)
        got = [reader[i] for i in range(len(payloads))]
        stats = reader.source_stats()
    assert got == payloads
    assert stats["retries"] == s3_server.counters()["stall"] > 0


@pytest.mark.timeout(60)
def test_persistent_stall_fails_in_bounded_attempts(s3, s3_server):
    base, options = s3
    url, _ = _records(base, options, n=5)
    opts = _with(options, attempts=2, request_timeout=0.5)
    with RecordReader(url, storage_options=opts) as reader:
        s3_server.faults(pstall=1.0, stall_s=1.5)
        with pytest.raises(RemoteReadError) as info:
            reader[1]
    assert info.value.attempts == 2 and is_transient(info.value.__cause__)


@pytest.mark.timeout(60)
def test_connection_resets_through_a_proxy(s3, s3_server):
    base, options = s3
    url, payloads = _records(base, options, n=40)
    # every third new connection is reset after 300 response bytes (mid-headers or mid-body)
    proxy = FaultProxy(s3_server.port, lambda n: ("reset", 300) if n % 3 == 1 else "pass")
    try:
        opts = _with({**options, "endpoint_url": f"http://127.0.0.1:{proxy.port}"}, attempts=8)
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()
        with RecordReader(url, storage_options=opts) as reader:
            got = [reader[i] for i in random.Random(0).sample(range(40), 40)]
        s3fs.S3FileSystem.clear_instance_cache()
    finally:
        proxy.close()
    assert sorted(got) == sorted(payloads)
    assert proxy.connections > 1


@pytest.mark.timeout(60)
def test_stalled_connection_through_a_proxy_fails_bounded(s3, s3_server):
    base, options = s3
    url, _ = _records(base, options, n=5)
    with RecordReader(url, storage_options=options) as reader:
        size = reader.size
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    proxy = FaultProxy(s3_server.port, lambda n: "stall")
    try:
        opts = _with({**options, "endpoint_url": f"http://127.0.0.1:{proxy.port}"}, attempts=2,
                     request_timeout=0.5)
        from recpipe.io.sources import open_source

        with pytest.raises((RemoteReadError, OSError)):
            with open_source(url, opts) as source:  # info() itself may be the one to time out
                source.read(0, size)
        s3fs.S3FileSystem.clear_instance_cache()
    finally:
        proxy.close()


@pytest.mark.timeout(60)
def test_deleted_object_is_a_permanent_error(s3, s3_server):
    base, options = s3
    url, _ = _records(base, options, n=5)
    from recpipe.io.sources import url_to_fs

    with RecordReader(url, storage_options=options) as reader:
        fs, path = url_to_fs(url, options)
        fs.rm(path)
        with pytest.raises(RemoteReadError) as info:
            reader[2]
    assert info.value.attempts == 1 and isinstance(info.value.__cause__, FileNotFoundError)


@pytest.mark.timeout(60)
def test_index_read_is_retried(s3, s3_server, tmp_path):
    base, options = s3
    url, payloads = _records(base, options, n=30)
    s3_server.faults(p503=0.5, pcut=0.3, seed=1)  # seed 1: the first ranged GET is throttled
    with RecordReader(url, storage_options=_with(options, attempts=10)) as reader:
        faults = s3_server.counters()  # opening read the .idx and the .sums: HEADs, ranged GETs
        s3_server.faults()
        assert reader.sums is not None and len(reader.sums) == 30  # retried too
        assert [reader[i] for i in range(len(reader))] == payloads
        assert reader.keys == list(range(30))
    assert faults["slowdown"] >= 1
    assert faults["ranged_gets"] == 2 + faults["slowdown"] + faults["cut"]


@pytest.mark.timeout(60)
def test_index_read_fails_with_the_index_url(s3, s3_server):
    base, options = s3
    url, _ = _records(base, options, n=5)
    s3_server.faults(p503=1.0)
    with pytest.raises(RemoteReadError) as info:
        RecordReader(url, storage_options=_with(options, attempts=3))
    err = info.value
    assert err.url == url[:-4] + ".idx" and err.offset == 0 and err.attempts == 3
    assert isinstance(err.__cause__, OSError) and err.__cause__.errno == errno.EBUSY
    assert s3_server.counters()["ranged_gets"] == 3


@pytest.mark.timeout(60)
def test_list_read_survives_cut_bodies(s3, s3_server, tmp_path):
    from recpipe.io.sidecars.index import format_list_line, read_list
    from recpipe.io.sources import url_to_fs

    base, options = s3
    lines = [format_list_line(i, (float(i % 7), 0.5), f"class{i % 3}/img {i}.jpg")
             for i in range(400)]
    fs, path = url_to_fs(f"{base}/data.lst", options)
    fs.pipe_file(path, "".join(lines).encode())
    (tmp_path / "data.lst").write_text("".join(lines))
    s3_server.faults(pcut=0.6, seed=1)  # seed 1: the first ranged GET is cut
    entries, skipped = read_list(f"{base}/data.lst", _with(options, attempts=10))
    faults = s3_server.counters()
    assert (entries, skipped) == read_list(str(tmp_path / "data.lst"))
    assert len(entries) == 400 and faults["cut"] >= 1
    assert faults["ranged_gets"] == 1 + faults["cut"]


# -- the retry layer on its own -----------------------------------------------------------------

class FlakyRanges:
    """Serves ``data``; fails the first ``failures`` calls with the given errors, in turn."""

    def __init__(self, data, failures):
        self.data = data
        self.failures = list(failures)
        self.calls = 0

    def fetch(self, start, end, timeout):
        self.calls += 1
        if self.failures:
            failure = self.failures.pop(0)
            if failure == "short":
                return self.data[start:end - 1]
            raise failure
        return self.data[start:end]

    def close(self):
        pass


def _source(data, failures, **options):
    opts = RemoteOptions(backoff=0.001, max_backoff=0.002, **options)
    return RemoteSource(FlakyRanges(data, failures), "fake://x", len(data), opts)


def test_short_reads_and_resets_are_retried_and_counted():
    data = bytes(range(256)) * 40
    failures = ["short", ConnectionResetError(), OSError(errno.EBUSY, "SlowDown"), TimeoutError()]
    with _source(data, failures) as source:
        assert bytes(source.read(100, 5000)) == data[100:5100]
        stats = source.stats()
    assert stats["requests"] == 5 and stats["retries"] == 4
    assert stats["bytes_fetched"] == 4999 + 5000
    assert stats["bytes_requested"] == 5 * 5000  # counted when sent, whatever came back


def test_permanent_errors_are_not_retried():
    with _source(b"x" * 100, [PermissionError("denied")]) as source:
        with pytest.raises(RemoteReadError, match="offset 10") as info:
            source.read(10, 20)
    assert info.value.attempts == 1 and isinstance(info.value.__cause__, PermissionError)


def test_retries_stop_at_the_attempt_limit():
    failures = [ConnectionResetError()] * 10
    with _source(b"x" * 100, failures, attempts=4) as source:
        with pytest.raises(RemoteReadError) as info:
            source.read(0, 50)
    assert info.value.attempts == 4 and source.ranges.calls == 4


def test_deadline_bounds_the_retries():
    calls = []

    def never(timeout):
        calls.append(timeout)
        raise TimeoutError("stalled")

    policy = RetryPolicy(attempts=1000, backoff=0.05, max_backoff=0.05, request_timeout=5,
                         deadline=0.2)
    with pytest.raises(RemoteReadError):
        call_with_retry(never, policy, url="u", offset=0, length=1, rng=random.Random(0))
    assert 1 < len(calls) < 1000 and all(t <= 0.2 for t in calls)


@pytest.mark.parametrize("exc, transient", [
    (OSError(errno.EBUSY, "SlowDown"), True),
    (OSError(errno.EREMOTEIO, "InternalError"), True),
    (ConnectionResetError(), True),
    (TimeoutError(), True),
    (ShortReadError("short"), True),
    (type("ClientPayloadError", (Exception,), {})("cut"), True),
    (http.client.RemoteDisconnected("closed"), True),
    (http.client.BadStatusLine("garbage"), True),
    (http.client.IncompleteRead(b"x", 10), True),
    (FileNotFoundError("gone"), False),
    (PermissionError("denied"), False),
    (ValueError("bad"), False),
    (OSError(errno.EINVAL, "bad argument"), False),
])
def test_error_classification(exc, transient):
    assert is_transient(exc) is transient


@pytest.mark.timeout(60)
@pytest.mark.parametrize("through", ["reader", "loader"])
def test_the_deadline_holds_across_retries(s3, s3_server, through):
    """A stalled server fails a read within the documented deadline, however many attempts
    are allowed and whatever layer (prefetch, read-ahead) makes the requests."""
    base, options = s3
    url, _ = _records(base, options, n=5)
    opts = _with(options, attempts=50, request_timeout=0.6, deadline=2.0)
    s3_server.faults(pstall=1.0, stall_s=3.0)
    try:
        if through == "reader":
            with pytest.raises(RemoteReadError) as caught:
                with RecordReader(url, storage_options=opts) as reader:
                    reader[1]
        else:
            from recpipe.decode.loader import ImageLoader

            with pytest.raises((RemoteReadError, OSError)) as caught:
                with ImageLoader(url, 2, (3, 8, 8), storage_options=opts, threads=1,
                                 timeout=30) as loader:
                    next(iter(loader))
    finally:
        s3_server.faults()
    error = caught.value
    while not isinstance(error, RemoteReadError) and error.__cause__ is not None:
        error = error.__cause__
    assert isinstance(error, RemoteReadError)
    # 0.6 s attempts against a 2 s deadline: the deadline, not the 50 attempts, ended it
    assert 1 <= error.attempts <= 5, error.attempts
