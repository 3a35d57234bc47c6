"""Untrusted inputs stay inside the image root: no escapes through .lst paths or symlinks, only
regular files of bounded size, skipped items counted, nothing empty published."""

import os
import subprocess
import sys

import cv2
import numpy as np
import pytest

import recpipe
from recpipe.cli import main
from recpipe.packing.inputs import InputLimits
from recpipe.packing.packer import pack_dataset

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _jpeg(seed):
    return cv2.imencode(".jpg", np.full((20, 24, 3), seed * 40 % 256, np.uint8))[1].tobytes()


@pytest.fixture
def tree(tmp_path):
    """images/cls/{a,b}.jpg, a secret outside the root, and the .lst/outputs folder."""
    root = tmp_path / "images"
    (root / "cls").mkdir(parents=True)
    (root / "cls" / "a.jpg").write_bytes(_jpeg(1))
    (root / "cls" / "b.jpg").write_bytes(_jpeg(2))
    secret = tmp_path / "secret.jpg"
    secret.write_bytes(_jpeg(3))
    return root, secret


def _keys(rec):
    with recpipe.RecordReader(rec) as reader:
        return len(reader)


def test_a_symlink_out_of_the_folder_is_refused(tree, tmp_path):
    root, secret = tree
    os.symlink(secret, root / "cls" / "c.jpg")
    summary = pack_dataset(root, tmp_path / "out" / "s", pass_through=True, workers=0)
    assert summary.written == 2 and summary.failed == 1
    assert "outside the image root" in summary.errors[0]["reason"]
    allowed = pack_dataset(root, tmp_path / "out" / "t", pass_through=True, workers=0,
                           limits=InputLimits(allow_outside_root=True))
    assert allowed.written == 3


@pytest.mark.parametrize("line", ["../secret.jpg", "ABSOLUTE", "cls/../../secret.jpg"])
def test_list_paths_leaving_the_root_are_refused(tree, tmp_path, line):
    root, secret = tree
    path = str(secret) if line == "ABSOLUTE" else line
    lst = root / "train.lst"
    lst.write_text(f"0\t0.000000\tcls/a.jpg\n1\t1.000000\t{path}\n")
    out = str(tmp_path / "out" / "l")
    code = main(["pack", str(lst), out, "--pass-through", "--workers", "0", "--no-progress"])
    assert code != 0  # a skipped item fails the run...
    assert _keys(out + ".rec") == 1
    assert main(["pack", str(lst), out + "2", "--pass-through", "--workers", "0", "--no-progress",
                 "--skip-errors"]) == 0  # ...unless told to tolerate it
    assert main(["pack", str(lst), out + "3", "--pass-through", "--workers", "0", "--no-progress",
                 "--allow-outside-root"]) == 0
    assert _keys(out + "3.rec") == 2


def test_devices_fifos_and_big_files_are_refused_without_hanging(tree, tmp_path):
    root, _ = tree
    os.mkfifo(root / "cls" / "fifo.jpg")
    lst = root / "dev.lst"
    lst.write_text("0\t0.000000\t/dev/zero\n1\t0.000000\tcls/fifo.jpg\n2\t0.000000\tcls/a.jpg\n"
                   "3\t0.000000\tcls/b.jpg\n")
    done = subprocess.run([sys.executable, "-m", "recpipe", "pack", str(lst),
                           str(tmp_path / "out" / "d"), "--pass-through", "--workers", "0",
                           "--no-progress", "--allow-outside-root", "--max-file-size", "700",
                           "--json"], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=REPO_ROOT))
    assert done.returncode != 0
    import json

    summary = json.loads(done.stdout)
    reasons = sorted(e["reason"] for e in summary["errors"])
    assert summary["written"] + len(reasons) == 4
    assert any("character device" in r for r in reasons)
    assert any("FIFO" in r for r in reasons)
    sizes = [len(_jpeg(1)), len(_jpeg(2))]
    assert summary["written"] == sum(size <= 700 for size in sizes)


def test_a_pack_where_everything_fails_publishes_nothing(tree, tmp_path):
    root, _ = tree
    lst = root / "bad.lst"
    lst.write_text("0\t0.000000\tmissing1.jpg\n1\t0.000000\tmissing2.jpg\n")
    with pytest.raises(ValueError, match="nothing packed"):
        pack_dataset(lst, tmp_path / "out" / "none", pass_through=True, workers=0)
    assert not (tmp_path / "out" / "none.rec").exists()
    assert not [p for p in (tmp_path / "out").iterdir()] if (tmp_path / "out").exists() else True


def test_more_shards_than_images_writes_no_empty_shard(tree, tmp_path):
    root, _ = tree
    summary = pack_dataset(root, tmp_path / "out" / "sh", pass_through=True, workers=0, shards=1000)
    files = sorted(p.name for p in (tmp_path / "out").iterdir() if p.suffix == ".rec")
    assert len(files) == 2 and summary.written == 2
    assert all(_keys(str(tmp_path / "out" / name)) == 1 for name in files)


def test_a_shard_whose_items_all_failed_is_published_empty_when_others_have_records(tree, tmp_path):
    root, _ = tree
    lst = root / "half.lst"
    lst.write_text("0\t0.000000\tmissing.jpg\n1\t0.000000\tcls/a.jpg\n")
    summary = pack_dataset(lst, tmp_path / "out" / "h", pass_through=True, workers=0, shards=2)
    assert summary.written == 1 and summary.failed == 1
    shards = sorted(p.name for p in (tmp_path / "out").iterdir() if p.suffix == ".rec")
    assert len(shards) == 2  # every planned shard exists, the first one empty
    assert sorted(_keys(str(tmp_path / "out" / name)) for name in shards) == [0, 1]


def test_a_symlinked_image_older_than_its_link_is_packed(tmp_path):
    """A folder of symlinks (a common way to assemble a dataset) packs: the listing records the
    target's modification time, as the read checks it, not the link's own (before, a link
    written later than its target made the item "changed since it was listed")."""
    images = tmp_path / "store"
    images.mkdir()
    root = tmp_path / "data" / "cls"
    root.mkdir(parents=True)
    for name in ("a.jpg", "b.jpg"):
        target = images / name
        target.write_bytes(_jpeg(len(name)))
        os.utime(target, (1_000_000_000, 1_000_000_000))  # 2001: long before the link
        os.symlink(target, root / name)
    summary = pack_dataset(tmp_path / "data", tmp_path / "out" / "s", pass_through=True,
                           workers=0, limits=InputLimits(allow_outside_root=True))
    assert summary.failed == 0 and summary.written == 2, summary.errors
