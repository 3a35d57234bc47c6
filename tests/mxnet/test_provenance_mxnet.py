"""``recpipe.mx.record_iter.ImageRecordIter(provenance=...)`` under the real mxnet 1.9.1: the
iterator logs its batches and ``recpipe.replay`` gives back the data it delivered."""

import json
import subprocess

import pytest

from tests._photos import pack_training_set

from .conftest import CALL_TIMEOUT, REPO_ROOT

pytestmark = pytest.mark.mxnet

SCRIPT = """
import json, sys, warnings
warnings.simplefilter("ignore")
import numpy as np
import recpipe, recpipe.mx.record_iter as rm
rec, log, out = sys.argv[1:]
it = rm.ImageRecordIter(path_imgrec=rec, batch_size=6, data_shape=(3, 28, 28), shuffle=True,
                        rand_crop=True, rand_mirror=True, preprocess_threads=2, provenance=log)
same = []
for index, batch in enumerate(it):
    again = recpipe.replay(log, batch=index, epoch=0)
    same.append(bool(np.array_equal(batch.data[0].asnumpy(), again.images)))
json.dump({"same": same}, open(out, "w"))
"""


def test_image_record_iter_logs_and_replays(mxnet_python, tmp_path):
    rec = tmp_path / "train.rec"
    pack_training_set(rec, classes=3, per_class=6)
    (tmp_path / "check.py").write_text(SCRIPT)
    out = tmp_path / "out.json"
    done = subprocess.run([mxnet_python, str(tmp_path / "check.py"), str(rec),
                           str(tmp_path / "log.jsonl"), str(out)],
                          env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=CALL_TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]
    same = json.loads(out.read_text())["same"]
    assert len(same) == 3 and all(same)
