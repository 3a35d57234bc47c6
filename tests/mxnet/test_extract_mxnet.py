"""``recpipe extract`` on files written by the real mxnet 1.9.1: an InsightFace-layout face
dataset (``mx.recordio.pack_img``) and a multi-label im2rec.py pack, compared record by record
with what mxnet reads back; then extract -> ``recpipe pack OUT/<stem>.lst`` -> the same records."""

import base64

import pytest

from recpipe.cli import main
from recpipe.io.format.header import unpack
from recpipe.io.reader import RecordReader
from recpipe.packing.extract import extract_records

from .test_im2rec_parity import write_lists
from .test_recordio_api import run_scenario

pytestmark = pytest.mark.mxnet


def _mx_records(mx, rec):
    """``{key: (header dict, image bytes)}`` as MXIndexedRecordIO reads ``rec``."""
    read = mx("read-indexed", {"files": [[str(rec), str(rec.with_suffix(".idx"))]]})["files"][0]
    return {key: (entry, base64.b64decode(entry["image"]))
            for key, entry in zip(read["keys"], read["records"])}


def test_insightface_file_by_mxnet(mxnet_python, mx, tmp_path):
    made = run_scenario(mxnet_python, "mxnet", "write-faces", tmp_path)
    rec = tmp_path / "faces" / "train.rec"
    theirs = _mx_records(mx, rec)
    header = theirs[0][0]
    first_identity, end = (int(v) for v in header["label"])
    summary = extract_records(str(rec), str(tmp_path / "out"), shard_size=4000)
    assert summary.images == made["images"] == first_identity - 1
    assert summary.skipped_records == 1 + made["identities"] == 1 + end - first_identity
    written = sorted(p for p in (tmp_path / "out").rglob("*.jpg"))
    assert len(written) == summary.images
    for key in range(1, first_identity):
        entry, image = theirs[key]
        assert (tmp_path / "out" / ("%d" % entry["label"]) / f"{key}.jpg").read_bytes() == image


def test_multilabel_im2rec_file_round_trip(mx, image_tree, tmp_path):
    folder = tmp_path / "mx"
    write_lists(folder, image_tree, "multi")
    result = mx("im2rec", {"runs": [[str(folder / "data"), str(image_tree), "--pass-through",
                                     "--pack-label"]]})["runs"][0]
    assert result["error"] is None, result["error"]
    rec = folder / "data.rec"
    theirs = _mx_records(mx, rec)
    summary = extract_records(str(rec), str(tmp_path / "out"), workers=2, shard_size=3000)
    assert summary.images == len(theirs) and summary.chunks > 1
    lines = (tmp_path / "out" / "data.lst").read_text().splitlines()
    for line, (key, (entry, image)) in zip(lines, theirs.items()):
        fields = line.split("\t")
        assert int(fields[0]) == key == entry["id"]
        assert [float(v) for v in fields[1:-1]] == pytest.approx(entry["label"])
        assert fields[-1].startswith("%d/" % entry["label"][0])
        assert (tmp_path / "out" / fields[-1]).read_bytes() == image
    assert main(["pack", str(tmp_path / "out" / "data.lst"), str(tmp_path / "again"),
                 "--pass-through", "--pack-label", "--no-progress", "--workers", "1"]) == 0
    with RecordReader(str(rec)) as original, RecordReader(str(tmp_path / "again.rec")) as again:
        assert list(again) == list(original)
        assert list(again.keys) == list(original.keys)
    ours = _mx_records(mx, tmp_path / "again.rec")
    assert {k: v[0] for k, v in ours.items()} == {k: v[0] for k, v in theirs.items()}
    assert unpack(list(RecordReader(str(rec)))[0])[1] == theirs[next(iter(theirs))][1]
