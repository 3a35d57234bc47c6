"""RecordWriter and RecordReader: round trips, access paths, fsspec URLs, atomicity, fork safety."""

import hashlib
import os
import uuid

import fsspec
import numpy as np
import pytest
from fsspec.implementations.memory import MemoryFileSystem
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recpipe
from recpipe.io import atomic
from recpipe.io.format.framing import HEAD_SIZE, MAGIC_BYTES, frame
from recpipe.io.format.scan import DEFAULT_BLOCK_SIZE
from recpipe.io.sources import LocalSource

from ._helpers import framed_file


def write_all(url, payloads, keys=None, **kwargs):
    with recpipe.RecordWriter(url, **kwargs) as writer:
        offsets = [writer.write(p, None if keys is None else k)
                   for p, k in zip(payloads, keys or payloads)]
    return offsets


def all_access_paths(reader, keys):
    """Payloads by position, by key and by iteration."""
    by_position = [reader[i] for i in range(len(reader))]
    by_key = [reader.read_key(k) for k in keys]
    return by_position, by_key, list(reader)


with_magic = st.binary(max_size=64).flatmap(
    lambda b: st.integers(0, len(b)).map(lambda i: b[:i] + MAGIC_BYTES + b[i:]))
payload_lists = st.lists(with_magic | st.binary(max_size=64), max_size=25)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(payloads=payload_lists)
def test_every_access_path_returns_what_was_written(tmp_path, payloads):
    name = uuid.uuid4().hex
    url = str(tmp_path / f"{name}.rec")
    offsets = write_all(url, payloads)
    data, expected_offsets = framed_file(payloads)
    assert offsets == expected_offsets
    with open(url, "rb") as f:
        assert f.read() == data
    keys = list(range(len(payloads)))
    with recpipe.RecordReader(url) as indexed, recpipe.RecordReader(url,
                                                                    index_url=False) as scanned:
        assert indexed.index_url is not None and scanned.index_url is None
        assert indexed.keys == scanned.keys == keys
        assert indexed.offsets == scanned.offsets == expected_offsets
        for reader in (indexed, scanned):
            for got in all_access_paths(reader, keys):
                assert got == payloads


def test_mxnet_test_recordio_port(tmp_path):
    # mxnet tests/python/unittest/test_recordio.py::test_recordio: 255 records chr(i), in order
    url = str(tmp_path / "seq.rec")
    write_all(url, [chr(i).encode() for i in range(255)], index_url=False)
    assert not (tmp_path / "seq.idx").exists()
    with recpipe.RecordReader(url) as reader:
        assert list(reader) == [chr(i).encode() for i in range(255)]


def test_mxnet_test_indexed_recordio_port(tmp_path):
    # test_indexed_recordio: write_idx(i, chr(i)); sorted keys == range(255); random-order reads
    url = str(tmp_path / "idx.rec")
    payloads = [chr(i).encode() for i in range(255)]
    write_all(url, payloads, keys=list(range(255)))
    order = np.random.default_rng(3).permutation(255)
    with recpipe.RecordReader(url) as reader:
        assert sorted(reader.keys) == list(range(255))
        for i in order:
            assert reader.read_key(int(i)) == chr(i).encode()


def test_string_keys_and_key_order(tmp_path):
    url = str(tmp_path / "s.rec")
    write_all(url, [b"a", b"b", b"c"], keys=["z", "y", "x"])
    assert (tmp_path / "s.idx").read_text().splitlines()[0] == "z\t0"
    with recpipe.RecordReader(url, key_type=str) as reader:
        assert reader.keys == ["z", "y", "x"]
        assert reader.read_key("x") == b"c"
        with pytest.raises(KeyError, match="'w'"):
            reader.read_key("w")


def test_index_out_of_file_order_and_duplicate_keys(tmp_path):
    payloads = [b"zero", b"one", b"two"]
    data, offsets = framed_file(payloads)
    (tmp_path / "r.rec").write_bytes(data)
    # reversed order, and key 7 twice: the last entry wins, as in MXNet's dict
    (tmp_path / "r.idx").write_text(f"7\t{offsets[2]}\n5\t{offsets[1]}\n7\t{offsets[0]}\n")
    with recpipe.RecordReader(str(tmp_path / "r.rec")) as reader:
        assert reader.keys == [7, 5, 7]
        assert list(reader) == [b"two", b"one", b"zero"]
        assert reader.read_key(7) == b"zero"
        assert reader[-1] == b"zero"
        assert reader[np.int64(1)] == b"one"
        with pytest.raises(IndexError):
            reader[3]


def test_partial_index_reads_only_listed_records(tmp_path):
    payloads = [bytes([i]) * 100 for i in range(10)]
    data, offsets = framed_file(payloads)
    (tmp_path / "p.rec").write_bytes(data)
    (tmp_path / "p.idx").write_text(f"0\t{offsets[2]}\n1\t{offsets[7]}\n")
    with recpipe.RecordReader(str(tmp_path / "p.rec")) as reader:
        assert len(reader) == 2
        assert list(reader) == [payloads[2], payloads[7]]
        assert reader.span(0) == (offsets[2], offsets[7])


def test_empty_file(tmp_path):
    url = str(tmp_path / "empty.rec")
    write_all(url, [])
    assert os.path.getsize(url) == 0 and (tmp_path / "empty.idx").read_text() == ""
    for index_url in (None, False):
        with recpipe.RecordReader(url, index_url=index_url) as reader:
            assert len(reader) == 0 and list(reader) == []


def test_memory_url_round_trip():
    root = f"memory://recpipe-test-{uuid.uuid4().hex}"
    payloads = [b"alpha", MAGIC_BYTES * 3, b""]
    try:
        write_all(f"{root}/m.rec", payloads)
        fs = fsspec.filesystem("memory")
        assert fs.cat_file(f"{root}/m.rec") == framed_file(payloads)[0]
        assert sorted(p.rsplit("/", 1)[1] for p in fs.ls(root, detail=False)) == ["m.idx", "m.rec",
                                                                                  "m.sums"]
        with recpipe.RecordReader(f"{root}/m.rec") as reader:
            assert reader.index_url == f"{root}/m.idx"
            assert list(reader) == payloads and reader[1] == MAGIC_BYTES * 3
    finally:
        fsspec.filesystem("memory").rm(root, recursive=True)


def test_file_url_round_trip(tmp_path):
    url = f"file://{tmp_path}/f.rec"
    write_all(url, [b"x" * 10, b"y"])
    assert (tmp_path / "f.rec").read_bytes() == framed_file([b"x" * 10, b"y"])[0]
    assert (tmp_path / "f.idx").read_text() == "0\t0\n1\t20\n"
    with recpipe.RecordReader(url) as reader:
        assert list(reader) == [b"x" * 10, b"y"]


class RecordingFS(MemoryFileSystem):
    """A memory filesystem that remembers the storage options it was created with."""

    protocol = "recpipetestfs"
    seen = []

    def __init__(self, *args, **storage_options):
        super().__init__(*args, **storage_options)
        RecordingFS.seen.append(storage_options)


def test_storage_options_reach_the_filesystem():
    fsspec.register_implementation("recpipetestfs", RecordingFS, clobber=True)
    token = uuid.uuid4().hex
    options = {"token": token}
    url = f"recpipetestfs://{token}/o.rec"
    try:
        write_all(url, [b"payload"], storage_options=options)
        assert options in RecordingFS.seen
        RecordingFS.seen.clear()
        RecordingFS.clear_instance_cache()  # the reader must create its own instance
        with recpipe.RecordReader(url, storage_options=options) as reader:
            assert list(reader) == [b"payload"]
        assert options in RecordingFS.seen
    finally:
        for name in [name for name in MemoryFileSystem.store if token in name]:
            del MemoryFileSystem.store[name]


def test_writer_publishes_nothing_when_the_body_raises(tmp_path):
    url = str(tmp_path / "out" / "w.rec")
    with pytest.raises(RuntimeError):
        with recpipe.RecordWriter(url) as writer:
            writer.write(b"a record")
            raise RuntimeError("boom")
    assert os.listdir(tmp_path / "out") == []  # no final names and no temporary leftovers


def test_writer_publishes_rec_before_idx(tmp_path, monkeypatch):
    rec, idx = tmp_path / "o.rec", tmp_path / "o.idx"
    published = []
    real_replace = os.replace

    def replace(src, dst):
        published.append((os.path.basename(dst), rec.exists(), idx.exists()))
        real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "replace", replace)
    write_all(str(rec), [b"one", b"two"])
    # the sidecar comes last: never a .sums beside a .rec it does not describe
    assert published == [("o.rec", False, False), ("o.idx", True, False), ("o.sums", True, True)]


def test_writer_temporary_files_are_hidden_until_close(tmp_path):
    writer = recpipe.RecordWriter(str(tmp_path / "t.rec"))
    writer.write(b"data")
    names = os.listdir(tmp_path)
    assert len(names) == 3 and all(n.startswith(".") and n.endswith(".tmp") for n in names)
    writer.close()
    assert sorted(os.listdir(tmp_path)) == ["t.idx", "t.rec", "t.sums"]


def test_too_large_payload_writes_nothing(tmp_path):
    url = str(tmp_path / "big.rec")
    with recpipe.RecordWriter(url) as writer:
        with pytest.raises(recpipe.RecordTooLargeError):
            writer.write(np.zeros(1 << 29, dtype=np.uint8))  # calloc'ed: no memory touched
        assert writer.offset == 0 and writer.count == 0
        writer.write(b"after")
    assert (tmp_path / "big.rec").read_bytes() == frame(b"after")
    assert (tmp_path / "big.idx").read_text() == "0\t0\n"


def test_bad_key_writes_nothing(tmp_path):
    url = str(tmp_path / "k.rec")
    with recpipe.RecordWriter(url) as writer:
        with pytest.raises(ValueError, match="index key"):
            writer.write(b"x", key="two\twords")
        writer.write(b"y", key="ok")
    assert (tmp_path / "k.rec").read_bytes() == frame(b"y")
    assert (tmp_path / "k.idx").read_text() == "ok\t0\n"


@pytest.mark.parametrize("make_url", [
    lambda tmp: str(tmp / "missing.rec"),
    lambda tmp: f"file://{tmp}/missing.rec",
    lambda tmp: f"memory://recpipe-missing-{uuid.uuid4().hex}/missing.rec",
])
def test_missing_rec_names_the_url(tmp_path, make_url):
    url = make_url(tmp_path)
    with pytest.raises(FileNotFoundError) as info:
        recpipe.RecordReader(url)
    assert url in str(info.value)


def test_missing_explicit_index_names_the_url(tmp_path):
    url = str(tmp_path / "a.rec")
    write_all(url, [b"x"], index_url=False)
    missing = str(tmp_path / "nope.idx")
    with pytest.raises(FileNotFoundError) as info:
        recpipe.RecordReader(url, index_url=missing)
    assert missing in str(info.value)


def digest(payloads):
    return hashlib.sha256(b"".join(hashlib.sha256(p).digest() for p in payloads)).hexdigest()


def test_reader_works_in_a_forked_child(tmp_path):
    payloads = [os.urandom(n) for n in range(0, 3000, 97)]
    url = str(tmp_path / "fork.rec")
    write_all(url, payloads)
    with recpipe.RecordReader(url) as reader:
        assert reader[0] == payloads[0]  # the parent's descriptor is open before the fork
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: read everything through the inherited reader, report a digest
            status = 1
            try:
                os.close(read_fd)
                os.write(write_fd, digest([reader[i] for i in range(len(reader))]).encode())
                reader.close()
                status = 0
            finally:
                os._exit(status)
        os.close(write_fd)
        with os.fdopen(read_fd, "rb") as pipe:
            child_digest = pipe.read().decode()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert child_digest == digest(payloads)
        assert list(reader) == payloads  # the child's close did not affect the parent


def test_local_source_reopens_after_fork_and_refuses_reads_when_closed(tmp_path):
    path = tmp_path / "s.bin"
    path.write_bytes(bytes(range(256)))
    source = LocalSource(str(path))
    parent_fd = source._fd
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        ok = 1
        try:
            data = source.read(10, 5)
            ok = 0 if data == bytes(range(10, 15)) and source._fd != parent_fd else 1
        finally:
            os.write(write_fd, bytes([ok]))
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        assert pipe.read() == b"\0"
    os.waitpid(pid, 0)
    assert source.read(250, 100) == bytes(range(250, 256))
    source.close()
    with pytest.raises(ValueError, match="closed"):
        source.read(0, 1)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payloads=payload_lists.filter(len))
def test_windows_hold_every_record_as_the_file_has_it(tmp_path, payloads):
    """``windows`` (what native readers decode a remote run from): every record's span in the
    file, framed records in parts included, is held byte-equal by a window; an empty record and
    one over a read block are in none (``read`` returns them)."""
    url = f"memory://windows-{uuid.uuid4().hex}/x.rec"
    write_all(url, payloads)
    with fsspec.open(url, "rb") as f:
        file = f.read()
    with recpipe.RecordReader(url) as reader:
        positions = np.arange(len(reader))[::-1]  # any order
        windows, starts, ends = reader.windows(positions)
        assert starts.dtype == ends.dtype == np.int64 and len(starts) == len(positions)
        for start, end in zip(starts.tolist(), ends.tolist()):
            held = [bytes(b[start - base:end - base]) for b, base in windows
                    if base <= start and end <= base + len(b)]
            readable = HEAD_SIZE < end - start <= DEFAULT_BLOCK_SIZE
            assert held[:1] == ([file[start:end]] if readable else [])


def test_windows_leave_out_a_record_that_cannot_be_read(tmp_path):
    """A record whose read fails (the file shorter than its index says) is in no window: the
    native reader leaves it to ``read``, which raises its precise error."""
    url = str(tmp_path / "d.rec")
    write_all(url, [b"a" * 10, b"b" * 20, b"c" * 30])
    with recpipe.RecordReader(url) as reader:
        third = reader.span(2)[0]
    with recpipe.RecordReader(url, integrity="off") as reader:
        os.truncate(url, third + 8)  # record 2 cut short after the reader opened
        windows, starts, ends = reader.windows([0, 1, 2])
        assert [base for _, base in windows] == starts[:2].tolist()
        with pytest.raises(recpipe.RecordFormatError) as info:
            reader.read(2)
        assert "truncated while open" in str(info.value)
