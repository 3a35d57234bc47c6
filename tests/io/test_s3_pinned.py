"""An S3 object replaced while a reader has it open fails clearly instead of mixing versions
(issue 20, item 6); moto server on loopback."""

import numpy as np
import pytest

import recpipe
from recpipe.errors import RemoteReadError
from recpipe.io.ranges import ObjectChangedError
from recpipe.io.ranges.s3 import S3HttpRanges
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
