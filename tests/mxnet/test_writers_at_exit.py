"""MXNet programs that never close their writers publish the same bytes with recpipe (issue 30,
item 1).

Each program runs twice as a script of its own, in a subprocess: with the real mxnet 1.9.1 and
with recpipe in its place (``import recpipe as mx``). Their writers are dropped only when the
interpreter shuts down; the ``.rec``/``.idx`` files must be byte-identical:

- MXNet's own ``tools/im2rec.py`` (the copy shipped with mxnet 1.9.1), single-process mode,
  two ``.lst`` files: the module-level ``record`` is rebound for the second list and the last
  writer is left open at exit (and its multi-process mode, whose writer process returns
  without closing its writer). recpipe stands in for mxnet through a one-line ``mxnet`` package
  on the path (``sys.modules["mxnet"] = recpipe``);
- InsightFace's ``rec_builder.py`` pattern (our own reproduction, the script is below): a
  builder object keeps an ``MXIndexedRecordIO`` whose ``close()`` writes the ``property`` file
  and never closes the writer.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import recpipe
from recpipe.io.sidecars.sums import load_sums
from recpipe.packing.listing import make_lists

from .conftest import CALL_TIMEOUT, REPO_ROOT

pytestmark = pytest.mark.mxnet

SHIM = "import sys\nimport recpipe\nsys.modules[__name__] = recpipe\n"


def im2rec_script(mxnet_python):
    done = subprocess.run(
        [mxnet_python, "-c",
         "import os, mxnet; print(os.path.join(os.path.dirname(mxnet.__file__), 'tools', "
         "'im2rec.py'))"], capture_output=True, text=True, timeout=CALL_TIMEOUT)
    script = done.stdout.strip().splitlines()[-1] if done.returncode == 0 else ""
    if not os.path.exists(script):
        pytest.skip(f"mxnet's tools/im2rec.py is not in its venv: {done.stderr[-300:]}")
    return script


def run(python, argv, cwd, with_recpipe):
    """Run a script as its own program; with_recpipe: ``import mxnet`` gives recpipe."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if with_recpipe:
        shim = Path(cwd) / "shim" / "mxnet"
        shim.mkdir(parents=True, exist_ok=True)
        (shim / "__init__.py").write_text(SHIM)
        env["PYTHONPATH"] = os.pathsep.join([str(shim.parent), str(REPO_ROOT)])
    done = subprocess.run([python, *argv], cwd=str(cwd), capture_output=True, text=True,
                          timeout=CALL_TIMEOUT, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done


def outputs(folder, names):
    return {name: (folder / name).read_bytes() for name in names if (folder / name).exists()}


def check_sums(rec):
    sums = load_sums(str(rec), rec.stat().st_size)
    assert sums is not None
    with recpipe.RecordReader(str(rec)) as reader:  # each record checked against its sum
        assert len(list(reader)) == len(sums) == len(reader)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_im2rec_py_publishes_mxnets_bytes(mxnet_python, image_tree, tmp_path, threads):
    """``--num-thread 1``: the single-process mode, its writer left open at exit; ``2``: the
    writer process's ``write_worker`` returns without closing its writer."""
    script = im2rec_script(mxnet_python)
    names = ["data_train.rec", "data_train.idx", "data_val.rec", "data_val.idx"]
    results = {}
    for side, python in (("mxnet", mxnet_python), ("recpipe", sys.executable)):
        work = tmp_path / side
        work.mkdir()
        make_lists(work / "data", image_tree, recursive=True, train_ratio=0.7)
        run(python, [script, str(work / "data"), str(image_tree), "--pass-through",
                     "--num-thread", threads], work, with_recpipe=side == "recpipe")
        results[side] = outputs(work, names)
    assert sorted(results["mxnet"]) == sorted(names)
    assert sorted(results["recpipe"]) == sorted(names), "a writer dropped at exit lost its files"
    assert results["recpipe"] == results["mxnet"]
    for rec in ("data_train.rec", "data_val.rec"):
        check_sums(tmp_path / "recpipe" / rec)


REC_BUILDER = textwrap.dedent("""
    import os
    import os.path as osp
    import pickle
    import sys

    if sys.argv[1] == "recpipe":
        import recpipe as mx
    else:
        import mxnet as mx


    class RecBuilder:
        def __init__(self, path, image_size=(112, 112)):
            self.path = path
            self.image_size = image_size
            self.widx = 0
            self.wlabel = 0
            self.max_label = -1
            assert not osp.exists(path), "%s exists" % path
            os.makedirs(path)
            self.writer = mx.recordio.MXIndexedRecordIO(osp.join(path, "train.idx"),
                                                        osp.join(path, "train.rec"), "w")
            self.meta = []

        def add(self, imgs):
            label = self.wlabel
            for img in imgs:
                idx = self.widx
                header = mx.recordio.IRHeader(0, label, idx, 0)
                self.writer.write_idx(idx, mx.recordio.pack(header, img))
                self.meta.append({"image_index": idx, "image_classes": [label]})
                self.widx += 1
            self.max_label = label
            self.wlabel += 1

        def add_image(self, img, label):
            idx = self.widx
            header = mx.recordio.IRHeader(0, label, idx, 0)
            self.writer.write_idx(idx, mx.recordio.pack(header, img))
            idlabel = label[0] if isinstance(label, list) else label
            self.meta.append({"image_index": idx, "image_classes": [idlabel]})
            self.widx += 1
            self.max_label = max(self.max_label, idlabel)

        def close(self):  # the writer stays open: it is dropped at exit
            with open(osp.join(self.path, "train.meta"), "wb") as pfile:
                pickle.dump(self.meta, pfile, protocol=4)
            with open(osp.join(self.path, "property"), "w") as f:
                f.write("%d,%d,%d\\n" % (self.max_label + 1, self.image_size[0],
                                         self.image_size[1]))
                f.write("%d\\n" % self.widx)


    if __name__ == "__main__":
        images = sorted(os.listdir(sys.argv[3]))
        builder = RecBuilder(sys.argv[2])
        for start in range(0, len(images), 3):
            group = images[start:start + 3]
            builder.add([open(osp.join(sys.argv[3], name), "rb").read() for name in group])
        for i, name in enumerate(images[:4]):
            builder.add_image(open(osp.join(sys.argv[3], name), "rb").read(), [100 + i, 0.5])
        builder.close()
""")


def test_rec_builder_pattern_publishes_mxnets_bytes(mxnet_python, image_tree, tmp_path):
    faces = tmp_path / "faces"
    faces.mkdir()
    for path in sorted(Path(image_tree).rglob("*")):
        if path.suffix.lower() in (".jpg", ".jpeg", ".png"):
            (faces / path.name.replace(" ", "_")).write_bytes(path.read_bytes())
    script = tmp_path / "rec_builder.py"
    script.write_text(REC_BUILDER)
    names = ["train.rec", "train.idx", "property", "train.meta"]
    results = {}
    for side, python in (("mxnet", mxnet_python), ("recpipe", sys.executable)):
        out = tmp_path / side / "dataset"
        run(python, [str(script), side, str(out), str(faces)], tmp_path,
            with_recpipe=side == "recpipe")
        results[side] = outputs(out, names)
    assert sorted(results["mxnet"]) == sorted(names)
    assert sorted(results["recpipe"]) == sorted(names), "a writer dropped at exit lost its files"
    assert results["recpipe"] == results["mxnet"]
    check_sums(tmp_path / "recpipe" / "dataset" / "train.rec")
