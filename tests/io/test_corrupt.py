"""Corrupt files give a RecordFormatError naming the file, the byte offset and the record."""

import struct
import tracemalloc

import pytest

import recpipe
from recpipe.io.format.framing import HEAD_SIZE, MAGIC, MAGIC_BYTES
from recpipe.io.format.scan import find_next_head, iter_records
from recpipe.io.sources import BytesSource

from ._helpers import framed_file, index_text, write_rec

PAYLOADS = [b"first record", b"second record!", b"third", b"fourth and last"]


def lrec(cflag, length):
    return struct.pack("<I", cflag << 29 | length)


def assert_names(error, path, offset, record):
    """The error says where: attributes and message both carry the file, offset and record."""
    assert isinstance(error, ValueError)
    assert (error.path, error.offset, error.record) == (str(path), offset, record)
    message = str(error)
    assert str(path) in message and f"byte offset {offset}" in message
    assert f"record {record}" in message


def reader_errors(rec, idx=None, position=None):
    """The RecordFormatError raised when opening ``rec`` and reading record ``position``."""
    with pytest.raises(recpipe.RecordFormatError) as info:
        with recpipe.RecordReader(str(rec), index_url=str(idx) if idx else False) as reader:
            if position is None:
                list(reader)
            else:
                reader[position]
    return info.value


@pytest.fixture
def good(tmp_path):
    return write_rec(tmp_path, PAYLOADS)


def patch(path, offset, data):
    blob = bytearray(path.read_bytes())
    blob[offset:offset + len(data)] = data
    path.write_bytes(bytes(blob))


def test_bad_magic(good):
    rec, idx, offsets = good
    patch(rec, offsets[1], b"JUNK")
    error = reader_errors(rec)  # scanning without an index stops at record 1
    assert_names(error, rec, offsets[1], 1)
    assert "bad magic" in error.reason
    assert_names(reader_errors(rec, idx, position=1), rec, offsets[1], 1)
    with recpipe.RecordReader(str(rec), index_url=str(idx)) as reader:
        assert reader[2] == PAYLOADS[2]  # the damage stays local with an index


def test_truncated_head(good):
    rec, idx, offsets = good
    rec.write_bytes(rec.read_bytes()[:offsets[3] + 4])
    error = reader_errors(rec)
    assert_names(error, rec, offsets[3], 3)
    assert "8-byte part head" in error.reason
    assert_names(reader_errors(rec, idx, position=3), rec, offsets[3], 3)


def test_truncated_body(good):
    rec, idx, offsets = good
    rec.write_bytes(rec.read_bytes()[:offsets[3] + HEAD_SIZE + 5])
    error = reader_errors(rec)
    assert_names(error, rec, offsets[3], 3)
    assert "truncated record" in error.reason and "its bytes are missing" in error.reason
    assert_names(reader_errors(rec, idx, position=3), rec, offsets[3], 3)


def test_missing_padding_is_truncation(tmp_path):
    # dmlc reads round_up4(length) bytes and fails on a short read; so do we
    rec, _, _ = write_rec(tmp_path, [b"abc"], with_index=False)
    rec.write_bytes(rec.read_bytes()[:-1])
    error = reader_errors(rec)
    assert_names(error, rec, 0, 0)
    assert "zero padding" in error.reason


def test_huge_length_field_fails_fast_without_allocating(tmp_path):
    rec = tmp_path / "huge.rec"
    rec.write_bytes(MAGIC_BYTES + lrec(0, (1 << 29) - 1) + b"\0" * 92)  # a 100-byte file
    assert rec.stat().st_size == 100
    tracemalloc.start()
    try:
        with pytest.raises(recpipe.RecordFormatError) as info:
            recpipe.RecordReader(str(rec), index_url=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert_names(info.value, rec, 0, 0)
    assert str((1 << 29) - 1) in info.value.reason
    assert peak < 1 << 20


def test_huge_length_field_through_an_index(tmp_path):
    rec, idx, offsets = write_rec(tmp_path, PAYLOADS)
    patch(rec, offsets[2] + 4, lrec(0, (1 << 29) - 1))
    tracemalloc.start()
    try:
        error = reader_errors(rec, idx, position=2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert_names(error, rec, offsets[2], 2)
    assert peak < 1 << 20


def test_index_offset_past_the_end(good):
    rec, idx, offsets = good
    size = rec.stat().st_size
    idx.write_text(index_text(range(3), [offsets[0], size + 400, offsets[2]]))
    with pytest.raises(recpipe.RecordFormatError) as info:
        recpipe.RecordReader(str(rec), index_url=str(idx))
    assert_names(info.value, rec, size + 400, 1)
    assert "past the end" in str(info.value) and str(idx) in str(info.value)


def test_index_offset_not_aligned(good):
    rec, idx, offsets = good
    idx.write_text(index_text(range(2), [offsets[0], offsets[1] + 2]))
    with pytest.raises(recpipe.RecordFormatError) as info:
        recpipe.RecordReader(str(rec), index_url=str(idx))
    assert_names(info.value, rec, offsets[1] + 2, 1)
    assert "aligned" in str(info.value)


def test_index_offset_inside_a_record(good):
    rec, idx, offsets = good
    middle = offsets[1] + HEAD_SIZE + 4  # aligned, inside the payload of record 1
    idx.write_text(index_text(range(3), [offsets[0], middle, offsets[2]]))
    error = reader_errors(rec, idx, position=1)
    assert_names(error, rec, middle, 1)
    assert "bad magic" in error.reason
    assert_names(reader_errors(rec, idx), rec, middle, 1)  # iteration notices it too


def test_index_that_belongs_to_another_file(tmp_path):
    rec, _, _ = write_rec(tmp_path, PAYLOADS, name="data")
    _, other_idx, other_offsets = write_rec(tmp_path, [b"x" * 20] * 3, name="other")
    error = reader_errors(rec, other_idx, position=1)
    assert_names(error, rec, other_offsets[1], 1)


def test_index_entries_overlapping_a_record(tmp_path):
    # the first entry's record runs over the second entry: the index does not match the file
    rec, idx, offsets = write_rec(tmp_path, [b"a" * 64, b"b"])
    idx.write_text(index_text(range(2), [0, 16]))
    patch(rec, 16, MAGIC_BYTES + lrec(0, 4))  # make offset 16 look like a head
    error = reader_errors(rec, idx, position=0)
    assert_names(error, rec, 0, 0)
    assert "index does not match" in error.reason


def multipart_payload():
    payload = b"AAAA" + MAGIC_BYTES + b"BBBBBBBB" + MAGIC_BYTES + b"CC"
    data, _ = framed_file([payload])
    return payload, data


def test_multipart_record_interrupted(tmp_path):
    payload, data = multipart_payload()
    assert len(data) == 40  # parts at 0 (cflag 1, 4 bytes), 12 (cflag 2, 8), 28 (cflag 3, 2)
    rec = tmp_path / "multi.rec"
    rec.write_bytes(data[:12] + framed_file([b"intruder"])[0] + data[12:])
    error = reader_errors(rec)
    assert_names(error, rec, 12, 0)  # the continuation of record 0 is missing at offset 12
    assert "interrupted" in error.reason and "cflag 0" in error.reason


def test_multipart_record_cut_short(tmp_path):
    _, data = multipart_payload()
    rec = tmp_path / "cut.rec"
    rec.write_bytes(data[:28])
    error = reader_errors(rec)
    assert_names(error, rec, 28, 0)


@pytest.mark.parametrize("cflag", [2, 3])
def test_continuation_part_at_a_record_head(tmp_path, cflag):
    rec = tmp_path / "cont.rec"
    rec.write_bytes(MAGIC_BYTES + lrec(cflag, 4) + b"data")
    error = reader_errors(rec)
    assert_names(error, rec, 0, 0)
    assert f"cflag {cflag}" in error.reason


def test_index_pointing_at_a_continuation_part(tmp_path):
    payload, data = multipart_payload()
    rec, idx = tmp_path / "m.rec", tmp_path / "m.idx"
    rec.write_bytes(data)
    idx.write_text("0\t0\n1\t12\n")
    with recpipe.RecordReader(str(rec), index_url=str(idx)) as reader:
        with pytest.raises(recpipe.RecordFormatError) as info:
            reader[1]
        assert_names(info.value, rec, 12, 1)
        assert "not at a record head" in info.value.reason


def test_unreadable_index_lines(good):
    rec, idx, offsets = good
    idx.write_text("0\t0\n1\t16\textra\n")
    with pytest.raises(recpipe.RecordFormatError) as info:
        recpipe.RecordReader(str(rec), index_url=str(idx))
    assert str(idx) in str(info.value) and "line 2" in str(info.value)
    idx.write_text("0\t0\nname\t16\n")
    with pytest.raises(recpipe.RecordFormatError, match="key_type=str"):
        recpipe.RecordReader(str(rec), index_url=str(idx))
    idx.write_text("0\t0\n1\t-16\n")
    with pytest.raises(recpipe.RecordFormatError, match="negative"):
        recpipe.RecordReader(str(rec), index_url=str(idx))


def test_errors_survive_pickling(good):
    import pickle

    rec, _, offsets = good
    patch(rec, offsets[2], b"JUNK")
    error = pickle.loads(pickle.dumps(reader_errors(rec)))
    assert_names(error, rec, offsets[2], 2)


def test_find_next_head_skips_unaligned_magic_and_continuations():
    payload, multi = multipart_payload()
    noise = b"\0" + MAGIC_BYTES + lrec(0, 0)[:3]  # an unaligned magic: not a head
    clean, _ = framed_file([b"ok"])
    data = noise + multi + clean
    assert len(noise) == 8
    source = BytesSource(data)
    assert find_next_head(source, 0) == 8  # the cflag-1 head of the multi-part record
    assert find_next_head(source, 12) == 8 + 40  # skips the cflag 2 and 3 parts
    assert find_next_head(source, 8 + 40 + 1) is None
    # many blocks: a head far away is still found
    far = b"\0" * 300_000 + clean
    assert find_next_head(BytesSource(far), 0, block_size=1 << 16) == 300_000
    assert [p for _, p in iter_records(BytesSource(far), start=300_000)] == [b"ok"]


def test_magic_constant_is_the_dmlc_one():
    assert struct.unpack("<I", MAGIC_BYTES)[0] == MAGIC == 0xCED7230A
