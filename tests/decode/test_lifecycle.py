"""Loaders that are dropped, left open at exit, inherited by a fork, or fail to start."""

import gc
import os
import subprocess
import sys
import textwrap
import threading
import time

import cv2
import numpy as np
import pytest

import recpipe
from recpipe.decode import pool as pool_module
from recpipe.decode.loader import ImageLoader

from .._fork import outcome_in_child

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("life") / "life.rec")
    with recpipe.RecordWriter(url) as writer:
        for i in range(48):
            img = np.full((80, 96, 3), (i * 5) % 256, np.uint8)
            img[::7] = 255 - img[::7]
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0),
                                      cv2.imencode(".jpg", img)[1].tobytes()))
    return url


def _settle(baseline, seconds=20.0):
    """Collect garbage until the thread count is back to ``baseline`` (or time runs out)."""
    deadline = time.monotonic() + seconds
    while threading.active_count() > baseline and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    return threading.active_count()


def test_dropped_loaders_stop_their_threads(rec):
    baseline = threading.active_count()
    for i in range(50):
        loader = ImageLoader(rec, 8, (3, 32, 32), resize=40, rand_crop=True,
                             threads=2 if i % 2 else "auto")
        next(iter(loader))
        del loader
    assert _settle(baseline) == baseline


def _open_fds():
    return len(os.listdir(f"/proc/{os.getpid()}/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_failed_constructors_and_dropped_readers_leak_nothing(rec):
    gc.collect()
    baseline_fds, baseline_threads = _open_fds(), threading.active_count()
    for _ in range(20):
        with pytest.raises(ValueError):
            ImageLoader(rec, 0, (3, 32, 32), threads=2)  # batch_size checked after the open
        with pytest.raises(ValueError):
            ImageLoader(rec, 4, (3, 32, 32), threads=2, num_parts=0)
        reader = recpipe.RecordReader(rec)
        reader[0]
        del reader
    gc.collect()
    assert _open_fds() == baseline_fds
    assert _settle(baseline_threads) == baseline_threads


def test_a_pool_that_cannot_start_all_threads_stops_the_others(monkeypatch):
    baseline = threading.active_count()
    started = []
    real_start = threading.Thread.start

    def start(thread):  # the system refuses the 6th thread, as it does past its limit
        if len(started) == 5:
            raise RuntimeError("can't start new thread")
        started.append(thread)
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    with pytest.raises(RuntimeError, match="can't start"):
        pool_module.WorkerPool(lambda task, clock: None, 2000)
    monkeypatch.undo()
    assert len(started) == 5
    assert _settle(baseline) == baseline


EXIT_SCRIPT = textwrap.dedent("""
    import sys
    from recpipe.decode.loader import ImageLoader
    loader = ImageLoader(sys.argv[1], 16, (3, 64, 64), resize=72, rand_crop=True,
                         max_rotate_angle=20, rand_mirror=True, prefetch=4, threads=2)
    next(iter(loader))   # leaves decoding batches ahead (and the next epoch's) at exit
    print("ok")
""")


def test_exit_without_close_is_clean(rec):
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    failures = []
    for run in range(20):
        done = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, rec], capture_output=True,
                              text=True, timeout=120, env=env)
        if done.returncode != 0 or done.stdout.strip() != "ok":
            failures.append((run, done.returncode, done.stderr[-500:]))
    assert not failures


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_is_told_to_make_its_own_loader(rec):
    loader = ImageLoader(rec, 8, (3, 32, 32), resize=32, threads=1)
    try:
        status, message = outcome_in_child(lambda: iter(loader))
    finally:
        loader.close()
    assert status == 0
    assert "forked process" in message and "create the loader" in message
