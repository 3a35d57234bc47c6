"""One conformance suite for the writer and the reader on every store: file://, memory://, s3://.

Each store writes with ``RecordWriter`` and reads back with ``RecordReader``; results must be
byte-identical to the payloads written (and to a local read of the same bytes).
"""

import uuid

import fsspec
import numpy as np
import pytest

from recpipe.io import RecordReader, RecordWriter, read_list
from recpipe.io.sources import open_source, url_to_fs

from ._helpers import jpeg


def _payloads(n=40, seed=0):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 20000, n)
    out = [rng.bytes(int(s)) for s in sizes]
    out[3] = b"\x0a\x23\xd7\xce" * 5 + b"tail"  # magic inside: a multi-part record
    out[7] = jpeg(7)
    return out


@pytest.fixture(params=["file", "memory", "s3"])
def store(request, tmp_path):
    """``(base url, storage_options)`` of an empty folder on each store."""
    if request.param == "file":
        yield f"file://{tmp_path}", None
    elif request.param == "memory":
        base = f"memory://conf-{uuid.uuid4().hex[:8]}"
        yield base, None
        fs = fsspec.filesystem("memory")
        if fs.exists(base):
            fs.rm(base, recursive=True)
    else:
        yield request.getfixturevalue("s3")


def _write(base, options, payloads, name="data"):
    url = f"{base}/{name}.rec"
    with RecordWriter(url, storage_options=options) as writer:
        for i, payload in enumerate(payloads):
            writer.write(payload, key=i * 10)
    return url


def test_write_then_random_and_sequential_reads(store):
    base, options = store
    payloads = _payloads()
    url = _write(base, options, payloads)
    with RecordReader(url, storage_options=options) as reader:
        assert reader.index_url == f"{base}/data.idx"
        assert len(reader) == len(payloads)
        assert list(reader) == payloads
        for i in (5, 0, 39, 3, 7):
            assert reader[i] == payloads[i]
        assert reader.read_key(70) == payloads[7]
        assert reader.keys == [i * 10 for i in range(len(payloads))]


def test_without_index_scans_the_file(store):
    base, options = store
    payloads = _payloads(12, seed=1)
    url = f"{base}/noidx.rec"
    with RecordWriter(url, index_url=False, storage_options=options) as writer:
        for payload in payloads:
            writer.write(payload)
    fs, path = url_to_fs(f"{base}/noidx.idx", options)
    assert not fs.exists(path)
    with RecordReader(url, storage_options=options) as reader:
        assert reader.index_url is None
        assert [reader[i] for i in range(len(reader))] == payloads


def test_prefetched_reads_match(store):
    base, options = store
    payloads = _payloads(30, seed=2)
    url = _write(base, options, payloads)
    order = list(np.random.default_rng(3).permutation(len(payloads))) + [4, 4]
    with RecordReader(url, storage_options=options) as reader:
        plan = reader.prefetch(order)
        assert [reader[int(p)] for p in order] == [payloads[p] for p in order]
        plan.cancel()


def test_failed_write_publishes_nothing(store):
    base, options = store
    with pytest.raises(RuntimeError, match="stop"):
        with RecordWriter(f"{base}/broken.rec", storage_options=options) as writer:
            writer.write(b"x" * 100)
            raise RuntimeError("stop")
    fs, path = url_to_fs(base, options)
    names = [p.rsplit("/", 1)[-1] for p in fs.ls(path, detail=False)] if fs.exists(path) else []
    assert "broken.rec" not in names and "broken.idx" not in names
    assert not [n for n in names if n.endswith(".tmp")]


def test_missing_file_names_the_url(store):
    base, options = store
    with pytest.raises(FileNotFoundError, match="nothing.rec"):
        RecordReader(f"{base}/nothing.rec", storage_options=options)


def test_list_file_is_read_through_fsspec(store):
    base, options = store
    fs, path = url_to_fs(f"{base}/x.lst", options)
    fs.pipe_file(path, b"0\t1.000000\ta/b.jpg\n1\t2.000000\tc.jpg\n")
    entries, skipped = read_list(f"{base}/x.lst", options)
    assert [e.path for e in entries] == ["a/b.jpg", "c.jpg"] and skipped == []


def test_source_matches_a_local_read(store, tmp_path):
    base, options = store
    payloads = _payloads(25, seed=4)
    url = _write(base, options, payloads)
    local = _write(f"file://{tmp_path}/local", None, payloads)
    with open_source(url, options) as remote, open_source(local) as near:
        assert remote.size == near.size
        for offset, length in [(0, 10), (3, 5000), (near.size - 7, 7), (100, 1 << 20)]:
            assert bytes(remote.read(offset, length)) == bytes(near.read(offset, length))
