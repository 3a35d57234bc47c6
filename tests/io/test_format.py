"""RecordIO framing, IRHeader packing and the .idx/.lst line formats against MXNet's own bytes.

The byte tables come from recordio-compat.md sections 1.2 and 2, produced by a real mxnet 1.9.1;
the property tests compare ``frame`` with a literal port of dmlc's ``RecordIOWriter::WriteRecord``
and read everything back through the scanner.
"""

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recpipe
from recpipe.io import pack, pack_img, unpack, unpack_img
from recpipe.io.format.framing import (HEAD_SIZE, MAGIC, MAGIC_BYTES, MAX_RECORD_SIZE, check_size,
                                       frame)
from recpipe.io.sidecars.index import format_index_line, format_list_line, parse_index, parse_list
from recpipe.io.format.scan import iter_records
from recpipe.io.sources import BytesSource

from ._helpers import framed_file

M = MAGIC_BYTES


def words(text):
    """recordio-compat.md's notation: ``M`` is the magic, other words are on-disk hex."""
    return b"".join(M if w == "M" else bytes.fromhex(w) for w in text.split())


# recordio-compat.md section 1.2, produced by mxnet 1.9.1 [verified]
GOLDEN_FRAMES = [
    (b"", "M 00000000"),
    (b"abc", "M 03000000 61626300"),
    (M, "M 00000020 M 00000060"),
    (M + b"xy", "M 00000020 M 02000060 78790000"),
    (b"AAAA" + M + b"BBBBB", "M 04000020 41414141 M 05000060 42424242 42000000"),
    (b"A" + M + b"BBB", "M 08000000 410a23d7 ce424242"),
    (M + M, "M 00000020 M 00000040 M 00000060"),
    (b"AAAA" + M, "M 04000020 41414141 M 00000060"),
    (b"AAAAA" + M, "M 09000000 41414141 410a23d7 ce000000"),
]


def unframe(data):
    """Payloads of a framed byte string, read back through the scanner."""
    return [payload for _, payload in iter_records(BytesSource(data))]


def reference_frame(buf):
    """A literal port of dmlc-core ``RecordIOWriter::WriteRecord`` (src/recordio.cc)."""
    assert len(buf) < (1 << 29)
    out = bytearray()
    lower_align = len(buf) & ~3
    dptr = 0
    for i in range(0, lower_align, 4):
        if buf[i:i + 4] == M:
            cflag = 1 if dptr == 0 else 2
            out += struct.pack("<II", MAGIC, cflag << 29 | (i - dptr)) + buf[dptr:i]
            dptr = i + 4
    cflag = 3 if dptr != 0 else 0
    out += struct.pack("<II", MAGIC, cflag << 29 | (len(buf) - dptr)) + buf[dptr:]
    out += b"\0" * (((len(buf) + 3) & ~3) - len(buf))
    return bytes(out)


def aligned_magic_count(payload):
    return sum(payload[i:i + 4] == M for i in range(0, len(payload) & ~3, 4))


def part_heads(data):
    """Offsets of the part heads of a valid framed byte string, walking the length fields."""
    heads, pos = [], 0
    while pos < len(data):
        heads.append(pos)
        length = struct.unpack_from("<I", data, pos + 4)[0] & ((1 << 29) - 1)
        pos += HEAD_SIZE + ((length + 3) & ~3)
    return heads


@pytest.mark.parametrize("payload,expected", GOLDEN_FRAMES, ids=lambda x: repr(x)[:30])
def test_frame_matches_mxnet_bytes(payload, expected):
    assert frame(payload) == words(expected)


@pytest.mark.parametrize("payload,expected", GOLDEN_FRAMES, ids=lambda x: repr(x)[:30])
def test_mxnet_bytes_read_back(payload, expected):
    assert unframe(words(expected)) == [payload]


def test_golden_frames_concatenated_read_back_in_order():
    data = b"".join(words(expected) for _, expected in GOLDEN_FRAMES)
    assert unframe(data) == [payload for payload, _ in GOLDEN_FRAMES]


def test_magic_on_disk_is_little_endian():
    assert MAGIC_BYTES == bytes.fromhex("0a23d7ce")
    assert MAGIC >> 29 > 3  # a valid lrec word can never equal the magic


def test_frame_accepts_bytes_like_payloads():
    expected = frame(b"\x01\x02\x03\x04\x05")
    assert frame(bytearray(b"\x01\x02\x03\x04\x05")) == expected
    assert frame(memoryview(b"\x01\x02\x03\x04\x05")) == expected
    assert frame(np.arange(1, 6, dtype=np.uint8)) == expected


@pytest.mark.parametrize("bad", [None, "text"])
def test_frame_rejects_non_bytes(bad):
    with pytest.raises(TypeError):
        frame(bad)


def test_size_limit_is_checked_before_copying():
    check_size(MAX_RECORD_SIZE)  # the largest legal record
    with pytest.raises(recpipe.RecordTooLargeError, match="2\\*\\*29"):
        check_size(MAX_RECORD_SIZE + 1)
    # np.zeros is calloc'ed: 512 MiB of address space, no pages touched unless someone copies it
    huge = np.zeros(1 << 29, dtype=np.uint8)
    with pytest.raises(recpipe.RecordTooLargeError):
        frame(huge)
    assert issubclass(recpipe.RecordTooLargeError, ValueError)


payload_pieces = st.lists(
    st.one_of(st.binary(max_size=13), st.just(M), st.just(b"\x0a\x23"), st.just(b"\xd7\xce")),
    max_size=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=payload_pieces)
def test_frame_equals_dmlc_writer_and_round_trips(pieces):
    payload = b"".join(pieces)
    data = frame(payload)
    assert data == reference_frame(payload)
    assert len(data) % 4 == 0
    heads = part_heads(data)
    assert len(heads) == 1 + aligned_magic_count(payload)
    # every aligned magic word of the file is a part head, and nothing else is
    aligned = [i for i in range(0, len(data), 4) if data[i:i + 4] == M]
    assert aligned == heads
    assert unframe(data) == [payload]


@settings(max_examples=100, deadline=None)
@given(payloads=st.lists(st.binary(max_size=40).map(lambda b: b[:8] + M + b[8:]), max_size=20),
       shift=st.integers(0, 3))
def test_magic_injected_at_aligned_and_unaligned_offsets(payloads, shift):
    payloads = [b"x" * shift + p for p in payloads]  # moves the injected magic off alignment
    data, offsets = framed_file(payloads)
    assert [off for off, _ in iter_records(BytesSource(data), keep_payload=False)] == offsets
    assert unframe(data) == payloads


def test_many_records_including_empty_ones():
    payloads = [bytes([i % 256]) * (i % 9) for i in range(2000)]
    data, _ = framed_file(payloads)
    assert unframe(data) == payloads


def test_irheader_pack_example_from_mxnet():
    s = pack(recpipe.IRHeader(7, [1.5, 2.5], 42, 3), b"")
    expected = bytes.fromhex("02000000" "00000000" "2a00000000000000" "0300000000000000"
                             "0000c03f" "00002040")
    assert s == expected
    header, image = unpack(s + b"IMG")
    assert (header.flag, header.id, header.id2) == (2, 42, 3)
    assert header.label.dtype == np.float32 and header.label.tolist() == [1.5, 2.5]
    assert image == b"IMG"


def test_pack_scalar_label_forces_flag_zero():
    s = pack(recpipe.IRHeader(5, 3.0, 9, 0), b"jpeg")
    assert s[:4] == b"\0\0\0\0" and struct.unpack_from("<f", s, 4)[0] == 3.0
    header, image = unpack(s)
    assert header == recpipe.IRHeader(0, 3.0, 9, 0) and image == b"jpeg"


def test_pack_one_element_sequence_is_packed_label():
    header, image = unpack(pack((0, [4.0], 1, 0), b"z"))
    assert header.flag == 1 and header.label.tolist() == [4.0] and image == b"z"


def test_pack_label_round_trips_like_mxnet_test_recordio_pack_label():
    # port of mxnet tests/python/unittest/test_recordio.py::test_recordio_pack_label
    rng = np.random.default_rng(7)
    for width in range(1, 255):
        for length in range(0, 255, 23):
            content = rng.integers(65, 91, length, dtype=np.uint8).tobytes()
            label = rng.uniform(size=width).astype(np.float32)
            header, image = unpack(pack((0, label, 0, 0), content))
            assert header.flag == width
            assert np.array_equal(header.label, label)
            assert image == content


def test_unpack_rejects_short_payloads():
    with pytest.raises(recpipe.RecordFormatError, match="shorter than the 24-byte"):
        unpack(b"\0" * 23)
    with pytest.raises(recpipe.RecordFormatError, match="3 labels"):
        unpack(struct.pack("<IfQQ", 3, 0, 0, 0) + b"\0" * 8)


def test_unpack_img_raises_decode_error_on_empty_and_garbage_images():
    for image in (b"", b"not an image"):
        with pytest.raises(recpipe.DecodeError):
            unpack_img(pack((0, 1.0, 3, 0), image))


def test_pack_img_round_trip_is_bgr():
    img = np.zeros((8, 8, 3), np.uint8)
    img[..., 0] = 255  # blue in OpenCV's BGR
    header, decoded = unpack_img(pack_img((0, 2.0, 5, 0), img, img_fmt=".png"))
    assert header.label == 2.0 and header.id == 5
    assert np.array_equal(decoded, img)


def test_idx_lines_match_mxnet_write_idx():
    # MXIndexedRecordIO.write_idx of three records of 5..8 bytes gives "0\t0\n1\t16\n2\t32\n"
    data, offsets = framed_file([b"12345678", b"12345", b"1234567"])
    text = "".join(format_index_line(i, off) for i, off in enumerate(offsets))
    assert text == "0\t0\n1\t16\n2\t32\n"
    assert len(data) == 48
    assert parse_index(text) == ([0, 1, 2], [0, 16, 32])


@pytest.mark.parametrize("key", ["", "a\tb", "a\nb", " padded"])
def test_idx_keys_that_cannot_round_trip_are_refused(key):
    with pytest.raises(ValueError):
        format_index_line(key, 0)


def test_lst_line_matches_im2rec_write_list():
    # im2rec: '%d\t' % index, then '%f\t' % label for each label, then the path and '\n'
    assert format_list_line(3, [1, 2.5], "cat/a b.jpg") == "3\t1.000000\t2.500000\tcat/a b.jpg\n"
    assert format_list_line(0, [0.1234567], "x.png") == "0\t0.123457\tx.png\n"


def test_lst_parse_follows_im2rec_read_list():
    text = ("0\t1.000000\ta.jpg\n"
            "1\t2.000000\t3.500000\t dir/b c.jpg \n"
            "2\tb.jpg\n"              # fewer than 3 fields: skipped
            "x\t1.0\tc.jpg\n"         # index does not parse: skipped
            "\n"
            "4\t7\td.jpg\n")
    entries, skipped = parse_list(text, path="t.lst")
    assert [(e.index, e.labels, e.path) for e in entries] == [
        (0, (1.0,), "a.jpg"), (1, (2.0, 3.5), "dir/b c.jpg"), (4, (7.0,), "d.jpg")]
    assert skipped == [3, 4]


def dmlc_sample_payloads(count=10):
    """dmlc-core test/unittest/sample.rec, as described: record k has label k % 2, id k and
    content ``"k\\n"`` ten times."""
    return [pack(recpipe.IRHeader(0, float(k % 2), k, 0), (f"{k}\n" * 10).encode())
            for k in range(count)]


def test_dmlc_sample_rec_builds_and_reads(tmp_path):
    path = tmp_path / "sample.rec"
    with recpipe.RecordWriter(str(path)) as writer:
        for payload in dmlc_sample_payloads():
            writer.write(payload)
    with recpipe.RecordReader(str(path), index_url=False) as reader:
        assert len(reader) == 10
        for k, payload in enumerate(reader):
            header, content = unpack(payload)
            assert header.label == k % 2 and header.id == k and header.id2 == 0
            assert content == f"{k}\n".encode() * 10
    # each 44-byte payload takes a 52-byte part: no padding, no escapes
    assert path.stat().st_size == 10 * (HEAD_SIZE + 24 + 20)
