"""``recpipe.mx.record_iter.ImageRecordIter`` under the real mxnet 1.9.1 with ``on_error='skip'``
and a padded last batch whose filler is a bad record (issue 30 item 8): ``batch.pad`` counts the
filler rows actually in the NDArray, so MXNet's ``out[:len - pad]`` keeps every good record."""

import json
import os
import subprocess

import pytest

from ..decode.test_pad_skip import _write
from .conftest import REPO_ROOT

SCRIPT = """
import json, sys
import mxnet as mx
from recpipe.mx.record_iter import ImageRecordIter
it = ImageRecordIter(path_imgrec=sys.argv[1], data_shape=(3, 16, 16), batch_size=4,
                     on_error="skip", preprocess_threads=2)
kept, pads, rows = [], [], []
for batch in it:
    labels = batch.label[0].asnumpy()
    assert isinstance(batch.data[0], mx.nd.NDArray)
    pads.append(batch.pad)
    rows.append(batch.data[0].shape[0])
    kept.extend(labels[:labels.shape[0] - batch.pad].tolist())
skipped = it.stats()["skipped"]
it.close()
print(json.dumps({"kept": kept, "pads": pads, "rows": rows, "skipped": skipped}))
"""


@pytest.mark.mxnet
def test_real_mxnet_batches_keep_every_good_record(mxnet_python, tmp_path):
    url = _write(tmp_path / "data.rec", 7, {0})
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    done = subprocess.run([mxnet_python, "-c", SCRIPT, url], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert facts["kept"] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert facts["rows"] == [3, 3] and facts["pads"] == [0, 0]
    assert facts["skipped"] == 1
