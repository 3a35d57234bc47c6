"""A killed ``recpipe pack`` leaves no worker process behind (nor its pipes held open)."""

import os
import signal
import subprocess
import sys
import time

import cv2
import numpy as np
import pytest

from recpipe.packing.lifeline import parent_alive

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")


def _children():
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != b"Z":
                table.setdefault(int(fields[1]), []).append(int(entry))
    return table


def descendants(pid):
    table, found, todo = _children(), [], [pid]
    while todo:
        kids = table.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


@pytest.fixture(scope="module")
def many_images(tmp_path_factory):
    root = tmp_path_factory.mktemp("orphans") / "src"
    rng = np.random.default_rng(0)
    for c in range(2):
        (root / f"class{c}").mkdir(parents=True)
        for i in range(300):
            img = rng.integers(0, 255, (160, 200, 3), dtype=np.uint8)
            cv2.imwrite(str(root / f"class{c}" / f"{i}.jpg"), img)
    return root


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killing_pack_leaves_no_worker(many_images, tmp_path, sig):
    proc = subprocess.Popen([sys.executable, "-m", "recpipe", "pack", str(many_images),
                             str(tmp_path / "out" / "train"), "--workers", "2", "--resize", "150",
                             "--quality", "95", "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, PYTHONPATH=REPO_ROOT))
    deadline = time.monotonic() + 60
    workers = []
    while time.monotonic() < deadline and proc.poll() is None:
        workers = descendants(proc.pid)
        if len(workers) >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None and len(workers) >= 2, "the pack should still be running"
    time.sleep(0.3)
    workers = descendants(proc.pid)
    proc.send_signal(sig)
    proc.communicate(timeout=30)  # the pipes reach EOF: nobody else holds them
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(parent_alive(p) for p in workers):
        time.sleep(0.1)
    assert not [p for p in workers if parent_alive(p)]
