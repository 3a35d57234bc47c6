"""``recpipe retrofit``: restart markers added to a packed ``.rec`` without packing it again; the
result is what ``pack --restart`` writes, published as one commit, and nothing on an error."""

import json

import cv2
import numpy as np
import pytest

import recpipe
import recpipe.packing.retrofit as retrofit_module
from recpipe._optional import extension
from recpipe.cli import main
from recpipe.image.restart import restart_layout
from recpipe.packing.packer import pack_dataset
from recpipe.packing.retrofit import retrofit_restarts

pytestmark = pytest.mark.skipif(extension("_batch") is None, reason="recpipe._batch is not built")

SIDECARS = (".rec", ".idx", ".sums", ".sources.jsonl")


def _photo(h, w, seed):
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (h // 5 + 1, w // 5 + 1, 3), dtype=np.uint8)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)


def _jpeg(img, progressive=False):
    params = [cv2.IMWRITE_JPEG_QUALITY, 90] + ([cv2.IMWRITE_JPEG_PROGRESSIVE, 1] if progressive
                                               else [])
    return cv2.imencode(".jpg", img, params)[1].tobytes()


@pytest.fixture
def photos(tmp_path):
    root = tmp_path / "photos"
    for i, (h, w) in enumerate([(90, 120), (64, 200), (131, 77), (48, 48), (100, 100)]):
        path = root / f"c{i % 2}" / f"{i}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_jpeg(_photo(h, w, i), progressive=i == 3))
    return root


def _files(prefix):
    return {suffix: (prefix.parent / (prefix.name + suffix)).read_bytes() for suffix in SIDECARS
            if (prefix.parent / (prefix.name + suffix)).exists()}


def test_in_place_gives_what_pack_with_markers_writes(photos, tmp_path):
    pack_dataset(str(photos), str(tmp_path / "plain"), restart="off", workers=1)
    pack_dataset(str(photos), str(tmp_path / "auto"), restart="auto", workers=1)
    summary = retrofit_restarts(str(tmp_path / "plain.rec"), threads=2)
    assert (summary.records, summary.restarted, summary.unchanged) == (5, 4, 1)  # progressive
    assert summary.sources and summary.output_bytes < summary.input_bytes
    assert _files(tmp_path / "plain") == _files(tmp_path / "auto")
    assert len(_files(tmp_path / "plain")) == 4
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name or "journal" in p.name]


def test_out_leaves_the_source_alone(photos, tmp_path):
    pack_dataset(str(photos), str(tmp_path / "plain"), restart="off", workers=1)
    before = _files(tmp_path / "plain")
    retrofit_restarts(str(tmp_path / "plain.rec"), str(tmp_path / "rows"), restart=1)
    assert _files(tmp_path / "plain") == before
    with recpipe.RecordReader(str(tmp_path / "rows.rec")) as reader:
        layouts = [restart_layout(recpipe.unpack(reader[i])[1]) for i in range(len(reader))]
    assert sum(layout is not None for layout in layouts) == 4
    assert all(layout.row_group == 1 and layout.interval == layout.mcus_per_row
               for layout in layouts if layout is not None)


def test_headers_labels_keys_and_other_records_are_kept(tmp_path):
    """Multi-label headers, string keys, a PNG and a record that is not an image at all."""
    rec = str(tmp_path / "mixed.rec")
    items = [
        ("a", recpipe.IRHeader(0, [1.0, 2.5, -3.0], 7, 0), _jpeg(_photo(80, 96, 1))),
        ("b", recpipe.IRHeader(0, 4.0, 8, 9), cv2.imencode(".png", _photo(20, 30, 2))[1].tobytes()),
        ("c", None, b"not a record header at all"),
        ("d", recpipe.IRHeader(0, 5.0, 10, 0), _jpeg(_photo(40, 70, 3))),
    ]
    with recpipe.RecordWriter(rec) as writer:
        for key, header, image in items:
            writer.write(image if header is None else recpipe.pack(header, image), key)
    summary = retrofit_restarts(rec)
    assert (summary.restarted, summary.unchanged, summary.sources) == (2, 2, False)
    with recpipe.RecordReader(rec, key_type=str) as reader:
        assert list(reader.keys) == ["a", "b", "c", "d"]
        payloads = [reader.read(i) for i in range(len(reader))]
    assert payloads[1] == recpipe.pack(items[1][1], items[1][2])
    assert payloads[2] == items[2][2]
    for (_, header, image), payload in zip(items[::3], payloads[::3]):
        got_header, got_image = recpipe.unpack(payload)
        want_header, _ = recpipe.unpack(recpipe.pack(header, image))
        assert (got_header.flag, got_header.id, got_header.id2) == \
            (want_header.flag, want_header.id, want_header.id2)
        assert np.array_equal(got_header.label, want_header.label)
        assert payload[:len(payload) - len(got_image)] == \
            recpipe.pack(header, image)[:len(payload) - len(got_image)]
        assert got_image != image and np.array_equal(
            cv2.imdecode(np.frombuffer(got_image, np.uint8), 1),
            cv2.imdecode(np.frombuffer(image, np.uint8), 1))


def _packed(photos, tmp_path):
    pack_dataset(str(photos), str(tmp_path / "plain"), restart="off", workers=1)
    return tmp_path / "plain.rec", _files(tmp_path / "plain")


def test_a_damaged_record_stops_it_and_nothing_is_published(photos, tmp_path):
    rec, before = _packed(photos, tmp_path)
    data = bytearray(rec.read_bytes())
    data[len(data) // 2] ^= 0xFF
    rec.write_bytes(bytes(data))
    with pytest.raises(recpipe.RecordFormatError):
        retrofit_restarts(str(rec))
    assert rec.read_bytes() == bytes(data)
    assert {k: v for k, v in _files(tmp_path / "plain").items() if k != ".rec"} == \
        {k: v for k, v in before.items() if k != ".rec"}
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name or "journal" in p.name]


def test_a_failure_midway_publishes_nothing(photos, tmp_path, monkeypatch):
    rec, before = _packed(photos, tmp_path)
    calls = []

    def failing(image, policy):
        calls.append(1)
        if len(calls) == 3:
            raise MemoryError("out of memory")
        return None

    monkeypatch.setattr(retrofit_module, "add_restarts", failing)
    with pytest.raises(MemoryError):
        retrofit_restarts(str(rec), threads=1)
    assert _files(tmp_path / "plain") == before
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name or "journal" in p.name]


def test_records_the_index_does_not_list_are_not_lost(tmp_path):
    rec = str(tmp_path / "gaps.rec")
    with recpipe.RecordWriter(rec) as writer:
        writer.write(recpipe.pack(recpipe.IRHeader(0, 1.0, 0, 0), _jpeg(_photo(32, 32, 1))), 0)
        writer.write(b"unindexed", indexed=False)
        writer.write(recpipe.pack(recpipe.IRHeader(0, 2.0, 1, 0), _jpeg(_photo(32, 32, 2))), 1)
    before = open(rec, "rb").read()
    with pytest.raises(recpipe.RecordFormatError, match="not listed by the index"):
        retrofit_restarts(rec)
    assert open(rec, "rb").read() == before


def test_an_index_out_of_file_order_is_refused(tmp_path):
    rec = tmp_path / "order.rec"
    with recpipe.RecordWriter(str(rec)) as writer:
        for i in range(3):
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0),
                                      _jpeg(_photo(32, 32, i))), i)
    idx = tmp_path / "order.idx"
    lines = idx.read_text().splitlines(keepends=True)
    idx.write_text("".join([lines[1], lines[0], lines[2]]))
    with pytest.raises(ValueError, match="file order"):
        retrofit_restarts(str(rec))


def test_off_is_refused(photos, tmp_path):
    rec, _ = _packed(photos, tmp_path)
    with pytest.raises(ValueError, match="off"):
        retrofit_restarts(str(rec), restart="off")


def test_cli(photos, tmp_path, capsys):
    rec, _ = _packed(photos, tmp_path)
    assert main(["retrofit", str(rec), "--out", str(tmp_path / "a"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "4 of 5 images given restart markers (auto), 1 copied as they were" in out
    assert main(["retrofit", str(rec), str(tmp_path / "a.rec"), "--restart", "2", "--json"]) == 0
    summaries = json.loads(capsys.readouterr().out)
    assert [s["restart"] for s in summaries] == ["2", "2"]
    assert main(["retrofit", str(rec), str(tmp_path / "a.rec"), "--out", "x"]) == 2
    assert main(["retrofit", str(rec), "--restart", "off", "--no-progress"]) == 1
    assert "adds no markers" in capsys.readouterr().err
