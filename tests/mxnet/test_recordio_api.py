"""``mx.recordio`` and ``mx.image`` programs run unchanged on ``import recpipe as mx``.

Each scenario of ``mx_scenarios.py`` runs twice, once under the real mxnet 1.9.1 (its venv) and
once under recpipe, and the two JSON results must be equal. The face dataset is written by the
real mxnet (``pack_img``), in InsightFace's layout, and read back by arcface_torch's dataset logic
under both implementations, then through a torch DataLoader with 2 worker processes.
"""

import json
import os
import subprocess
import sys

import cv2
import numpy as np
import pytest

from .conftest import CALL_TIMEOUT, REPO_ROOT, smooth_image, with_exif_orientation

SCENARIOS = os.path.join(os.path.dirname(__file__), "mx_scenarios.py")


def run_scenario(python, impl, command, work):
    out = os.path.join(work, f"{impl}-{command}.json")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    done = subprocess.run([python, SCENARIOS, impl, command, str(work), out], env=env,
                          capture_output=True, text=True, timeout=CALL_TIMEOUT)
    assert done.returncode == 0, f"{impl} {command} failed:\n{done.stderr[-3000:]}"
    with open(out) as f:
        return json.load(f)


def both(mxnet_python, command, tmp_path):
    results = {}
    for impl, python in (("mxnet", mxnet_python), ("recpipe", sys.executable)):
        work = tmp_path / impl
        work.mkdir(exist_ok=True)
        results[impl] = run_scenario(python, impl, command, work)
    return results["mxnet"], results["recpipe"]


def test_recordio_behaves_like_mxnet(mxnet_python, tmp_path):
    theirs, ours = both(mxnet_python, "recordio", tmp_path)
    for scenario in theirs:
        assert ours[scenario] == theirs[scenario], scenario
    assert ours == theirs
    # the scenarios really exercised something
    assert ours["sequential"]["after_end"] == [None, None]
    assert ours["indexed"]["tells"][0] == 0 and len(set(ours["indexed"]["tells"])) == 5


def _write_images(folder):
    folder.mkdir(parents=True)
    for i, (h, w) in enumerate([(112, 112), (37, 53), (64, 48)]):
        img = smooth_image((h, w), i)
        (folder / f"img{i}.jpg").write_bytes(cv2.imencode(".jpg", img)[1].tobytes())
    (folder / "img3.png").write_bytes(cv2.imencode(".png", smooth_image((30, 20), 9))[1].tobytes())
    jpeg = cv2.imencode(".jpg", smooth_image((18, 40), 5))[1].tobytes()
    (folder / "rotated.jpg").write_bytes(with_exif_orientation(jpeg, 6))
    gray = cv2.imencode(".jpg", smooth_image((40, 30), 6)[:, :, 0])[1].tobytes()
    (folder / "gray.jpg").write_bytes(gray)


def test_imdecode_pixels_equal_mxnet(mxnet_python, tmp_path):
    for impl in ("mxnet", "recpipe"):
        _write_images(tmp_path / impl / "images")
    theirs, ours = both(mxnet_python, "imdecode", tmp_path)
    assert ours == theirs
    assert ours["str input"] == {"raised": "ValueError"}


@pytest.fixture(scope="module")
def face_dataset(mxnet_python, tmp_path_factory):
    """An InsightFace-layout dataset written by the real mxnet."""
    work = tmp_path_factory.mktemp("faces")
    made = run_scenario(mxnet_python, "mxnet", "write-faces", work)
    assert made["images"] > made["identities"] > 0
    return work


def test_arcface_dataset_logic_gives_mxnet_results(mxnet_python, face_dataset):
    theirs = run_scenario(mxnet_python, "mxnet", "read-faces", face_dataset)
    ours = run_scenario(sys.executable, "recpipe", "read-faces", face_dataset)
    assert ours == theirs
    assert theirs["shapes"] == ["(112, 112, 3)"]
    assert theirs["length"] == theirs["header0"][0] - 1


class _FaceDataset:
    """arcface_torch's MXFaceDataset over ``recpipe as mx``, as a torch map dataset."""

    def __init__(self, root):
        import recpipe as mx

        self.mx = mx
        self.imgrec = mx.recordio.MXIndexedRecordIO(os.path.join(root, "train.idx"),
                                                    os.path.join(root, "train.rec"), "r")
        header, _ = mx.recordio.unpack(self.imgrec.read_idx(0))
        self.imgidx = np.array(range(1, int(header.label[0])))

    def __getitem__(self, index):
        header, img = self.mx.recordio.unpack(self.imgrec.read_idx(self.imgidx[index]))
        label = header.label if header.flag == 0 else header.label[0]
        return self.mx.image.imdecode(img).asnumpy(), int(label)

    def __len__(self):
        return len(self.imgidx)


def test_arcface_dataset_in_dataloader_workers(mxnet_python, face_dataset):
    torch = pytest.importorskip("torch")
    import hashlib

    theirs = run_scenario(mxnet_python, "mxnet", "read-faces", face_dataset)
    loader = torch.utils.data.DataLoader(_FaceDataset(str(face_dataset / "faces")), batch_size=4,
                                         num_workers=2, multiprocessing_context="fork")
    labels, pixels = [], []
    for images, batch_labels in loader:
        labels += batch_labels.tolist()
        pixels += [hashlib.sha256(image.numpy().tobytes()).hexdigest()[:16] for image in images]
    assert labels == theirs["labels"]
    assert pixels == theirs["pixels"]
