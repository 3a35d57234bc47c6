"""``pack`` records each record's source file; errors that stop a run say which record, which
source file and how to go on (issue 31, item 4)."""

import hashlib
import json
import os

import pytest

from recpipe import ImageLoader
from recpipe.errors import DecodeError, RecordFormatError
from recpipe.io.reader import RecordReader
from recpipe.io.sidecars.record_sources import RecordSources, sources_url_for
from recpipe.packing.extract import extract_records
from recpipe.packing.packer import pack_dataset

from .test_packer import _Stop, _stop_after, photos  # noqa: F401 - a fixture


def _sources(url):
    lines = open(sources_url_for(url)).read().splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:-1]], json.loads(lines[-1])


def test_pack_records_each_records_source(photos, tmp_path):  # noqa: F811
    out = tmp_path / "o"
    summary = pack_dataset(photos, out, shards=2, resize=14, workers=0)
    for shard in summary.splits["all"]:
        header, entries, trailer = _sources(shard.rec)
        assert header == {"recpipe_sources": 1, "root": str(photos)}
        with RecordReader(shard.rec) as reader:
            assert [e["offset"] for e in entries] == list(reader.offsets)
            assert [e["key"] for e in entries] == list(reader.keys)
        for entry in entries:
            data = (photos / entry["path"]).read_bytes()
            assert entry["size"] == len(data)
            assert entry["sha256"] == hashlib.sha256(data).hexdigest()
        idx = open(shard.idx, "rb").read()
        assert trailer == {"end": True, "records": len(entries),
                           "rec_bytes": os.path.getsize(shard.rec),
                           "idx_sha256": hashlib.sha256(idx).hexdigest()}


def test_lookups_find_every_record_by_offset(photos, tmp_path):  # noqa: F811
    pack_dataset(photos, tmp_path / "o", pass_through=True, workers=0)
    rec = str(tmp_path / "o.rec")
    _, entries, _ = _sources(rec)
    with RecordSources.open(rec, rec_size=os.path.getsize(rec)) as sources:
        for entry in entries:
            found = sources.lookup(entry["offset"], entry["key"])
            assert found.path == entry["path"] and found.where() == f"{photos}/{entry['path']}"
        assert sources.lookup(entries[0]["offset"] + 1) is None
        assert sources.lookup(entries[0]["offset"], key="other") is None
    assert RecordSources.open(rec, rec_size=1) is None  # the .rec changed: not used


def test_lookups_bisect_a_large_sidecar(tmp_path):
    from recpipe.io.sidecars.record_sources import entry_line, header_line, trailer_line

    rec = str(tmp_path / "big.rec")
    offsets = [i * 37 + (i % 5) for i in range(30000)]
    offsets = sorted(set(offsets))
    with open(sources_url_for(rec), "wb") as f:
        f.write(header_line("/src"))
        for i, offset in enumerate(offsets):
            f.write(entry_line(offset, i, f"class{i % 7}/img{i}.jpg", i, "%064x" % i))
        f.write(trailer_line(len(offsets), 10 ** 7, "0" * 64))
    with RecordSources.open(rec, rec_size=10 ** 7) as sources:
        for i in (0, 1, 2, 777, 12345, len(offsets) - 2, len(offsets) - 1):
            assert sources.lookup(offsets[i], i).path == f"class{i % 7}/img{i}.jpg"
        assert sources.lookup(offsets[-1] + 1) is None and sources.lookup(-5) is None


def test_resume_keeps_the_sources_of_the_kept_records(photos, tmp_path):  # noqa: F811
    args = dict(resize=14, seed=4, flush_every=1, workers=0)
    pack_dataset(photos, tmp_path / "clean" / "o", **args)
    with pytest.raises(_Stop):
        pack_dataset(photos, tmp_path / "run" / "o", progress=_stop_after(5), **args)
    temp = tmp_path / "run" / ".o.sources.jsonl.pack.tmp"
    assert len(temp.read_text().splitlines()) >= 5
    with open(temp, "ab") as f:
        f.write(b'{"offset": 999999, "torn')  # a torn line after the last checkpoint
    resumed = pack_dataset(photos, tmp_path / "run" / "o", resume=True, **args)
    assert resumed.resumed_records >= 4
    for name in ("o.sources.jsonl", "o.rec", "o.idx", "o.sums"):
        assert (tmp_path / "run" / name).read_bytes() == (tmp_path / "clean" / name).read_bytes()


def _damage(rec, position, sums):
    """Flip a byte inside record ``position``'s image (the framing stays)."""
    with RecordReader(rec) as reader:
        start, end = reader.span(position)
        key = reader.keys[position]
    data = bytearray(open(rec, "rb").read())
    data[(start + end) // 2] ^= 0xFF
    open(rec, "wb").write(bytes(data))
    if not sums:
        os.remove(rec[:-4] + ".sums")
    return key


def _stop_error(rec, **options):
    with ImageLoader(rec, 4, (3, 16, 16), resize=16, threads=1, **options) as loader:
        with pytest.raises((RecordFormatError, DecodeError)) as raised:
            for _ in loader:
                pass
    return raised.value


def test_a_checksum_error_names_the_key_the_source_and_the_way_on(photos, tmp_path):  # noqa: F811
    pack_dataset(photos, tmp_path / "o", pass_through=True, workers=0, shuffle=False)
    rec = str(tmp_path / "o.rec")
    key = _damage(rec, 5, sums=True)
    _, entries, _ = _sources(rec)
    error = _stop_error(rec)
    text = str(error)
    assert "checksum mismatch" in text and error.key == key and f"key {key})" in text
    assert f"packed from {photos}/{entries[5]['path']}" in text
    assert "on_error='skip'" in text and "on_error='replace'" in text
    assert f"recpipe verify {rec}" in text
    with ImageLoader(rec, 4, (3, 16, 16), resize=16, threads=1, on_error="skip") as loader:
        assert sum(len(b.images) for b in loader) == len(entries) - 1  # the way on works


def test_a_decode_error_names_the_source_file(photos, tmp_path):  # noqa: F811
    (photos / "dog" / "zz_broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    pack_dataset(photos, tmp_path / "o", pass_through=True, workers=0, shuffle=False)
    rec = str(tmp_path / "o.rec")
    error = _stop_error(rec)
    assert isinstance(error, DecodeError)
    assert f"packed from {photos}/dog/zz_broken.jpg" in str(error)
    assert f"recpipe verify --decode {rec}" in str(error)


def test_without_a_sidecar_the_error_still_names_the_key_and_the_way_on(photos, tmp_path):  # noqa: F811
    pack_dataset(photos, tmp_path / "o", pass_through=True, workers=0, sources=False)
    rec = str(tmp_path / "o.rec")
    assert not os.path.exists(sources_url_for(rec))
    key = _damage(rec, 3, sums=True)
    error = _stop_error(rec)
    assert error.key == key and "packed from" not in str(error)
    assert "on_error='skip'" in str(error)


def test_extract_stops_naming_the_source(photos, tmp_path):  # noqa: F811
    pack_dataset(photos, tmp_path / "o", pass_through=True, workers=0, shuffle=False)
    rec = str(tmp_path / "o.rec")
    _damage(rec, 2, sums=True)
    _, entries, _ = _sources(rec)
    with pytest.raises(RecordFormatError) as raised:
        extract_records(rec, str(tmp_path / "out"), workers=1)
    assert f"packed from {photos}/{entries[2]['path']}" in str(raised.value)
    assert f"recpipe verify {rec}" in str(raised.value)


def test_verify_and_inspect_name_the_source(photos, tmp_path, capsys):  # noqa: F811
    from recpipe.cli import main

    assert main(["pack", str(photos), str(tmp_path / "o"), "--pass-through", "--workers", "0",
                 "--no-progress", "--no-shuffle"]) == 0
    rec = str(tmp_path / "o.rec")
    _damage(rec, 4, sums=True)
    _, entries, _ = _sources(rec)
    capsys.readouterr()
    assert main(["verify", rec, "--no-progress"]) == 1
    text = capsys.readouterr().out
    assert f"packed from {photos}/{entries[4]['path']}" in text
    assert main(["verify", rec, "--no-progress", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["sources"][str(entries[4]["offset"])]["path"] == entries[4]["path"]
    assert main(["inspect", rec, "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert f"sources: {len(entries)} records packed from {photos}" in text


def test_pack_without_sources(photos, tmp_path):  # noqa: F811
    from recpipe.cli import main

    assert main(["pack", str(photos), str(tmp_path / "o"), "--pass-through", "--workers", "0",
                 "--no-progress", "--no-sources"]) == 0
    assert not os.path.exists(sources_url_for(str(tmp_path / "o.rec")))
