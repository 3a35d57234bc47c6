"""``import recpipe.mx as mx`` beside the real mxnet 1.9.1 (in its venv): real NDArrays and
MXNet's own ``DataBatch``; the gluon dataset's items equal gluon's. Without MXNet:
tests/mx/test_namespace.py."""

import json
import os
import subprocess
from pathlib import Path

import cv2
import numpy as np
import pytest

import recpipe
from recpipe.io import IRHeader, pack

from .conftest import REPO_ROOT

CHECKS = Path(__file__).resolve().parent / "mx_namespace_checks.py"

pytestmark = pytest.mark.mxnet


def test_recpipe_mx_serves_ndarrays_when_mxnet_is_installed(mxnet_python, tmp_path):
    rec = tmp_path / "small.rec"
    with recpipe.RecordWriter(str(rec)) as writer:
        for i in range(9):
            ys, xs = np.mgrid[0:24 + i, 0:30]
            image = np.stack([(xs * 7) % 256, (ys * 5 + i * 9) % 256, np.full(xs.shape, 20 * i)],
                             -1).astype(np.uint8)
            jpeg = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()
            writer.write(pack(IRHeader(0, float(i % 3), i, 0), jpeg))
    out = tmp_path / "facts.json"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    done = subprocess.run([mxnet_python, str(CHECKS), str(rec), str(out)], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads(out.read_text())
    assert facts["data_is_ndarray"] and facts["label_is_ndarray"]
    assert facts["batch_is_mxnets"] and facts["iter_is_mxnets"]
    assert facts["classes_are_mxnets"] == [True, True, True]
    assert facts["data_equal"] and facts["labels"][0] == facts["labels"][1] == [0, 1, 2, 0]
    assert facts["dataset_lengths"] == [9, 9] and all(facts["dataset_items_equal"])
    assert facts["transforms_is_mxnets"]
    assert facts["contexts_are_mxnets"] == [True] * 5
    assert facts["dataloader"] == [True, True, [4, 24, 30, 3], [0.0, 1.0, 2.0, 0.0]]
    assert facts["seed_honoured"] == [True, True, True]
    kind, message = facts["not_covered"]
    assert kind == "NotCoveredError" and "training is MXNet's own" in message
