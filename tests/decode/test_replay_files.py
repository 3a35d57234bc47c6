"""``recpipe replay`` finds the file from any folder and takes a moved or copied one (issue 31
item 5): the log keeps the absolute path and the file's identity (size, first and last 64 KiB,
the ``.sums`` digest), ``rec=``/``--rec`` points at another place, and a file that is not the
logged one is refused with a message saying what differs."""

import json
import os
import shutil
import subprocess
import sys

import cv2
import numpy as np
import pytest

import recpipe
from recpipe.cli import main
from recpipe.decode.loader import ImageLoader
from recpipe.io import IRHeader, pack

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N = 80  # ~4 KiB records: the file is well past the 2 x 64 KiB its identity hashes
TRAIN = dict(rand_crop=True, rand_mirror=True, shuffle=True, seed=11, threads=2)


def _textured(i):
    rng = np.random.default_rng(i)
    img = cv2.GaussianBlur(rng.integers(0, 256, (48, 56, 3), dtype=np.uint8), (3, 3), 0)
    return cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes()


def _write(path, label=lambda i: float(i % 7), sums=True):
    with recpipe.RecordWriter(str(path), sums=sums) as writer:
        for i in range(N):
            writer.write(pack(IRHeader(0, label(i), i, 0), _textured(i)))
    return str(path)


def _siblings(rec):
    stem = str(rec)[:-4]
    return [stem + ext for ext in (".rec", ".idx", ".sums") if os.path.exists(stem + ext)]


@pytest.fixture
def run_in_data_folder(tmp_path, monkeypatch):
    """A loader run from ``tmp/run`` on ``data/photos.rec`` (a relative path, as typed), its
    log ``tmp/run/prov.jsonl``; then the working folder is ``tmp/elsewhere``."""
    run = tmp_path / "run"
    (run / "data").mkdir(parents=True)
    _write(run / "data" / "photos.rec")
    monkeypatch.chdir(run)
    with ImageLoader("data/photos.rec", 16, (3, 32, 32), provenance="prov.jsonl",
                     **TRAIN) as loader:
        delivered = [b.images.copy() for b in loader]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return run, delivered


def test_the_log_keeps_an_absolute_path_and_the_identity(run_in_data_folder):
    run, _ = run_in_data_folder
    line = json.loads((run / "prov.jsonl").read_text().splitlines()[0])
    assert line["url"] == str(run / "data" / "photos.rec")
    assert line["index_url"] == str(run / "data" / "photos.idx")
    assert line["url_given"] == "data/photos.rec"
    rec = line["file_parts"]["rec"]
    assert rec["size"] == os.path.getsize(run / "data" / "photos.rec") > 2 * (64 << 10)
    assert {"head", "tail", "sums"} <= set(rec) and "mtime" not in rec


def test_replay_from_another_folder(run_in_data_folder, tmp_path):
    run, delivered = run_in_data_folder
    assert np.array_equal(recpipe.replay(str(run / "prov.jsonl"), batch=2).images, delivered[2])
    out = tmp_path / "out"
    # the CLI as a user runs it, in a fresh process whose working folder is not the run's
    done = subprocess.run([sys.executable, "-m", "recpipe", "replay", str(run / "prov.jsonl"),
                           "--batch", "1", "--out", str(out)], capture_output=True, text=True,
                          cwd=str(tmp_path / "elsewhere"), timeout=300,
                          env=dict(os.environ, PYTHONPATH=REPO_ROOT))
    assert done.returncode == 0, done.stderr
    assert np.array_equal(np.load(out / "images.npy"), delivered[1])


def test_a_moved_file_is_named_and_taken_with_rec(run_in_data_folder, tmp_path, capsys):
    run, delivered = run_in_data_folder
    moved = tmp_path / "moved"
    moved.mkdir()
    for path in _siblings(run / "data" / "photos.rec"):
        shutil.move(path, moved / ("faces" + os.path.splitext(path)[1]))  # renamed too
    log = str(run / "prov.jsonl")
    with pytest.raises(FileNotFoundError, match="is not there: pass rec="):
        recpipe.replay(log, batch=0)
    assert main(["replay", log, "--batch", "0", "--out", str(tmp_path / "o")]) == 1
    assert "--rec" in capsys.readouterr().err
    again = recpipe.replay(log, batch=3, rec=str(moved / "faces.rec"))
    assert np.array_equal(again.images, delivered[3])
    out = tmp_path / "out"
    assert main(["replay", log, "--batch", "2", "--rec", str(moved / "faces.rec"),
                 "--out", str(out)]) == 0
    assert np.array_equal(np.load(out / "images.npy"), delivered[2])


def test_a_copy_is_taken_with_rec_and_needs_its_index(run_in_data_folder, tmp_path):
    """A copy has another modification time: it is the same file all the same."""
    run, delivered = run_in_data_folder
    copy = tmp_path / "copy"
    copy.mkdir()
    rec = run / "data" / "photos.rec"
    shutil.copyfile(rec, copy / "photos.rec")  # no .idx, no .sums yet
    log = str(run / "prov.jsonl")
    with pytest.raises(FileNotFoundError, match="logged with the index .*pass index="):
        recpipe.replay(log, batch=0, rec=str(copy / "photos.rec"))
    assert np.array_equal(recpipe.replay(log, batch=0, rec=str(copy / "photos.rec"),
                                         index=str(run / "data" / "photos.idx")).images,
                          delivered[0])
    shutil.copyfile(str(rec)[:-4] + ".idx", copy / "photos.idx")
    os.utime(copy / "photos.rec", (1, 1))
    assert np.array_equal(recpipe.replay(log, batch=4, rec=str(copy / "photos.rec")).images,
                          delivered[4])


@pytest.mark.parametrize("change", ["repacked", "tail", "appended"])
def test_another_file_is_refused(run_in_data_folder, tmp_path, change, capsys):
    run, _ = run_in_data_folder
    other = tmp_path / "other"
    other.mkdir()
    if change == "repacked":  # same size, labels changed in the middle, a new .sums
        _write(other / "photos.rec", label=lambda i: float(i % 7) + (i == N // 2))
        shutil.copyfile(run / "data" / "photos.idx", other / "photos.idx")
        assert os.path.getsize(other / "photos.rec") == \
            os.path.getsize(run / "data" / "photos.rec")
        expected = "rec sums"
    else:
        for path in _siblings(run / "data" / "photos.rec"):
            shutil.copyfile(path, other / os.path.basename(path))
        data = bytearray((other / "photos.rec").read_bytes())
        if change == "tail":  # no sidecar beside it: the edges tell
            os.remove(other / "photos.sums")
            data[-100] ^= 0x40
            expected = "rec tail"
        else:
            data += b"\0" * 8
            expected = "rec size"
        (other / "photos.rec").write_bytes(bytes(data))
    log = str(run / "prov.jsonl")
    with pytest.raises(ValueError, match=f"is not the file the batch was logged from.*{expected}"):
        recpipe.replay(log, batch=0, rec=str(other / "photos.rec"))
    assert main(["replay", log, "--batch", "0", "--rec", str(other / "photos.rec"),
                 "--out", str(tmp_path / "o")]) == 1
    assert "is not the file" in capsys.readouterr().err


def test_a_log_with_a_relative_path_is_read_from_its_folder(run_in_data_folder):
    """Logs written before paths were made absolute: the path is also tried from the log's
    folder (a loader run where its log is)."""
    run, delivered = run_in_data_folder
    log = run / "prov.jsonl"
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    lines[0]["url"], lines[0]["index_url"] = "data/photos.rec", "data/photos.idx"
    old = run / "old.jsonl"
    old.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert np.array_equal(recpipe.replay(str(old), batch=1).images, delivered[1])


def test_the_identity_reads_the_ends_of_a_file_not_all_of_it(monkeypatch):
    """Cheap on a 17M-record file: two 64 KiB range reads per file, whatever its size."""
    import fsspec
    from fsspec.implementations.memory import MemoryFileSystem

    from recpipe.decode.provenance import file_fingerprint

    fs = fsspec.filesystem("memory")
    rng = np.random.default_rng(0)
    fs.pipe("/identity/big.rec", rng.integers(0, 256, 8 << 20, dtype=np.uint8).tobytes())
    fs.pipe("/identity/big.sums", rng.integers(0, 256, 1 << 20, dtype=np.uint8).tobytes())
    read = []
    original = MemoryFileSystem.cat_file

    def counting(self, path, start=None, end=None, **kw):
        data = original(self, path, start=start, end=end, **kw)
        read.append(len(data))
        return data

    monkeypatch.setattr(MemoryFileSystem, "cat_file", counting)
    parts = file_fingerprint("memory://identity/big.rec")
    assert parts["rec"]["size"] == 8 << 20 and "sums" in parts["rec"]
    assert parts["rec"]["url"] == "memory://identity/big.rec"
    assert sum(read) <= 4 * (64 << 10), read
