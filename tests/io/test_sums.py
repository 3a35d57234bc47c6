"""CRC32C and the ``.sums`` sidecar: written with every pack, bound to its ``.rec``, checked on
every read (RecordReader, recpipe.mx.recordio, remote files)."""

import os
import shutil

import fsspec
import pytest

import recpipe
from recpipe._optional import native
from recpipe.errors import RecordFormatError
from recpipe.io.sidecars.crc32c import crc32c, crc32c_python
from recpipe.io.sidecars.sums import RecordSums, load_sums, sums_url_for
from recpipe.mx.recordio import MXIndexedRecordIO, MXRecordIO

from .._damage import damage, write_pack

# RFC 3720 (iSCSI) B.4 and the usual check value
VECTORS = [(b"123456789", 0xE3069283), (bytes(32), 0x8A9136AA), (b"\xff" * 32, 0x62A8AB43),
           (bytes(range(32)), 0x46DD794E), (bytes(range(31, -1, -1)), 0x113FDB5C), (b"", 0)]


@pytest.mark.parametrize("data, expected", VECTORS)
def test_known_vectors(data, expected):
    assert crc32c(data) == expected
    assert crc32c_python(data) == expected


@pytest.mark.parametrize("size", [0, 1, 7, 8, 9, 63, 767, 768, 769, 4096, 12288, 12289, 65536,
                                  3 * 12288 + 2 * 768 + 13, 100003])
def test_native_hardware_and_table_equal_the_python_reference(size):
    fast = native("_crc32c")
    data = os.urandom(size)
    for offset in (0, 1, 3):  # unaligned starts too
        piece = memoryview(data)[offset:]
        reference = crc32c_python(piece)
        assert fast.crc32c(piece) == fast.software(piece) == reference


def test_continuation_equals_one_call():
    data = os.urandom(5000)
    assert crc32c(data[1234:], crc32c(data[:1234])) == crc32c(data)
    assert crc32c_python(data[10:], crc32c_python(data[:10])) == crc32c_python(data)


# -- the sidecar -------------------------------------------------------------------------------


def test_writer_publishes_a_sidecar_that_matches_every_record(tmp_path):
    rec = write_pack(tmp_path / "d.rec", count=5)
    sums = load_sums(rec, os.path.getsize(rec))
    with recpipe.RecordReader(rec) as reader:
        assert sums.offsets.tolist() == reader.offsets.array.tolist()
        assert sums.crcs.tolist() == [crc32c(payload) for payload in reader]
        assert reader.sums is not None


def test_sidecar_round_trip_and_self_check(tmp_path):
    sums = RecordSums(1000, [0, 40, 96], [1, 2, 0xFFFFFFFF])
    data = sums.to_bytes()
    again = RecordSums.from_bytes(data)
    assert again.offsets.tolist() == [0, 40, 96] and again.crcs.tolist() == [1, 2, 0xFFFFFFFF]
    broken = bytearray(data)
    broken[40] ^= 1  # an offset
    with pytest.raises(RecordFormatError, match="own CRC32C"):
        RecordSums.from_bytes(bytes(broken), path="x.sums")
    with pytest.raises(RecordFormatError, match="magic"):
        RecordSums.from_bytes(b"NOTSUMS!" + data[8:])
    with pytest.raises(RecordFormatError, match="bytes where"):
        RecordSums.from_bytes(data[:-1])


def test_multi_part_and_unindexed_records_are_covered(tmp_path):
    magic = (0xCED7230A).to_bytes(4, "little")
    payloads = [b"abcd" + magic + b"efgh" + magic, b"plain", b"x" * 13]
    rec = str(tmp_path / "m.rec")
    writer = MXIndexedRecordIO(str(tmp_path / "m.idx"), rec, "w")
    writer.write_idx(0, payloads[0])
    writer.write(payloads[1])  # no .idx line
    writer.write_idx(2, payloads[2])
    writer.close()
    sums = load_sums(rec, os.path.getsize(rec))
    assert len(sums) == 3 and sums.crcs.tolist() == [crc32c(p) for p in payloads]
    reader = MXRecordIO(rec, "r")
    assert [reader.read() for _ in range(3)] == payloads


def test_sidecar_of_another_file_is_an_error_naming_both(tmp_path):
    rec = write_pack(tmp_path / "a.rec", count=4)
    other = write_pack(tmp_path / "b.rec", count=5)
    shutil.copy(sums_url_for(other), sums_url_for(rec))
    with pytest.raises(RecordFormatError) as info:
        recpipe.RecordReader(rec)
    assert "a.rec" in str(info.value) and "b.sums" not in str(info.value)
    assert "a.sums" in str(info.value) and "another file" in str(info.value)


def test_stale_sidecar_after_the_rec_changed_is_an_error(tmp_path):
    rec = write_pack(tmp_path / "a.rec", count=4)
    sums = open(sums_url_for(rec), "rb").read()
    with recpipe.RecordWriter(rec, sums=False) as writer:  # rewritten by a tool without sums
        writer.write(b"new record")
    open(sums_url_for(rec), "wb").write(sums)
    with pytest.raises(RecordFormatError, match="changed"):
        recpipe.RecordReader(rec)
    with pytest.raises(RecordFormatError, match="changed"):
        MXRecordIO(rec, "r")


def test_truncated_rec_is_an_error_at_open(tmp_path):
    rec = write_pack(tmp_path / "a.rec", count=4)
    os.truncate(rec, os.path.getsize(rec) - 100)
    with pytest.raises(RecordFormatError, match=r"a\.sums.*a\.rec|a\.rec.*a\.sums"):
        recpipe.RecordReader(rec)


def test_integrity_off_ignores_the_sidecar(tmp_path):
    rec = write_pack(tmp_path / "a.rec", count=4)
    with recpipe.RecordReader(rec) as reader:
        offset = int(reader.offsets[2])
    damage(rec, offset, "flip")
    with recpipe.RecordReader(rec, integrity="off") as reader:
        assert reader.sums is None
        assert len(reader[2]) > 0
    with pytest.raises(ValueError, match="integrity"):
        recpipe.RecordReader(rec, integrity="yes")


# -- reads -------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["flip", "zero"])
def test_damaged_record_raises_naming_path_record_and_offset(tmp_path, how):
    rec = write_pack(tmp_path / "a.rec", count=6)
    with recpipe.RecordReader(rec) as reader:
        offset = int(reader.offsets[4])
        clean = [reader[i] for i in range(6)]
    damage(rec, offset, how)
    with recpipe.RecordReader(rec) as reader:
        assert [reader[i] for i in (0, 1, 2, 3, 5)] == [clean[i] for i in (0, 1, 2, 3, 5)]
        with pytest.raises(RecordFormatError, match="checksum mismatch") as info:
            reader[4]
        assert (info.value.path, info.value.record, info.value.offset) == (rec, 4, offset)
        with pytest.raises(RecordFormatError, match="checksum mismatch"):
            list(reader)  # sequential reads too
        with pytest.raises(RecordFormatError, match="checksum mismatch"):
            reader.read_key(4)


def test_recordio_checks_sums(tmp_path):
    rec = write_pack(tmp_path / "a.rec", count=6)
    idx = str(tmp_path / "a.idx")
    with recpipe.RecordReader(rec) as reader:
        offset = int(reader.offsets[3])
    damage(rec, offset, "zero")
    indexed = MXIndexedRecordIO(idx, rec, "r")
    assert indexed.read_idx(2)
    with pytest.raises(RecordFormatError, match="checksum mismatch") as info:
        indexed.read_idx(3)
    assert info.value.offset == offset
    sequential = MXRecordIO(rec, "r")
    with pytest.raises(RecordFormatError, match="checksum mismatch"):
        while sequential.read() is not None:
            pass


def test_memory_url_checks_sums(tmp_path):
    local = write_pack(tmp_path / "a.rec", count=5)
    with recpipe.RecordReader(local) as reader:
        offset = int(reader.offsets[1])
    damage(local, offset, "flip")
    fs = fsspec.filesystem("memory")
    root = "memory://sums-test"
    for ext in ("rec", "idx", "sums"):
        fs.pipe_file(f"/sums-test/a.{ext}", (tmp_path / f"a.{ext}").read_bytes())
    try:
        with recpipe.RecordReader(f"{root}/a.rec") as reader:
            assert reader.sums is not None and reader[0]
            with pytest.raises(RecordFormatError, match="checksum mismatch"):
                reader[1]
    finally:
        fs.rm("/sums-test", recursive=True)


def test_every_damaged_record_is_caught(tmp_path):
    """Flipped bits and zeroed runs at many places: none reads back without an error."""
    rec = write_pack(tmp_path / "a.rec", count=20)
    with recpipe.RecordReader(rec) as reader:
        offsets = reader.offsets.array.tolist()
    bad = set()
    for i, offset in enumerate(offsets):
        if i % 2:
            damage(rec, offset, "flip" if i % 4 == 1 else "zero", where=(i % 5) / 5 + 0.05)
            bad.add(i)
    caught = set()
    with recpipe.RecordReader(rec) as reader:
        for i in range(len(reader)):
            try:
                reader[i]
            except RecordFormatError:
                caught.add(i)
    assert caught == bad


# -- a sidecar bound to the content of its .rec -----------------------------------------------


def _repack(rec, order, *, keep_old_sums=True):
    """Re-pack the records of ``rec`` in ``order`` as a tool without sums would (MXNet):
    the same size, the same .idx keys, the old .sums left beside the new pair."""
    with recpipe.RecordReader(rec, integrity="off") as reader:
        payloads = [reader[i] for i in range(len(reader))]
    old = open(sums_url_for(rec), "rb").read()
    size = os.path.getsize(rec)
    writer = MXIndexedRecordIO(rec[:-4] + ".idx", rec, "w")
    for key, i in enumerate(order):
        writer.write_idx(key, payloads[i])
    writer.close()
    if keep_old_sums:
        open(sums_url_for(rec), "wb").write(old)
    assert os.path.getsize(rec) == size
    return payloads


def _same_length_pack(path, count=8):
    """Records of one payload length (so a re-pack in any order keeps every offset)."""
    with recpipe.RecordWriter(str(path)) as writer:
        for i in range(count):
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), bytes([i]) * 100))
    return str(path)


@pytest.mark.parametrize("make", ["photos", "same_length"])
def test_a_stale_sidecar_beside_a_same_size_repack_is_detected(tmp_path, make):
    rec = (write_pack(tmp_path / "a.rec", count=8) if make == "photos"
           else _same_length_pack(tmp_path / "a.rec"))
    _repack(rec, list(reversed(range(8))))
    with pytest.raises(recpipe.errors.StaleSumsError) as info:
        with recpipe.RecordReader(rec) as reader:  # other offsets: at open; else at a read
            reader[3]
    message = str(info.value)
    assert "a.sums" in message and "a.rec" in message and "--write-sums" in message
    assert info.value.fault == "sidecar"
    with pytest.raises(recpipe.errors.StaleSumsError):
        MXRecordIO(rec, "r").read()
    with recpipe.RecordReader(rec, integrity="off") as reader:
        assert reader[0][:24] != b""  # the pair itself reads


def test_one_damaged_record_is_still_damage_not_a_stale_sidecar(tmp_path):
    rec = write_pack(tmp_path / "a.rec", count=8)
    with recpipe.RecordReader(rec) as reader:
        offsets = reader.offsets.array.tolist()
    damage(rec, offsets[0], "flip")  # the first record is probed
    with recpipe.RecordReader(rec) as reader:
        with pytest.raises(RecordFormatError, match="checksum mismatch") as info:
            reader[0]
        assert info.value.fault == "checksum"
        assert len(reader[1]) > 0


def test_writer_without_sums_removes_the_old_sidecar(tmp_path):
    rec = write_pack(tmp_path / "a.rec", count=4)
    with recpipe.RecordWriter(rec, sums=False) as writer:
        writer.write(b"new record")
    assert not os.path.exists(sums_url_for(rec))
    with recpipe.RecordReader(rec) as reader:
        assert reader.sums is None and reader[0] == b"new record"
    other = write_pack(tmp_path / "b.rec", count=4)
    writer = recpipe.RecordWriter(other, sums=False)
    writer.write(b"x")
    writer.abort()  # nothing published: the old pair and its sidecar stay
    assert os.path.exists(sums_url_for(other))
