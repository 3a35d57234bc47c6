"""Loader state and process checks against tampered or unlucky use (issue 20, items 7-9):
resume state validated against the loader, epochs used in a forked child, next() interrupted,
threads after close()."""

import _thread
import os
import threading

import cv2
import numpy as np
import pytest

import recpipe
from recpipe.decode.loader import ImageLoader

from .._fork import outcome_in_child


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("hostile") / "h.rec")
    rng = np.random.default_rng(3)
    with recpipe.RecordWriter(url) as writer:
        for i in range(40):
            img = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0),
                                      cv2.imencode(".jpg", img)[1].tobytes()))
    return url


@pytest.mark.parametrize("change, match", [
    ({"batch": -1}, "batch"), ({"batch": 999}, "batch"), ({"batch": 8}, "batch"),
    ({"epoch": -7}, "epoch"), ({"batch": "2"}, "batch"), ({"epoch": 1.5}, "epoch"),
    ({"batch": True}, "batch"), ({"options": "0" * 16}, "options"), ({"file": "1:2:3"}, "file")])
def test_tampered_resume_state_is_refused(rec, change, match):
    with ImageLoader(rec, 5, (3, 16, 16), threads=1, shuffle=True) as loader:
        state = dict(loader.state_dict(), **change)
        assert len(loader) == 8
        with pytest.raises(ValueError, match=f"cannot resume: state has {match}="):
            loader.load_state_dict(state)
        loader.load_state_dict(dict(loader.state_dict(), batch=7, epoch=3))
        assert len(list(loader)) == 1


def test_resume_state_names_other_options_and_files(rec, tmp_path):
    with ImageLoader(rec, 5, (3, 16, 16), threads=1, rand_mirror=True) as loader:
        state = loader.state_dict()
    with ImageLoader(rec, 5, (3, 16, 16), threads=1) as other:  # other augmentation
        with pytest.raises(ValueError, match="options"):
            other.load_state_dict(state)
    copy = str(tmp_path / "copy.rec")
    with recpipe.RecordReader(rec) as reader, recpipe.RecordWriter(copy) as writer:
        for i in range(len(reader)):
            writer.write(reader[i] + (b"xxxx" if i == 3 else b""))
    with ImageLoader(copy, 5, (3, 16, 16), threads=1, rand_mirror=True) as other:
        with pytest.raises(ValueError, match="file"):
            other.load_state_dict(state)
    legacy = {k: v for k, v in state.items() if k not in ("options", "file")}
    with ImageLoader(rec, 5, (3, 16, 16), threads=1, rand_mirror=True) as same:
        same.load_state_dict(state)
        same.load_state_dict(legacy)  # states saved before these keys existed still load


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_an_epoch_used_in_a_forked_child_says_so_at_once(rec):
    with ImageLoader(rec, 4, (3, 16, 16), threads=1, timeout=30) as loader:
        epoch = iter(loader)
        next(epoch)
        status, message = outcome_in_child(lambda: next(epoch))
        assert len(list(epoch)) == 9  # the parent goes on
    assert status == 0
    assert message.startswith("RuntimeError") and "forked process" in message


def test_next_interrupted_then_resumed_loses_nothing(tmp_path):
    rec = str(tmp_path / "big.rec")
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (900, 900, 3), dtype=np.uint8)
    with recpipe.RecordWriter(rec) as writer:
        for i in range(16):
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0),
                                      cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 98])[1]
                                      .tobytes()))
    interrupted = 0
    with ImageLoader(rec, 4, (3, 16, 16), threads=1, prefetch=1, lookahead=False) as loader:
        epoch = iter(loader)
        labels = []
        while True:
            timer = threading.Timer(0.005, _thread.interrupt_main)
            timer.start()
            try:
                batch = next(epoch)
            except KeyboardInterrupt:
                interrupted += 1
                continue
            except StopIteration:
                break
            finally:
                timer.cancel()
            labels.extend(batch[1].tolist())
    if not interrupted:
        pytest.skip("no next() call was slow enough to interrupt")
    assert labels == [float(i) for i in range(16)]


def test_threads_after_close_is_clear(rec):
    loader = ImageLoader(rec, 4, (3, 16, 16), threads=2)
    assert loader.threads == 2
    loader.close()
    assert loader.threads == 0
    with pytest.raises(RuntimeError, match="closed"):
        loader.set_threads(3)
