"""The ``.idx`` and ``.lst`` text files: parsing rules of MXNet's Python reader, dmlc and im2rec."""

import uuid

import fsspec
import pytest

import recpipe
from recpipe.io.sidecars.index import (format_index_line, format_list_line, index_url_for,
                                       parse_index, parse_list, read_index, read_list)


@pytest.mark.parametrize("rec,idx", [
    ("train.rec", "train.idx"),
    ("dir.rec/data", "dir.rec/data.idx"),
    ("s3://bucket/a/b.rec", "s3://bucket/a/b.idx"),
    ("noext", "noext.idx"),
])
def test_index_url_for(rec, idx):
    assert index_url_for(rec) == idx


def test_parse_index_keeps_file_order_and_duplicates():
    keys, offsets = parse_index("3\t0\n1\t16\n3\t32\n")
    assert keys == [3, 1, 3] and offsets == [0, 16, 32]


def test_parse_index_whitespace_rules():
    # MXNet splits stripped lines on tabs (so string keys may hold spaces); dmlc accepts any
    # whitespace; blank lines are skipped
    assert parse_index("a b\t0\n\n  c\t8  \n", key_type=str) == (["a b", "c"], [0, 8])
    assert parse_index("0 0\n1   16\r\n") == ([0, 1], [0, 16])


@pytest.mark.parametrize("text,message", [
    ("0\t0\n1\n", "line 2 has 1 fields"),
    ("0\t0\tx\n", "line 1 has 3 fields"),
    ("k\t0\n", "key 'k' is not int"),
    ("0\tzero\n", "offset 'zero' is not an integer"),
    ("0\t-4\n", "negative offset -4"),
])
def test_parse_index_errors_name_file_and_line(text, message):
    with pytest.raises(recpipe.RecordFormatError) as info:
        parse_index(text, path="x.idx")
    assert message in str(info.value) and "x.idx" in str(info.value)


def test_read_index_round_trips_format_index_line(tmp_path):
    path = tmp_path / "a.idx"
    path.write_text("".join(format_index_line(k, o) for k, o in [(10, 0), (11, 64), (9, 128)]))
    assert read_index(str(path)) == ([10, 11, 9], [0, 64, 128])
    assert read_index(f"file://{path}", key_type=str) == (["10", "11", "9"], [0, 64, 128])


def test_read_index_from_memory_url():
    url = f"memory://recpipe-idx-{uuid.uuid4().hex}/a.idx"
    fs = fsspec.filesystem("memory")
    fs.pipe_file(url, b"0\t0\n1\t24\n")
    try:
        assert read_index(url) == ([0, 1], [0, 24])
    finally:
        fs.rm(url)


def test_read_index_errors(tmp_path):
    missing = str(tmp_path / "missing.idx")
    with pytest.raises(FileNotFoundError, match="missing.idx"):
        read_index(missing)
    binary = tmp_path / "bin.idx"
    binary.write_bytes(b"0\t0\n\xff\xfe\n")
    with pytest.raises(recpipe.RecordFormatError) as info:
        read_index(str(binary))
    assert info.value.offset == 4 and "bin.idx" in str(info.value)


def test_format_index_line_uses_str_of_the_key():
    assert format_index_line(7, 96) == "7\t96\n"
    assert format_index_line("img_0001", 0) == "img_0001\t0\n"


def test_list_round_trip_through_a_file(tmp_path):
    rows = [(0, [1.0], "a/x.jpg"), (5, [0.5, 2.0, 3.25], "b/y z.png"), (2, [-1.5], "c.jpg")]
    path = tmp_path / "t.lst"
    path.write_text("".join(format_list_line(*row) for row in rows))
    entries, skipped = read_list(str(path))
    assert skipped == []
    assert [(e.index, list(e.labels), e.path) for e in entries] == rows
    assert isinstance(entries[0], recpipe.ListEntry)


def test_list_skips_what_im2rec_skips(caplog):
    text = "1\t2.0\n" "1.5\t2.0\ta.jpg\n" "2\tnan-ish\tb.jpg\n" "3\t1.0\tc.jpg\n"
    entries, skipped = parse_list(text, path="t.lst")
    assert [e.index for e in entries] == [3]
    assert skipped == [1, 2, 3]
    assert "t.lst" in caplog.text  # each skipped line is logged, never printed


def test_list_labels_keep_six_decimals_like_im2rec():
    line = format_list_line(1, [1 / 3], "p.jpg")
    assert line == "1\t0.333333\tp.jpg\n"
    (entry,), _ = parse_list(line)
    assert entry.labels == (0.333333,)
