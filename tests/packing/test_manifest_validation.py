"""The pack manifest is untrusted input too: shard names stay in its folder, sizes, SHA-256
digests and record counts are checked, and errors never quote the file's contents."""

import json

import pytest

import recpipe
from recpipe.packing.manifest import (MANIFEST_FORMAT, MANIFEST_VERSION, check_manifest,
                                      iter_records, read_manifest)
from recpipe.packing.shards import file_digest


def _manifest(tmp_path, **shard_changes):
    rec = str(tmp_path / "o-00000-of-00001.rec")
    with recpipe.RecordWriter(rec) as writer:
        for i in range(4):
            writer.write(b"payload%d" % i)
    rec_sha, rec_bytes = file_digest(rec)
    idx_sha, idx_bytes = file_digest(rec[:-4] + ".idx")
    shard = {"rec": "o-00000-of-00001.rec", "idx": "o-00000-of-00001.idx", "records": 4,
             "rec_bytes": rec_bytes, "idx_bytes": idx_bytes, "rec_sha256": rec_sha,
             "idx_sha256": idx_sha, **shard_changes}
    data = {"format": MANIFEST_FORMAT, "version": MANIFEST_VERSION,
            "splits": {"all": {"records": 4, "shards": [shard]}}}
    path = tmp_path / "o.manifest.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_a_good_manifest_checks_out(tmp_path):
    url = _manifest(tmp_path)
    assert check_manifest(url).records == 4
    assert [p for _, p in iter_records(url)] == [b"payload%d" % i for i in range(4)]


@pytest.mark.parametrize("changes, message", [
    ({"rec": "../../etc/passwd"}, "relative"),
    ({"rec": "/etc/passwd"}, "relative"),
    ({"idx": "s3://elsewhere/x.idx"}, "relative"),
    ({"records": "4"}, "integer"),
    ({"rec_bytes": -1}, "integer"),
    ({"rec_sha256": "secret-content"}, "hex"),
])
def test_malformed_entries_are_refused(tmp_path, changes, message):
    with pytest.raises(ValueError, match=message) as caught:
        read_manifest(_manifest(tmp_path, **changes))
    assert "passwd" not in str(caught.value) and "secret" not in str(caught.value)


def test_sizes_digests_and_counts_are_checked(tmp_path):
    with pytest.raises(ValueError, match="records, the manifest says 5"):
        list(iter_records(_manifest(tmp_path, records=5)))
    with pytest.raises(ValueError, match="bytes, the manifest says"):
        check_manifest(_manifest(tmp_path, rec_bytes=3))
    with pytest.raises(ValueError, match="SHA-256"):
        check_manifest(_manifest(tmp_path, idx_sha256="0" * 64))


def test_malformed_json_is_a_clear_error_without_contents(tmp_path):
    path = tmp_path / "o.manifest.json"
    path.write_text('{"format": "recpipe-pack-manifest", SECRET-TOKEN')
    with pytest.raises(ValueError, match="not a JSON manifest") as caught:
        read_manifest(str(path))
    assert "SECRET" not in str(caught.value)
