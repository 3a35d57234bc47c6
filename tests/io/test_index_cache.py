"""The index as arrays and its memory-mapped cache: used, invalidated when the .idx changes,
rebuilt when corrupt, and always equal to the text parse."""

import logging
import os

import numpy as np
import pytest

import recpipe
from recpipe.io.sidecars import index_cache
from recpipe.io.sidecars.index import parse_index
from recpipe.io.sidecars.index import parse_idx
from recpipe.io.sidecars.index_table import IndexTable
from recpipe.io.reader import RecordReader


@pytest.fixture(autouse=True)
def cache_everything(monkeypatch, tmp_path):
    monkeypatch.setenv("RECPIPE_INDEX_CACHE_MIN_BYTES", "0")
    monkeypatch.setenv("RECPIPE_CACHE_DIR", str(tmp_path / "user-cache"))


def _rec(path, keys):
    with recpipe.RecordWriter(str(path)) as writer:
        for i, key in enumerate(keys):
            writer.write(b"r%d" % i * (i % 5 + 1), key=key)
    return str(path)


def _text_parse(idx, key_type=int):
    with open(idx) as f:
        return parse_index(f.read(), key_type=key_type)


@pytest.mark.parametrize("keys", [list(range(300)), [5, 3, 9, 3, 100, 7],
                                  list(range(200)) + [1000, 1001, 5]])
def test_arrays_equal_the_text_parse_and_lookups_agree(tmp_path, keys):
    rec = _rec(tmp_path / "a.rec", keys)
    expected_keys, expected_offsets = _text_parse(rec[:-4] + ".idx")
    for _ in range(2):  # parsed, then from the cache
        with RecordReader(rec) as reader:
            assert list(reader.keys) == expected_keys and reader.keys == expected_keys
            assert list(reader.offsets) == expected_offsets
            for key in set(keys):
                last = max(i for i, k in enumerate(expected_keys) if k == key)
                assert reader.position_of_key(key) == last
            with pytest.raises(KeyError):
                reader.position_of_key(99999)
            assert reader.table.identity == (keys == list(range(len(keys))))


def test_the_fast_parse_gives_the_text_parses_table():
    text = "".join(f"{k}\t{k * 8}\n" for k in [0, 1, 2, 3, 9, 10, 4])
    table = parse_idx(text.encode())
    assert list(table.keys) == [0, 1, 2, 3, 9, 10, 4]
    assert list(table.offsets) == [k * 8 for k in [0, 1, 2, 3, 9, 10, 4]]
    assert parse_idx(b"0\t8\n1\t16\n").identity
    for junk in (b"0\t8\n\n1\t16\n", b"0 8\n", b" 1\t8\n"):  # the text parse decides
        assert list(parse_idx(junk).offsets) == parse_index(junk.decode())[1]


def test_the_cache_is_used_then_invalidated_when_the_idx_changes(tmp_path, caplog):
    rec = _rec(tmp_path / "b.rec", range(50))
    idx = rec[:-4] + ".idx"
    with RecordReader(rec):
        pass
    cache = index_cache.cache_path(idx)
    assert os.path.exists(cache) and cache.startswith(str(tmp_path / "user-cache"))
    table = index_cache.load_cached(idx)
    assert not table.offsets.flags.writeable  # a read-only mapping of the cache file, shared
    assert not table.offsets.flags.owndata
    _rec(tmp_path / "b.rec", [7, 3, 1])  # a new pair under the same names
    with caplog.at_level(logging.INFO, logger="recpipe.io.sidecars.index_cache"):
        with RecordReader(rec) as reader:
            assert list(reader.keys) == [7, 3, 1]
    assert "stale" in caplog.text
    assert list(index_cache.load_cached(idx).keys) == [7, 3, 1]  # rebuilt


@pytest.mark.parametrize("damage", ["truncate", "magic", "garbage"])
def test_a_corrupt_cache_is_ignored_and_rebuilt(tmp_path, caplog, damage):
    rec = _rec(tmp_path / "c.rec", [4, 2, 8, 6])
    idx = rec[:-4] + ".idx"
    with RecordReader(rec):
        pass
    cache = index_cache.cache_path(idx)
    data = bytearray(open(cache, "rb").read())
    if damage == "truncate":
        data = data[:len(data) - 9]
    elif damage == "magic":
        data[0:4] = b"JUNK"
    else:
        data = bytearray(os.urandom(len(data)))
    open(cache, "wb").write(data)
    with caplog.at_level(logging.INFO, logger="recpipe.io.sidecars.index_cache"):
        with RecordReader(rec) as reader:
            assert list(reader.keys) == [4, 2, 8, 6]
            assert reader.read_key(8) == b"r2" * 3
    assert "rebuilding" in caplog.text
    assert list(index_cache.load_cached(idx).keys) == [4, 2, 8, 6]


def test_a_read_only_folder_caches_in_the_user_cache_dir(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    rec = _rec(folder / "d.rec", range(20))
    os.chmod(folder, 0o555)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("running as a user that can write anywhere (root)")
        with RecordReader(rec):
            pass
        assert index_cache.cache_path(rec[:-4] + ".idx").startswith(str(tmp_path / "user-cache"))
    finally:
        os.chmod(folder, 0o755)


def test_the_cache_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("RECPIPE_INDEX_CACHE", "0")
    rec = _rec(tmp_path / "e.rec", range(10))
    with RecordReader(rec):
        pass
    assert not os.path.exists(index_cache.cache_path(rec[:-4] + ".idx"))


def test_plans_from_cached_and_parsed_indexes_are_identical(tmp_path):
    from recpipe.decode.loader import ImageLoader

    import cv2

    rec = str(tmp_path / "f.rec")
    jpeg = cv2.imencode(".jpg", np.full((8, 8, 3), 50, np.uint8))[1].tobytes()
    with recpipe.RecordWriter(rec) as writer:
        for i in range(37):
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), jpeg))
    plans = []
    for _ in range(2):
        with ImageLoader(rec, 5, (3, 8, 8), shuffle=True, seed=4, num_parts=3, part_index=1,
                         threads=1) as loader:
            plans.append([p.positions.tolist() for p in loader._batches(2)])
    assert plans[0] == plans[1] and len(plans[0]) == 3
    assert isinstance(IndexTable(np.arange(3)).keys, range)
