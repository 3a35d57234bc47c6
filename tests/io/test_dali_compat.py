"""NVIDIA DALI's CPU reader (``fn.readers.mxnet``) reads a recpipe pack unchanged with its
``.sums`` checksum sidecar beside it: same record bytes, same labels. Skipped where DALI is not
installed (``benchmarks/peers/setup_peers.sh`` installs it; CI does not, it is large)."""

import os

import numpy as np
import pytest

import recpipe

from .._damage import write_pack


def _dali_records(rec, count):
    dali = pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn, pipeline_def

    idx = os.path.splitext(rec)[0] + ".idx"

    @pipeline_def(batch_size=count, num_threads=1, device_id=None)
    def pipeline():
        payloads, labels = fn.readers.mxnet(path=[rec], index_path=[idx], random_shuffle=False)
        return payloads, labels

    pipe = pipeline()
    pipe.build()
    payloads, labels = pipe.run()
    assert dali.__version__
    return ([np.asarray(payloads[i]).tobytes() for i in range(count)],
            [float(np.asarray(labels[i]).ravel()[0]) for i in range(count)])


def test_dali_reads_a_pack_with_its_sidecar(tmp_path):
    count = 12
    url = write_pack(tmp_path / "d.rec", count)
    assert os.path.exists(tmp_path / "d.sums")
    images, labels = _dali_records(url, count)
    with recpipe.RecordReader(url) as reader:  # checked against the sidecar
        expected = [recpipe.unpack(reader[i]) for i in range(count)]
    assert images == [image for _, image in expected]
    assert labels == [float(header.label) for header, _ in expected]
