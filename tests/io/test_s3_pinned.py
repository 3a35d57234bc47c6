"""An S3 object replaced while a reader has it open fails clearly instead of mixing versions
(issue 20, item 6); moto server on loopback."""

import numpy as np
import pytest

import recpipe
from recpipe.errors import RemoteReadError
from recpipe.io.remote.ranges import ObjectChangedError
from recpipe.io.remote.ranges.s3 import S3HttpRanges
from recpipe.io.sources import open_source


def _write(url, options, labels):
    with recpipe.RecordWriter(url, storage_options=options) as writer:
        for label in labels:
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(label), 0, 0), b"x" * 3000))


def test_an_object_replaced_under_an_open_source_raises_naming_it(s3):
    base, options = s3
    url = f"{base}/pinned.rec"
    _write(url, options, range(0, 400, 10))
    with open_source(url, options) as source:
        assert isinstance(source.ranges, S3HttpRanges) and source.ranges.etag
        before = bytes(source.read(0, 4000))
        _write(url, options, range(1100, 1500, 10))  # same size, other records
        with pytest.raises(RemoteReadError, match="changed after it was opened") as info:
            source.read(40000, 4000)
        assert url in str(info.value)
        assert isinstance(info.value.__cause__, ObjectChangedError)
        assert info.value.attempts == 1  # not retried
    with open_source(url, options) as source:  # opened again: the new version
        assert bytes(source.read(0, 4000)) != before


def test_a_reader_does_not_hand_out_records_of_two_versions(s3):
    base, options = s3
    url = f"{base}/labels.rec"
    _write(url, options, range(0, 400, 10))
    labels = []
    with recpipe.RecordReader(url, storage_options=options) as reader:
        labels.append(recpipe.unpack(reader[0])[0].label)
        _write(url, options, range(1100, 1500, 10))
        with pytest.raises(RemoteReadError, match="changed"):
            for i in range(1, len(reader)):
                labels.append(recpipe.unpack(reader[i])[0].label)
    assert all(label < 1000 for label in np.atleast_1d(labels))


@pytest.mark.parametrize("choice", ["fsspec", "auto-fallback"])
def test_the_s3fs_path_is_pinned_too(s3, choice):
    """``s3_ranges="fsspec"`` (and the default's fallback through s3fs, taken when a server
    refuses presigned URLs) on an unversioned bucket: the ETag at open is pinned (If-Match, and
    each response's ETag compared), so a replaced object fails naming the URL (issue 30,
    item 16)."""
    base, options = s3
    url = f"{base}/fsspec-pinned.rec"
    _write(url, options, range(0, 400, 10))
    recpipe_options = {**options["recpipe"],
                       "s3_ranges": "fsspec" if choice == "fsspec" else "auto"}
    options = {**options, "recpipe": recpipe_options}
    with open_source(url, options) as source:
        if choice == "auto-fallback":
            source.ranges.fell_back = True  # as after a refused presigned request
        before = bytes(source.read(0, 4000))
        _write(url, options, range(1100, 1500, 10))  # same size, other records
        with pytest.raises(RemoteReadError, match="changed after it was opened") as info:
            source.read(40000, 4000)
        assert url in str(info.value)
        assert isinstance(info.value.__cause__, ObjectChangedError)
        assert info.value.attempts == 1
    with open_source(url, options) as source:
        assert bytes(source.read(0, 4000)) != before


def test_a_server_ignoring_if_match_is_caught_by_the_response_etag(s3):
    """A server that ignores If-Match still names the object's ETag in every response: a
    different one fails the read."""
    from recpipe.io.remote.ranges.s3 import S3FsspecRanges

    base, options = s3
    url = f"{base}/etag-compare.rec"
    _write(url, options, range(0, 400, 10))
    options = {**options, "recpipe": {**options["recpipe"], "s3_ranges": "fsspec"}}
    with open_source(url, options) as source:
        assert isinstance(source.ranges, S3FsspecRanges)
        source.ranges.send_if_match = False
        _write(url, options, range(1100, 1500, 10))
        with pytest.raises(RemoteReadError, match="changed after it was opened"):
            source.read(40000, 4000)
