"""``verify``, ``rebuild_index`` and ``inspect``, and their ``recpipe`` subcommands."""

import json
import struct

import numpy as np
import pytest

import recpipe
from recpipe.cli import main
from recpipe.decode.decoders import get_decoder
from recpipe.errors import DecodeError
from recpipe.io import pack
from recpipe.io.format.framing import HEAD_SIZE, MAGIC_BYTES
from recpipe.io.health.contents import inspect
from recpipe.io.sidecars.rebuild import rebuild_index
from recpipe.io.health.verify import PROBLEM_KINDS, verify

from ._helpers import framed_file, index_text, jpeg


def image_payloads(count=8, start_id=100):
    return [pack(recpipe.IRHeader(0, float(i % 3), start_id + i, 0), jpeg(seed=i))
            for i in range(count)]


@pytest.fixture
def dataset(tmp_path):
    """A clean .rec/.idx pair written by RecordWriter with im2rec-style keys (= header ids)."""
    payloads = image_payloads()
    rec = tmp_path / "data.rec"
    with recpipe.RecordWriter(str(rec)) as writer:
        offsets = [writer.write(p, key=100 + i) for i, p in enumerate(payloads)]
    return rec, tmp_path / "data.idx", offsets, payloads


def patch(path, offset, data):
    blob = bytearray(path.read_bytes())
    blob[offset:offset + len(data)] = data
    path.write_bytes(bytes(blob))


def kinds(report):
    return [(p.kind, p.offset, p.record) for p in report.problems]


def test_clean_file_passes(dataset):
    rec, idx, offsets, payloads = dataset
    report = verify(str(rec), decoder=get_decoder("auto"))
    assert report.ok and report.problems == []
    assert report.index_url == str(idx) and report.index_entries == len(payloads)
    assert report.records == len(payloads) and report.decoded == len(payloads)
    assert report.decode_failures == 0 and report.skipped_bytes == 0
    assert report.size == rec.stat().st_size


def test_images_are_checked_with_the_callers_decoder(dataset):
    """verify (the io layer) takes its decoder from the caller: any object whose decode()
    raises DecodeError; a bool is refused with the way to get the loaders' default."""
    rec, _, _, payloads = dataset

    class Refusing:
        name = "refusing"

        def decode(self, data):
            raise DecodeError("refused")

    report = verify(str(rec), decoder=Refusing())
    assert report.decode_failures == len(payloads) and report.decoded == 0
    assert {p.kind for p in report.problems} == {"decode-failed"}
    assert "(refusing): refused" in report.problems[0].reason
    with pytest.raises(TypeError, match=r"get_decoder\('auto'\)"):
        verify(str(rec), decoder=True)
    with pytest.raises(ValueError, match="write_sums needs a decoder"):
        verify(str(rec), write_sums=True)


def test_bad_magic_is_found_and_later_records_still_counted(dataset):
    rec, idx, offsets, payloads = dataset
    patch(rec, offsets[3], b"JUNK")
    report = verify(str(rec), index_url=False)
    assert not report.ok
    assert kinds(report) == [("bad-record", offsets[3], 3)]
    problem = report.problems[0]
    assert problem.end == offsets[4] and "bad magic" in problem.reason
    assert report.records == len(payloads) - 1  # resynchronised on record 4
    assert report.skipped_bytes == offsets[4] - offsets[3]


def test_several_corruptions_each_with_its_offset(dataset):
    rec, idx, offsets, payloads = dataset
    patch(rec, offsets[1] + 4, struct.pack("<I", (1 << 29) - 1))  # absurd length
    patch(rec, offsets[5], b"\0\0\0\0")                              # zeroed magic
    report = verify(str(rec), index_url=False)
    assert kinds(report) == [("bad-record", offsets[1], 1), ("bad-record", offsets[5], 4)]
    assert [p.end for p in report.problems] == [offsets[2], offsets[6]]
    assert report.records == len(payloads) - 2


def test_truncated_tail_and_garbage_between_records(tmp_path):
    payloads = [b"a" * 10, b"b" * 20, b"c" * 30]
    data, offsets = framed_file(payloads)
    garbage = b"\x01" * 12
    rec = tmp_path / "t.rec"
    rec.write_bytes(data[:offsets[1]] + garbage + data[offsets[1]:-6])
    report = verify(str(rec), index_url=False)
    assert kinds(report) == [("bad-record", offsets[1], 1), ("bad-record", offsets[2] + 12, 2)]
    assert report.problems[0].end == offsets[1] + 12
    assert report.problems[1].end == rec.stat().st_size
    assert "truncated" in report.problems[1].reason
    assert report.records == 2


def test_interrupted_multipart_record_resynchronises_on_the_intruder(tmp_path):
    multi, _ = framed_file([b"AAAA" + MAGIC_BYTES + b"BBBB"])  # parts at 0 and 12
    clean, _ = framed_file([b"clean"])
    rec = tmp_path / "m.rec"
    rec.write_bytes(multi[:12] + clean + clean)
    report = verify(str(rec), index_url=False)
    assert kinds(report) == [("bad-record", 0, 0)]
    assert report.problems[0].end == 12 and "interrupted" in report.problems[0].reason
    assert report.records == 2


def test_index_problems(dataset):
    rec, idx, offsets, payloads = dataset
    size = rec.stat().st_size
    entries = [(100, offsets[0]), (101, offsets[1] + 8),  # inside record 1
               (102, size + 64),                          # past the end
               (102, offsets[2]),                         # duplicate key
               (103, offsets[2]),                         # duplicate offset
               (105, offsets[5] + 2)]                     # unaligned
    idx.write_text("".join(f"{k}\t{o}\n" for k, o in entries))
    report = verify(str(rec))
    found = {(p.kind, p.offset) for p in report.problems}
    assert ("index-not-at-head", offsets[1] + 8) in found
    assert ("index-past-end", size + 64) in found
    assert ("index-duplicate-key", size + 64) in found  # first entry of key 102
    assert ("index-duplicate-offset", offsets[2]) in found
    assert ("index-not-at-head", offsets[5] + 2) in found
    missing = sorted(p.offset for p in report.problems if p.kind == "not-in-index")
    assert missing == [offsets[1], offsets[3], offsets[4], offsets[5], offsets[6], offsets[7]]
    inside = next(p for p in report.problems if p.offset == offsets[1] + 8)
    assert f"inside record 1, which starts at offset {offsets[1]}" in inside.reason
    assert report.records == len(payloads)  # the .rec itself is fine
    assert set(report.counts) <= set(PROBLEM_KINDS)


def test_index_offset_in_an_unreadable_range(dataset):
    rec, idx, offsets, _ = dataset
    patch(rec, offsets[2], b"JUNK")
    report = verify(str(rec))
    assert ("bad-record", offsets[2], 2) in kinds(report)
    entry = next(p for p in report.problems if p.kind == "index-not-at-head")
    assert entry.offset == offsets[2] and entry.record == 2
    assert "unreadable byte range" in entry.reason


def test_unparsable_index_is_a_problem_not_a_crash(dataset):
    rec, idx, _, payloads = dataset
    idx.write_text("0\t0\tjunk\n")
    report = verify(str(rec))
    assert [p.kind for p in report.problems] == ["index-unreadable"]
    assert report.records == len(payloads)


def test_decode_failures_are_counted(tmp_path):
    good = image_payloads(3)
    bad = [pack((0, 1.0, 7, 0), b"\xff\xd8\xff" + b"\0" * 50),  # JPEG start, no image
           pack((0, 1.0, 8, 0), b""),
           b"short"]                                                    # no IRHeader at all
    data, offsets = framed_file(good + bad)
    rec = tmp_path / "d.rec"
    rec.write_bytes(data)
    report = verify(str(rec), index_url=False, decoder=get_decoder("auto"))
    assert report.decoded == 3 and report.decode_failures == 3
    assert kinds(report) == [("decode-failed", offsets[3], 3), ("decode-failed", offsets[4], 4),
                             ("bad-header", offsets[5], 5)]


def test_problem_listing_is_capped_but_counted(tmp_path):
    data, offsets = framed_file([b"x"] * 30)
    rec = tmp_path / "c.rec"
    rec.write_bytes(data)
    (tmp_path / "c.idx").write_text("0\t0\n")
    report = verify(str(rec), limit=5)
    assert report.counts["not-in-index"] == 29
    assert sum(p.kind == "not-in-index" for p in report.problems) == 5
    assert report.to_dict()["counts"] == {"not-in-index": 29}


def test_rebuilt_index_equals_the_original(dataset):
    rec, idx, _, payloads = dataset
    original = idx.read_text()
    idx.unlink()
    result = rebuild_index(str(rec))
    assert result.keys == "header.id" and result.records == len(payloads)
    assert result.index_url == str(idx)
    assert idx.read_text() == original


def test_rebuild_index_by_positions_like_rec2idx(dataset, tmp_path):
    rec, _, offsets, _ = dataset
    out = tmp_path / "pos.idx"
    result = rebuild_index(str(rec), str(out), positions=True)
    assert result.keys == "position"
    assert out.read_text() == index_text(range(len(offsets)), offsets)


def test_rebuild_index_falls_back_to_positions(tmp_path):
    data, offsets = framed_file([pack((0, 0.0, 5, 0), b"a"),
                                 pack((0, 0.0, 5, 0), b"b")])  # duplicate ids
    rec = tmp_path / "dup.rec"
    rec.write_bytes(data)
    result = rebuild_index(str(rec))
    assert result.keys == "position" and "not unique" in result.reason
    assert (tmp_path / "dup.idx").read_text() == index_text([0, 1], offsets)
    data, offsets = framed_file([pack((0, 0.0, 5, 0), b"a"), b"raw"])  # no header
    rec.write_bytes(data)
    result = rebuild_index(str(rec))
    assert result.keys == "position" and "no IRHeader" in result.reason


def test_rebuild_index_on_a_corrupt_file(dataset):
    rec, idx, offsets, _ = dataset
    idx.unlink()
    patch(rec, offsets[2], b"JUNK")
    with pytest.raises(recpipe.RecordFormatError) as info:
        rebuild_index(str(rec))
    assert info.value.offset == offsets[2] and info.value.record == 2
    assert not idx.exists()  # nothing half-written
    result = rebuild_index(str(rec), skip_bad=True)
    assert result.skipped == 1 and result.records == len(offsets) - 1
    keys, got = recpipe.read_index(str(idx))
    assert got == offsets[:2] + offsets[3:]
    assert keys == [100, 101, 103, 104, 105, 106, 107]


def test_inspect_summary(tmp_path):
    payloads = image_payloads(10)
    payloads.append(pack((0, [1.0, 2.0], 500, 9), jpeg(seed=50, shape=(16, 8, 3))))
    data, _ = framed_file(payloads)
    rec = tmp_path / "i.rec"
    rec.write_bytes(data)
    summary = inspect(str(rec), sample=100, seed=1)
    json.dumps(summary)  # JSON-ready
    assert summary["records"] == 11 and summary["bytes"] == len(data)
    assert summary["payload_bytes"]["total"] == sum(map(len, payloads))
    assert summary["headers"]["ids_unique"] and summary["headers"]["id_max"] == 500
    assert summary["headers"]["id2_nonzero"] == 1
    labels = summary["labels"]
    assert (labels["scalar"], labels["packed"]) == (10, 1)
    assert labels["widths"] == {"0": 10, "2": 1}
    assert labels["histogram"] == {"0": 4, "1": 4, "2": 3}  # label[0] of the packed one is 1
    assert any("mixed" in note for note in labels["notes"])
    images = summary["images"]
    assert images["sampled"] == 11 and images["formats"] == {"jpeg": 11}
    assert images["width"]["min"] == 8 and images["width"]["max"] == 32
    assert images["height"]["max"] == 24 and images["channels"] == {"3": 11}


def test_inspect_sample_is_seeded_and_bounded(dataset):
    rec = dataset[0]
    first = inspect(str(rec), sample=3, seed=4)
    assert first == inspect(str(rec), sample=3, seed=4)
    assert first["images"]["sampled"] == 3


def test_inspect_flags_all_zero_labels_and_counts_bad_ranges(tmp_path):
    payloads = [pack((0, 0.0, i, 0), jpeg(seed=i)) for i in range(4)]
    data, offsets = framed_file(payloads)
    rec = tmp_path / "z.rec"
    rec.write_bytes(data[:offsets[3]] + b"JUNK" + data[offsets[3] + 4:])
    summary = inspect(str(rec))
    assert summary["records"] == 3 and summary["bad_ranges"] == 1
    assert any("0.0" in note for note in summary["labels"]["notes"])


def run_cli(capsys, *argv):
    status = main(list(argv))
    out = capsys.readouterr()
    return status, out.out, out.err


def test_cli_verify_exit_codes_and_json(dataset, capsys):
    rec, idx, offsets, payloads = dataset
    status, out, _ = run_cli(capsys, "verify", str(rec), "--json")
    assert status == 0 and json.loads(out)["ok"] is True
    status, out, _ = run_cli(capsys, "verify", str(rec), "--decode")
    assert status == 0 and "OK" in out
    patch(rec, offsets[4], b"JUNK")
    status, out, _ = run_cli(capsys, "verify", str(rec))
    assert status == 1 and f"byte {offsets[4]}..{offsets[5]}" in out and "bad magic" in out
    status, out, _ = run_cli(capsys, "verify", str(rec), "--json", "--no-index")
    report = json.loads(out)
    assert status == 1 and report["records"] == len(payloads) - 1
    assert report["problems"] == [{"kind": "bad-record", "offset": offsets[4], "record": 4,
                                   "end": offsets[5], "reason": report["problems"][0]["reason"]}]


def test_cli_verify_missing_file(tmp_path, capsys):
    status, _, err = run_cli(capsys, "verify", str(tmp_path / "none.rec"))
    assert status == 1 and "none.rec" in err


def test_cli_inspect(dataset, capsys):
    rec = dataset[0]
    status, out, _ = run_cli(capsys, "inspect", str(rec), "--json", "--sample", "2")
    summary = json.loads(out)
    assert status == 0 and summary["records"] == 8 and summary["images"]["sampled"] == 2
    status, out, _ = run_cli(capsys, "inspect", str(rec))
    assert status == 0 and "8 records" in out and "jpeg" in out


def test_cli_index(dataset, capsys):
    rec, idx, offsets, _ = dataset
    original = idx.read_text()
    status, _, err = run_cli(capsys, "index", str(rec))
    assert status == 1 and "--force" in err and idx.read_text() == original
    idx.unlink()
    status, out, _ = run_cli(capsys, "index", str(rec))
    assert status == 0 and "header.id" in out and idx.read_text() == original
    out_idx = rec.parent / "positions.idx"
    status, out, _ = run_cli(capsys, "index", str(rec), "-o", str(out_idx), "--positions")
    assert status == 0 and out_idx.read_text() == index_text(range(len(offsets)), offsets)


def test_verify_over_memory_url():
    import uuid

    import fsspec

    root = f"memory://recpipe-verify-{uuid.uuid4().hex}"
    try:
        with recpipe.RecordWriter(f"{root}/v.rec") as writer:
            for payload in image_payloads(3):
                writer.write(payload)
        report = verify(f"{root}/v.rec", decoder=get_decoder("auto"))
        assert report.ok and report.records == 3 and report.index_entries == 3
    finally:
        fsspec.filesystem("memory").rm(root, recursive=True)


def test_large_records_are_walked_over(tmp_path):
    # a 3 MiB record is stepped over by its length field when images are not decoded
    big = np.random.default_rng(0).integers(0, 255, 3 << 20, dtype=np.uint8).tobytes()
    data, offsets = framed_file([big, b"tail"])
    rec = tmp_path / "big.rec"
    rec.write_bytes(data)
    report = verify(str(rec), index_url=False)
    assert report.ok and report.records == 2
    assert offsets[1] == HEAD_SIZE + len(big)
