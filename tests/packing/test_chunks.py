"""Whole-file jobs in byte-range chunks (``packing.chunks``, ``packing.wholefile``), run in this
process (``ClusterOptions(dask=None)``): the boundaries, the walk that checks them, the merge,
the work folder (resume, a changed file, a damaged result). Every output is compared with the
one-machine run's (``verify``, ``rebuild_index``) on the same file. The Dask runs of the same
jobs are in ``test_wholefile_dask.py``."""

import collections
import json
import os
import struct

import numpy as np
import pytest

import recpipe
from recpipe.decode.decoders import get_decoder
from recpipe.errors import RecordFormatError
from recpipe.io.format.framing import MAGIC, padded
from recpipe.io.format.header import IRHeader, pack
from recpipe.io.sidecars.rebuild import rebuild_index
from recpipe.io.sources import open_source
from recpipe.io.health.verify import verify
from recpipe.packing.chunks import (ChunkResult, Span, WorkFolder, is_record_head, plan_spans,
                                    work_url_for)
from recpipe.packing.wholefile import ClusterOptions, index_on_cluster, verify_on_cluster
from tests.io._helpers import jpeg


def here(chunk_bytes, **kwargs):
    return ClusterOptions(dask=None, chunk_bytes=chunk_bytes, **kwargs)


def write_images(path, count=24, seed=0):
    """A clean .rec/.idx (RecordWriter, keys = header ids 100..); returns the record offsets."""
    with recpipe.RecordWriter(str(path)) as writer:
        return [writer.write(pack(IRHeader(0, float(i % 3), 100 + i, 0), jpeg(seed=seed + i)),
                             key=100 + i) for i in range(count)]


def patch(path, offset, data):
    blob = bytearray(path.read_bytes())
    blob[offset:offset + len(data)] = data
    path.write_bytes(bytes(blob))


def raw_record(payload):
    """One record as a writer that does not cut out magic words writes it."""
    return struct.pack("<II", MAGIC, len(payload)) + payload + b"\0" * (
        padded(len(payload)) - len(payload))


def fake_heads(size, every=200, fake_length=56):
    """Payload bytes holding chains of plausible record heads (magic, cflag 0, a length that
    fits), aligned: what a scan for the magic finds inside a record of an unescaping writer."""
    body = bytearray(b"\x11" * size)
    for at in range(40, size - 2 * (fake_length + 8), every):
        body[at:at + 8] = struct.pack("<II", MAGIC, fake_length)
        follow = at + 8 + fake_length
        body[follow:follow + 8] = struct.pack("<II", MAGIC, fake_length)
    return bytes(body)


def write_unescaped(path):
    """Records with fake heads inside two long payloads; returns the true offsets."""
    payloads = [pack(IRHeader(0, 1.0, i, 0), b"x" * 100) for i in range(6)]
    payloads.insert(2, pack(IRHeader(0, 1.0, 90, 0), fake_heads(3000)))
    payloads.insert(5, pack(IRHeader(0, 1.0, 91, 0), fake_heads(700)))
    offsets, blob = [], b""
    for payload in payloads:
        offsets.append(len(blob))
        blob += raw_record(payload)
    path.write_bytes(blob)
    return offsets


def same_verify(rec, chunk_bytes, index_url=None, **kwargs):
    """The one-machine report and the chunked one, as dicts (asserted equal), and the run."""
    one = verify(str(rec), index_url, **kwargs).to_dict()
    report, run = verify_on_cluster(str(rec), index_url, cluster=here(chunk_bytes), **kwargs)
    assert report.to_dict() == one
    return one, run


def test_spans_start_at_record_heads_from_the_index_or_the_framing_scan(tmp_path):
    rec = tmp_path / "data.rec"
    offsets = write_images(rec, 40)
    size = rec.stat().st_size
    for index_url in (None, False):
        with open_source(str(rec)) as source:
            spans = plan_spans(source, 3000, index_url=index_url)
        assert spans[0].start == 0 and spans[-1].stop == size and len(spans) > 5
        assert all(a.stop == b.start for a, b in zip(spans, spans[1:]))
        assert {s.start for s in spans} <= set(offsets)
        assert all(b.start >= 3000 * k for k, b in enumerate(spans))
    with open_source(str(rec)) as source:
        assert plan_spans(source, size) == [Span(0, size)]
        assert is_record_head(source, offsets[3]) and not is_record_head(source, offsets[3] + 4)


def test_a_magic_inside_a_payload_makes_no_false_boundary(tmp_path):
    """A writer that does not cut out magic words leaves plausible heads inside payloads: the
    framing scan finds them, and the walk of the chunk before shows they are not boundaries
    (the chunk is walked again from where that walk stopped, or left out when it lies inside
    a record). Same index and report as one walk, for every chunk size."""
    rec = tmp_path / "raw.rec"
    offsets = write_unescaped(rec)
    one = rebuild_index(str(rec), str(tmp_path / "one.idx"))
    assert one.records == len(offsets)
    corrected = 0
    for chunk_bytes in (100, 300, 700, 1000, 1 << 20):
        result, run = index_on_cluster(str(rec), str(tmp_path / "two.idx"),
                                       cluster=here(chunk_bytes))
        assert (tmp_path / "two.idx").read_text() == (tmp_path / "one.idx").read_text()
        assert result == one._replace(index_url=str(tmp_path / "two.idx"))
        corrected += run.repaired + run.skipped
        same_verify(rec, chunk_bytes, index_url=False)
    assert corrected > 0  # false boundaries were planned, and corrected


def test_a_wrong_index_offset_is_no_boundary(tmp_path):
    """An .idx offset pointing at a fake head inside a payload: planned as a boundary, caught
    by the walk before it. The report (which lists the bad entry) equals one walk's."""
    rec = tmp_path / "raw.rec"
    offsets = write_unescaped(rec)
    fake = offsets[2] + 8 + 24 + 40 + 5 * 200  # a fake head inside record 2's payload
    with open_source(str(rec)) as source:
        assert is_record_head(source, fake)
    keys = list(range(len(offsets))) + [99]
    (tmp_path / "raw.idx").write_text("".join(f"{k}\t{o}\n" for k, o in
                                              zip(keys, sorted(offsets + [fake]))))
    assert offsets[2] < 1200 < fake < offsets[3]  # the boundary near 1200 comes from the .idx
    one, run = same_verify(rec, 1200)
    assert one["counts"] == {"index-not-at-head": 1}
    assert run.repaired + run.skipped > 0


@pytest.mark.parametrize("chunk_bytes", [512, 2000, 7000])
def test_verify_of_a_damaged_file_equals_one_walk(tmp_path, chunk_bytes):
    """Framing damage, garbage between records, a truncated tail, an undecodable image, a bad
    header, a checksum mismatch and index problems, the listing capped at 2 per kind: the same
    report (record numbers, offsets, order, counts) as one walk."""
    rec = tmp_path / "data.rec"
    offsets = write_images(rec, 30)
    sums = verify(str(rec), decoder=get_decoder("auto"), write_sums=True)
    assert sums.sums_written
    with recpipe.RecordWriter(str(tmp_path / "extra.rec"), sums=False) as writer:
        writer.write(pack(IRHeader(0, 1.0, 7, 0), b"not an image"))
        writer.write(b"\1\2")  # shorter than an IRHeader
    blob = bytearray(rec.read_bytes())
    blob[offsets[4]:offsets[4] + 4] = b"XXXX"  # bad magic
    blob[offsets[9] + 40] ^= 0xFF  # a payload byte: checksum mismatch, decode may fail
    blob[offsets[23] + 60] ^= 0xFF
    rec.write_bytes(bytes(blob))
    for decoder in (None, get_decoder("auto")):
        one, _ = same_verify(rec, chunk_bytes, decoder=decoder, limit=1)
        assert one["counts"]["bad-record"] == 1 and one["counts"]["checksum-mismatch"] == 2
        listed = collections.Counter(p["kind"] for p in one["problems"])
        assert set(listed.values()) == {1}  # 1 listed per kind, the others counted
    blob[offsets[20]:offsets[20]] = b"garbage!"  # between records (shifts the rest)
    blob[offsets[12]:offsets[12]] = (tmp_path / "extra.rec").read_bytes()  # not in the .idx
    rec.write_bytes(bytes(blob[:-5]))  # and a truncated tail
    one, _ = same_verify(rec, chunk_bytes, decoder=get_decoder("auto"), limit=2)
    assert {"bad-header", "decode-failed", "not-in-index", "index-not-at-head",
            "sums-stale"} <= set(one["counts"])
    assert any(p.get("record", 0) > 20 for p in one["problems"])


def test_write_sums_publishes_the_same_sidecar(tmp_path):
    rec = tmp_path / "data.rec"
    write_images(rec, 30)
    sidecar = tmp_path / "data.sums"
    sidecar.unlink()
    one = verify(str(rec), decoder=get_decoder("auto"), write_sums=True)
    expected = sidecar.read_bytes()
    sidecar.unlink()
    seen = []
    report, run = verify_on_cluster(str(rec), decoder=get_decoder("auto"), write_sums=True,
                                    cluster=here(1500), progress=seen.append)
    assert report.to_dict() == one.to_dict() and run.chunks > 5
    assert sidecar.read_bytes() == expected
    assert len(seen) == run.chunks and sum(seen) == rec.stat().st_size  # progress, by chunk
    assert not os.path.exists(work_url_for(str(rec), "verify"))  # removed when published
    # and the sidecar is checked in chunks as in one walk
    one, _ = same_verify(rec, 1500)
    assert one["sums_checked"] == 30


def test_write_sums_publishes_nothing_when_a_record_fails(tmp_path):
    rec = tmp_path / "data.rec"
    offsets = write_images(rec, 12)
    (tmp_path / "data.sums").unlink()
    patch(rec, offsets[7] + 8 + 24 + 2, b"\0\0\0\0")  # JPEG header bytes
    one, _ = same_verify(rec, 1000, decoder=get_decoder("auto"), write_sums=True)
    assert one["sums_written"] is None and not (tmp_path / "data.sums").exists()


def test_insightface_layout_is_known_to_every_chunk(tmp_path):
    """The header and identity records (no image bytes) pass in every chunk, not only in the
    one holding record 0."""
    from tests.packing.test_extract import write_faces

    rec = tmp_path / "faces.rec"
    write_faces(str(rec), per_id=(4, 3, 5, 2))
    one, _ = same_verify(rec, 600, decoder=get_decoder("auto"))
    assert one["ok"] and one["decoded"] == 14


def test_index_equals_rebuild_index(tmp_path):
    rec = tmp_path / "data.rec"
    offsets = write_images(rec, 30)
    for positions in (False, True):
        one = rebuild_index(str(rec), str(tmp_path / "one.idx"), positions=positions)
        two, run = index_on_cluster(str(rec), str(tmp_path / "two.idx"), positions=positions,
                                    cluster=here(2000))
        assert (tmp_path / "one.idx").read_bytes() == (tmp_path / "two.idx").read_bytes()
        assert two._replace(index_url=one.index_url) == one and run.chunks > 5
    patch(rec, offsets[17], b"XXXX")
    with pytest.raises(RecordFormatError) as single:
        rebuild_index(str(rec), str(tmp_path / "one.idx"))
    with pytest.raises(RecordFormatError) as chunked:
        index_on_cluster(str(rec), str(tmp_path / "three.idx"), cluster=here(2000))
    assert str(chunked.value) == str(single.value) and chunked.value.record == 17
    assert not (tmp_path / "three.idx").exists()
    one = rebuild_index(str(rec), str(tmp_path / "one.idx"), skip_bad=True)
    two, run = index_on_cluster(str(rec), str(tmp_path / "three.idx"), skip_bad=True,
                                cluster=here(2000))
    assert run.resumed == run.chunks  # the failed run's chunks were kept
    assert two.skipped == one.skipped == 1
    assert (tmp_path / "one.idx").read_bytes() == (tmp_path / "three.idx").read_bytes()


class Stop(Exception):
    pass


def stop_after(chunks):
    seen = []

    def progress(nbytes):
        seen.append(nbytes)
        if len(seen) >= chunks:
            raise Stop

    return progress


def test_an_interrupted_run_continues_and_publishes_once(tmp_path):
    rec = tmp_path / "data.rec"
    write_images(rec, 30)
    (tmp_path / "data.sums").unlink()
    expected = verify(str(rec), decoder=get_decoder("auto"), write_sums=True).to_dict()
    expected_sums = (tmp_path / "data.sums").read_bytes()
    (tmp_path / "data.sums").unlink()
    with pytest.raises(Stop):
        verify_on_cluster(str(rec), decoder=get_decoder("auto"), write_sums=True,
                          cluster=here(1500), progress=stop_after(3))
    work = work_url_for(str(rec), "verify")
    assert not (tmp_path / "data.sums").exists()
    assert sorted(os.listdir(work)) == ["chunk-000000.npz", "chunk-000001.npz",
                                        "chunk-000002.npz", "plan.json"]
    report, run = verify_on_cluster(str(rec), decoder=get_decoder("auto"), write_sums=True,
                                    cluster=here(1500))
    assert run.resumed == 3 and run.chunks > 5
    assert report.to_dict() == expected
    assert (tmp_path / "data.sums").read_bytes() == expected_sums
    assert not os.path.exists(work)


def test_a_changed_file_is_not_resumed(tmp_path):
    rec = tmp_path / "data.rec"
    write_images(rec, 30)
    with pytest.raises(Stop):
        index_on_cluster(str(rec), cluster=here(1500), progress=stop_after(2))
    write_images(rec, 30, seed=50)  # another file at the same path (same size or not)
    result, run = index_on_cluster(str(rec), str(tmp_path / "two.idx"), cluster=here(1500))
    assert run.resumed == 0
    rebuild_index(str(rec), str(tmp_path / "one.idx"))
    assert (tmp_path / "one.idx").read_bytes() == (tmp_path / "two.idx").read_bytes()


def test_another_job_or_options_start_over(tmp_path):
    rec = tmp_path / "data.rec"
    write_images(rec, 20)
    with pytest.raises(Stop):
        index_on_cluster(str(rec), str(tmp_path / "x.idx"), cluster=here(1500),
                         progress=stop_after(2))
    _, run = index_on_cluster(str(rec), str(tmp_path / "x.idx"), positions=True,
                              cluster=here(1500))
    assert run.resumed == 0  # positions need no header ids: other results


def test_a_damaged_chunk_result_is_computed_again(tmp_path):
    rec = tmp_path / "data.rec"
    write_images(rec, 30)
    with pytest.raises(Stop):
        index_on_cluster(str(rec), str(tmp_path / "two.idx"), cluster=here(1500),
                         progress=stop_after(3))
    work = work_url_for(str(tmp_path / "two.idx"), "index")
    with open(os.path.join(work, "chunk-000001.npz"), "r+b") as f:
        f.truncate(100)
    _, run = index_on_cluster(str(rec), str(tmp_path / "two.idx"), cluster=here(1500))
    assert run.resumed == 3
    rebuild_index(str(rec), str(tmp_path / "one.idx"))
    assert (tmp_path / "one.idx").read_bytes() == (tmp_path / "two.idx").read_bytes()


def test_chunk_results_are_read_without_pickle(tmp_path):
    result = ChunkResult({"start": 0, "end": 8, "records": 1, "bad": [[1, 2, "why", 3, None]]},
                         {"offsets": np.arange(3, dtype=np.int64)})
    again = ChunkResult.from_bytes(result.to_bytes())
    assert again.meta == result.meta and again.arrays["offsets"].tolist() == [0, 1, 2]
    folder = WorkFolder(str(tmp_path / "work"))
    with open(tmp_path / "evil.npz", "wb") as f:
        np.savez(f, __meta__=np.frombuffer(b"{}", np.uint8), x=np.array([object()]))
    os.makedirs(tmp_path / "work")
    os.replace(tmp_path / "evil.npz", tmp_path / "work" / "chunk-000000.npz")
    assert folder.load(0) is None  # an object array is refused, not unpickled
    (tmp_path / "work" / "plan.json").write_text(json.dumps({"file": "other"}))
    assert folder.start({"file": "this"}) == (None, set())
    assert not (tmp_path / "work").exists()  # another file's chunks are removed


def test_empty_and_foreign_files_give_the_same_report(tmp_path):
    (tmp_path / "empty.rec").write_bytes(b"")
    same_verify(tmp_path / "empty.rec", 100)
    (tmp_path / "photo.rec").write_bytes(jpeg(seed=3) * 20)  # not RecordIO at all
    one, _ = same_verify(tmp_path / "photo.rec", 1000)
    assert one["counts"] == {"bad-record": 1}
    result, _ = index_on_cluster(str(tmp_path / "empty.rec"), cluster=here(100))
    assert result.records == 0 and (tmp_path / "empty.idx").read_bytes() == b""


def test_a_work_dir_of_the_users_keeps_what_is_not_ours(tmp_path):
    """``--work-dir`` names the folder the work folder is made in; removing the work folder
    removes the plan, the results and their temporary files only."""
    rec = tmp_path / "data.rec"
    write_images(rec, 20)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("the user's")
    with pytest.raises(Stop):
        index_on_cluster(str(rec), str(tmp_path / "x.idx"), progress=stop_after(2),
                         cluster=here(1500, work_dir=str(mine)))
    work = mine / ".x.idx.index-chunks"
    assert (work / "plan.json").exists() and not os.path.exists(work_url_for(
        str(tmp_path / "x.idx"), "index"))
    (work / "notes.txt").write_text("also the user's")
    (work / ".chunk-000009.npz.0123456789ab.tmp").write_bytes(b"left by a lost task")
    _, run = index_on_cluster(str(rec), str(tmp_path / "x.idx"),
                              cluster=here(1500, work_dir=str(mine)))
    assert run.resumed == 2
    assert sorted(os.listdir(work)) == ["notes.txt"] and (mine / "keep.txt").exists()
