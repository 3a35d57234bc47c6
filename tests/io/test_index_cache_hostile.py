"""The index cache on a shared machine (issue 20, items 1-4): no writes through planted links,
no cache describing another index, no trust in caches others can write, no hang on a FIFO,
no clash between builders (even with the same pid)."""

import multiprocessing
import os
import stat
import subprocess
import sys

import pytest

import recpipe
from recpipe.io.sidecars import index, index_cache
from recpipe.io.reader import RecordReader

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def cache_everything(monkeypatch, tmp_path):
    monkeypatch.setenv("RECPIPE_INDEX_CACHE_MIN_BYTES", "0")
    monkeypatch.setenv("RECPIPE_CACHE_DIR", str(tmp_path / "user-cache"))


def _rec(path, keys, tag=b"r"):
    with recpipe.RecordWriter(str(path)) as writer:
        for i in range(len(keys)):
            writer.write(tag + b"%d" % i)
    # rewrite the .idx with the wanted keys (the writer numbers them 0..N-1)
    idx = str(path)[:-4] + ".idx"
    lines = open(idx).read().splitlines()
    tmp = idx + ".new"
    with open(tmp, "w") as f:
        for key, line in zip(keys, lines):
            f.write(f"{key}\t{line.split()[1]}\n")
    os.replace(tmp, idx)
    return str(path)


def _keys(rec):
    with RecordReader(rec) as reader:
        return list(reader.keys), reader.read_key(list(reader.keys)[-1])


def test_planted_links_at_the_cache_names_are_never_written_through(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious document\n")
    rec = _rec(tmp_path / "a.rec", range(40))
    idx = rec[:-4] + ".idx"
    beside = os.path.join(tmp_path, ".a.idx.recpipe-cache")  # where the cache used to live
    for name in (beside, f"{beside}.{os.getpid()}.tmp", index_cache.cache_path(idx),
                 f"{index_cache.cache_path(idx)}.{os.getpid()}.tmp"):
        os.makedirs(os.path.dirname(name), exist_ok=True)
        os.symlink(victim, name)
    for _ in range(2):
        assert _keys(rec) == (list(range(40)), b"r39")
    assert victim.read_bytes() == b"precious document\n"
    assert os.path.islink(beside)
    assert not os.path.islink(index_cache.cache_path(idx))  # replaced by a real cache
    assert index_cache.load_cached(idx) is not None


@pytest.mark.parametrize("change", ["publish-pair", "rewrite-in-place"])
def test_an_index_changed_during_its_parse_is_not_cached_as_the_new_one(tmp_path, monkeypatch,
                                                                       change):
    rec = _rec(tmp_path / "b.rec", range(30))
    idx = rec[:-4] + ".idx"
    real_parse = index._source_arrays
    changed = []

    def parse_then_change(source, url, key_type):
        table = real_parse(source, url, key_type)
        if not changed:
            changed.append(True)
            if change == "publish-pair":
                _rec(tmp_path / "b.rec", range(100, 135), tag=b"new")
            else:  # same inode, same size, new keys
                text = "9" + open(idx).read()[1:]
                with open(idx, "r+") as f:
                    f.write(text)
        return table

    monkeypatch.setattr(index, "_source_arrays", parse_then_change)
    # sums off for this open: its checksum sidecar would be the new pair's (a clear error
    # itself); what is tested here is what the index cache keeps
    with RecordReader(rec, integrity="off"):
        pass
    monkeypatch.setattr(index, "_source_arrays", real_parse)
    for _ in range(2):  # every later open sees the index now on disk
        keys, last = _keys(rec)
        if change == "publish-pair":
            assert (keys, last) == (list(range(100, 135)), b"new34")
        else:
            assert keys == index.parse_index(open(idx).read())[0]


def test_the_cache_is_bound_to_the_rec(tmp_path):
    rec = _rec(tmp_path / "c.rec", range(20))
    idx = rec[:-4] + ".idx"
    assert _keys(rec)[1] == b"r19"
    assert index_cache.load_cached(idx, rec) is not None
    os.utime(rec, ns=(1, 1))  # the .rec changed (here only its times)
    assert index_cache.load_cached(idx, rec) is None
    assert _keys(rec)[1] == b"r19"
    assert index_cache.load_cached(idx, rec) is not None


def _forge(idx):
    """Overwrite the cached offsets with those of record 0 (the fingerprint kept)."""
    path = index_cache.cache_path(idx)
    data = bytearray(open(path, "rb").read())
    count = int.from_bytes(data[8:16], "little")
    header = len(data) - 8 * count * (2 if data[16] & 1 else 1)
    first = data[header:header + 8]
    for i in range(count):
        data[header + 8 * i:header + 8 * i + 8] = first
    with open(path, "r+b") as f:
        f.write(data)
    return path


@pytest.mark.parametrize("how", ["other-owner", "world-writable", "shared-folder"])
def test_a_cache_others_can_write_is_not_trusted(tmp_path, how):
    rec = _rec(tmp_path / "d.rec", [5, 4, 3, 2, 1, 0])
    idx = rec[:-4] + ".idx"
    _keys(rec)
    path = _forge(idx)
    if how == "other-owner":
        if os.geteuid() != 0:
            pytest.skip("making a file owned by another user needs root")
        os.chown(path, 12345, 12345)
    elif how == "world-writable":
        os.chmod(path, 0o666)
    else:
        os.chmod(os.path.dirname(path), 0o777)
    with RecordReader(rec) as reader:
        assert [reader.read_key(k) for k in (5, 0)] == [b"r0", b"r5"]  # not record 0 for all


def test_a_fifo_at_the_cache_name_does_not_hang(tmp_path):
    rec = _rec(tmp_path / "e.rec", range(10))
    cache = index_cache.cache_path(rec[:-4] + ".idx")
    os.makedirs(os.path.dirname(cache), mode=0o700)
    os.mkfifo(cache)
    code = ("from recpipe.io.reader import RecordReader\n"
            f"with RecordReader({rec!r}) as r: print(len(r), r.read_key(9))\n"
            f"with RecordReader({rec!r}) as r: print(len(r), r.read_key(9))\n")
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    try:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("opening a dataset with a FIFO at its cache name hung")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["10 b'r9'", "10 b'r9'"]
    assert stat.S_ISREG(os.lstat(cache).st_mode)  # the FIFO was replaced by a cache


_BUILT = 60000


def _builder(rec, rounds, report):
    os.getpid = lambda: 1  # one trainer per container: every builder is pid 1
    cache = index_cache.cache_path(rec[:-4] + ".idx")
    outcome = "ok"
    try:
        for i in range(rounds):
            if i % 2 == 0:
                try:
                    os.unlink(cache)
                except FileNotFoundError:
                    pass
            with RecordReader(rec) as reader:
                keys = reader.keys
                assert len(keys) == _BUILT and keys[0] == _BUILT - 1 and keys[-1] == 0
                assert reader.read_key(0) == b"r%d" % (_BUILT - 1)
                assert reader.read_key(_BUILT - 1) == b"r0"
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        outcome = repr(e)
    with open(report, "w") as f:
        f.write(outcome)
    os._exit(0)


def test_concurrent_builders_with_the_same_pid_never_clash(tmp_path):
    rec = _rec(tmp_path / "f.rec", range(_BUILT - 1, -1, -1))
    context = multiprocessing.get_context("fork")
    reports = [str(tmp_path / f"builder{n}.txt") for n in range(6)]
    workers = [context.Process(target=_builder, args=(rec, 12, report)) for report in reports]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [worker.exitcode for worker in workers] == [0] * len(workers)  # no SIGBUS
    assert [open(report).read() for report in reports] == ["ok"] * len(workers)
    folder = os.path.dirname(index_cache.cache_path(rec[:-4] + ".idx"))
    assert [name for name in os.listdir(folder) if name.endswith(".tmp")] == []


def test_min_bytes_accepts_units_and_names_the_variable(monkeypatch):
    for text, value in [("4M", 4 << 20), ("4MiB", 4 << 20), ("4MB", 4 << 20), ("4096", 4096),
                        ("1k", 1024), ("0", 0)]:
        monkeypatch.setenv("RECPIPE_INDEX_CACHE_MIN_BYTES", text)
        assert index_cache.min_cached_bytes() == value
    monkeypatch.setenv("RECPIPE_INDEX_CACHE_MIN_BYTES", "four")
    with pytest.raises(ValueError, match="RECPIPE_INDEX_CACHE_MIN_BYTES"):
        index_cache.min_cached_bytes()


def test_keys_outside_int64_are_not_clamped(tmp_path, monkeypatch):
    monkeypatch.setenv("RECPIPE_INDEX_CACHE_MIN_BYTES", "4M")  # parsed, not cached
    keys = [2 ** 63, -2 ** 63 - 1, 5, 2 ** 70]
    rec = _rec(tmp_path / "g.rec", keys)
    idx = rec[:-4] + ".idx"
    with RecordReader(rec) as reader:
        assert list(reader.keys) == keys
        assert [reader.read_key(k) for k in keys] == [b"r0", b"r1", b"r2", b"r3"]
        for absent in (2 ** 63 - 1, -2 ** 63, 6):
            with pytest.raises(KeyError):
                reader.read_key(absent)
    text_reader = recpipe.mx.recordio.MXIndexedRecordIO(idx, rec, "r")
    assert text_reader.keys == keys and text_reader.read_idx(2 ** 63) == b"r0"
    text_reader.close()
    from recpipe.io.sidecars.index import parse_idx
    assert parse_idx(b"9223372036854775808\t0\n").keys == [2 ** 63]  # a list: never clamped
    assert list(parse_idx(b"3\t0\n4\t8\n").keys) == [3, 4]
