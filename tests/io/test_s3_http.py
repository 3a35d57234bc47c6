"""recpipe's own S3 range reader (``S3HttpRanges``) against moto's server on 127.0.0.1.

What is checked: which reader serves ``s3://`` and when s3fs's is used instead; byte equality
with the local file; deterministic counters (range GETs the server saw, URLs signed, connections
opened, requests sent again); prefetched records are views of one request buffer, and request
buffers are reused; kept-alive connections the server closed are handled; expired URLs are
signed again; a server that refuses presigned URLs is read through s3fs instead.
"""

import errno
import gc
import os

import numpy as np
import pytest

from recpipe.errors import RemoteReadError
from recpipe.io import RecordReader, RecordWriter
from recpipe.io.remote.buffers import RequestBufferPool
from recpipe.io.remote.ranges.s3 import S3FsspecRanges, S3HttpRanges, s3_ranges, status_error
from recpipe.io.remote.source import RemoteSource
from recpipe.io.remote.options import RemoteOptions
from recpipe.io.remote.retry import is_transient
from recpipe.io.sources import open_source, url_to_fs

KIB = 1 << 10


def _options(options, **recpipe):
    return {**options, "recpipe": {**options["recpipe"], **recpipe}}


def _upload(base, options, tmp_path, n=120, seed=0, name="d"):
    rng = np.random.default_rng(seed)
    payloads = [rng.bytes(2000 + int(rng.integers(0, 3000))) for _ in range(n)]
    local = f"{tmp_path}/{name}.rec"
    for url, opts in ((local, None), (f"{base}/{name}.rec", options)):
        with RecordWriter(url, storage_options=opts) as writer:
            for payload in payloads:
                writer.write(payload)
    return f"{base}/{name}.rec", local, payloads


def test_s3_is_read_by_the_http_range_reader(s3, s3_server, tmp_path):
    base, options = s3
    url, local, _ = _upload(base, options, tmp_path)
    data = open(local, "rb").read()
    with open_source(url, options) as source:
        ranges = source.ranges
        assert isinstance(ranges, S3HttpRanges) and not ranges.fell_back
        assert "X-Amz-Algorithm=AWS4-HMAC-SHA256" in ranges._url.target  # SigV4, not SigV2
        s3_server.faults()  # count from here
        spans = [(0, 1), (5, 4000), (len(data) - 10, 10), (1234, len(data) - 1234), (0, len(data))]
        for offset, length in spans:
            assert bytes(source.read(offset, length)) == data[offset:offset + length]
        stats = source.stats()
    assert stats["requests"] == len(spans) == s3_server.counters()["ranged_gets"]
    assert stats["bytes_requested"] == stats["bytes_fetched"] == sum(n for _, n in spans)
    assert stats["retries"] == 0 and ranges.presigned == 1 and ranges.resent == 0


def test_s3_ranges_option_picks_the_reader(s3, tmp_path):
    base, options = s3
    url, local, payloads = _upload(base, options, tmp_path, n=30)
    for choice, kind in (("auto", S3HttpRanges), ("http", S3HttpRanges),
                         ("fsspec", S3FsspecRanges)):
        opts = _options(options, s3_ranges=choice)
        with RecordReader(url, storage_options=opts) as reader:
            assert type(reader._source.ranges) is kind
            assert [reader[i] for i in range(len(reader))] == payloads
    with pytest.raises(ValueError, match="s3_ranges"):
        open_source(url, _options(options, s3_ranges="curl"))


def test_configurations_only_s3fs_honours_fall_back(s3, tmp_path, monkeypatch):
    import s3fs

    base, options = s3
    url, _, _ = _upload(base, options, tmp_path, n=5)
    fs, path = url_to_fs(url, {**options, "requester_pays": True})
    assert fs.req_kw  # RequestPayer goes with every s3fs request; a presigned URL has no place
    assert type(s3_ranges(fs, path, "auto")) is S3FsspecRanges
    with pytest.raises(ValueError, match="RequestPayer"):
        s3_ranges(fs, path, "http")
    s3fs.S3FileSystem.clear_instance_cache()
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # botocore would send through it
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    fs, path = url_to_fs(url, options)
    assert type(s3_ranges(fs, path, "auto")) is S3FsspecRanges
    with pytest.raises(ValueError, match="proxy"):
        s3_ranges(fs, path, "http")
    s3fs.S3FileSystem.clear_instance_cache()


def test_prefetched_records_are_views_of_one_request(s3, tmp_path):
    base, options = s3
    url, local, payloads = _upload(base, options, tmp_path, n=40)
    with RecordReader(url, storage_options=options) as reader, RecordReader(local) as near:
        source = reader._source
        ranges = source.ranges
        # its own pool, not the process's: exact counts
        ranges.buffers = RequestBufferPool(64 << 20)
        spans = [reader.span(i) for i in range(len(reader))]
        plan = reader.prefetch(range(len(reader)))
        assert plan.planned_requests == 1
        views = [source.read(start, end - start) for start, end in spans]
        assert all(isinstance(v, memoryview) for v in views)
        assert len({id(v.obj) for v in views}) == 1  # no copy per record: slices of one buffer
        assert [bytes(v) for v in views] == [near._source.read(s, e - s) for s, e in spans]
        assert (ranges.buffers_reused, ranges.buffers_new) == (0, 1)
        plan = reader.prefetch(range(len(reader)))  # the first buffer is still held by views
        assert bytes(source.read(*spans[0])) == bytes(views[0])
        assert (ranges.buffers_reused, ranges.buffers_new) == (0, 2)
        del views
        gc.collect()
        plan = reader.prefetch(range(len(reader)))  # the next "epoch" lands in a used buffer
        assert [reader[i] for i in range(len(reader))] == payloads
        assert (ranges.buffers_reused, ranges.buffers_new) == (1, 2)
        assert source.stats()["requests"] == 3


def test_buffer_pool_reuses_only_idle_buffers():
    pool = RequestBufferPool(keep_bytes=4 << 20)
    a, reused = pool.get(1000)
    assert len(a) == 1000 and pool.allocated == 1 and not reused
    a[:3] = b"abc"
    held = a[1:3]  # a slice alone keeps the buffer busy
    del a
    b, reused = pool.get(1000)
    assert pool.allocated == 2 and b.obj is not held.obj and not reused
    del held
    c, reused = pool.get(2000)  # the first buffer (1 MiB) is idle again
    assert reused and pool.reused == 1 and pool.allocated == 2
    del b, c
    d, _ = pool.get(3 << 20)  # over keep_bytes with the two 1 MiB buffers: an idle one goes
    assert len(d) == 3 << 20 and pool.held_bytes() <= 4 << 20
    e, _ = pool.get(3 << 20)  # no room left while d is held: a buffer of its own, not kept
    assert e.obj is not d.obj and all(e.obj is not x for x in pool._buffers)
    del d, e
    pool.idle_s = 0.0  # idle buffers unused since longer than idle_s go at the next get
    f, reused = pool.get(10)
    assert not reused and pool.held_bytes() == 1 << 20


def test_streamed_reads_within_a_chunk_are_views():
    mib = 1 << 20
    data = bytes(range(256)) * (8 * mib // 256)

    class Ranges:
        def fetch(self, start, end, timeout):
            return data[start:end]

        def close(self):
            pass

    opts = RemoteOptions(chunk_bytes=mib, readahead_chunks=2)
    with RemoteSource(Ranges(), "fake://x", len(data), opts) as source:
        source.read(0, mib)  # a direct read
        first = source.read(mib, mib)  # forward and >= 1 MiB: streaming starts here
        inside = [source.read(2 * mib, mib // 2), source.read(2 * mib + mib // 2, mib // 2)]
        straddling = source.read(3 * mib - 100, 200)
        assert bytes(first) == data[mib:2 * mib]
        assert b"".join(bytes(v) for v in inside) == data[2 * mib:3 * mib]
        assert straddling == data[3 * mib - 100:3 * mib + 100]
        assert isinstance(first, memoryview) and all(isinstance(v, memoryview) for v in inside)
        assert inside[0].obj is inside[1].obj  # both slices of the chunk [2, 3) MiB: no copies
        assert isinstance(straddling, bytes)  # two chunks: joined


@pytest.mark.timeout(60)
def test_keepalive_connections_are_reused_and_resent_once(s3_keepalive, s3_keepalive_server,
                                                          tmp_path):
    base, options = s3_keepalive
    url, local, payloads = _upload(base, options, tmp_path, n=60)
    server = s3_keepalive_server
    opts = _options(options, attempts=8)
    with RecordReader(url, storage_options=opts) as reader:
        ranges = reader._source.ranges
        server.faults()
        got = [reader[i] for i in range(len(reader))]  # one thread: one connection throughout
        assert got == payloads and ranges.connections == 1
        stats = reader.source_stats()
        assert stats["requests"] == len(payloads) == server.counters()["ranged_gets"]
        # the server drops connections before answering: on a kept-alive connection that looks
        # like one the server had closed while idle (sent again at once, once), on a new one
        # it is an error for the retry layer
        server.faults(pdrop=0.3, seed=3)
        before = reader.source_stats()
        got = [reader[i] for i in range(len(reader))]
        stats = {k: v - before[k] for k, v in reader.source_stats().items()}
        faults = server.counters()
    assert got == payloads
    assert ranges.resent > 0 and stats["retries"] > 0
    assert faults["drop"] == ranges.resent + stats["retries"]
    assert faults["ranged_gets"] == stats["requests"] + ranges.resent


@pytest.mark.timeout(60)
def test_expired_url_is_signed_again_then_permission_error(s3, s3_server, tmp_path):
    base, options = s3
    url, _, payloads = _upload(base, options, tmp_path, n=10)
    with RecordReader(url, storage_options=options) as reader:
        ranges = reader._source.ranges
        assert reader[0] == payloads[0] and ranges.presigned == 1
        ranges._url.made -= 10  # signed 10 s ago: a 403 may mean it expired
        s3_server.faults(p403=1.0)
        with pytest.raises(RemoteReadError) as info:
            reader[3]
        assert isinstance(info.value.__cause__, PermissionError) and info.value.attempts == 1
        assert ranges.presigned == 2 and s3_server.counters()["ranged_gets"] == 2
        assert not ranges.fell_back  # requests of ours had succeeded: a real refusal
        s3_server.faults()
        ranges.URL_REFRESH_S = 0.0  # every request signs a new URL
        assert [reader[i] for i in range(4, 7)] == payloads[4:7]
        assert ranges.presigned == 5


@pytest.mark.timeout(60)
def test_server_refusing_presigned_urls_is_read_through_s3fs(s3, s3_server, tmp_path):
    base, options = s3
    url, _, payloads = _upload(base, options, tmp_path, n=10)
    with RecordReader(url, storage_options=options) as reader:
        ranges = reader._source.ranges
        s3_server.faults(p403=1.0)
        with pytest.raises(RemoteReadError) as info:
            reader[0]  # refused before any success: s3fs is asked, and is refused too
        assert isinstance(info.value.__cause__, PermissionError)
        assert ranges.fell_back and s3_server.counters()["denied"] == 2
        s3_server.faults()
        assert [reader[i] for i in range(len(reader))] == payloads  # through s3fs from now on
        assert s3_server.counters()["ranged_gets"] == len(payloads) and ranges.connections == 1


@pytest.mark.parametrize("status, body, kind, transient", [
    (503, b"<Error><Code>SlowDown</Code><Message>Reduce</Message></Error>", OSError, True),
    (500, b"<Error><Code>InternalError</Code></Error>", OSError, True),
    (502, b"", OSError, True),
    (429, b"", OSError, True),
    (404, b"<Error><Code>NoSuchKey</Code></Error>", FileNotFoundError, False),
    (403, b"<Error><Code>AccessDenied</Code></Error>", PermissionError, False),
    (416, b"<Error><Code>InvalidRange</Code></Error>", OSError, False),
    (400, b"garbage", OSError, False),
])
def test_error_statuses_become_s3fs_exceptions(status, body, kind, transient):
    exc = status_error(status, body, "bucket/key")
    assert isinstance(exc, kind) and is_transient(exc) is transient
    assert "bucket/key" in str(exc)
    if status == 503:
        assert exc.errno == errno.EBUSY


def test_http_reader_matches_local_through_the_image_loader(s3, tmp_path):
    from recpipe.decode.loader import ImageLoader
    from recpipe.io import IRHeader, pack

    from ._helpers import jpeg

    base, options = s3
    payloads = [pack(IRHeader(0, float(i % 3), i, 0), jpeg(i, shape=(40, 48, 3)))
                for i in range(40)]
    local = f"{tmp_path}/img.rec"
    for target, opts in ((local, None), (f"{base}/img.rec", options)):
        with RecordWriter(target, storage_options=opts) as writer:
            for payload in payloads:
                writer.write(payload)
    kwargs = dict(batch_size=8, data_shape=(3, 32, 32), threads=2, seed=5, rand_mirror=True,
                  random_resized_crop=True, shuffle=False)  # lookahead on: epochs overlap
    out = {}
    for name, target, opts in (("local", local, None), ("s3", f"{base}/img.rec", options)):
        with ImageLoader(target, storage_options=opts, **kwargs) as loader:
            if name == "s3":
                assert isinstance(loader.reader._source.ranges, S3HttpRanges)
            out[name] = [[(x.copy(), y.copy()) for x, y in loader] for _ in range(2)]
    for epoch_s3, epoch_local in zip(out["s3"], out["local"]):
        for (xs, ys), (xl, yl) in zip(epoch_s3, epoch_local):
            assert np.array_equal(xs, xl) and np.array_equal(ys, yl)
    assert os.path.getsize(local) > 0
