"""A ``.rec`` and its ``.idx`` are one commit: a failure while publishing a new pair (a full
disk) never leaves a new ``.rec`` beside the old ``.idx``, and leaves no temporary files."""

import os
import subprocess

import pytest

import recpipe
from recpipe.io import atomic


def _write(rec, payloads):
    with recpipe.RecordWriter(rec) as writer:
        for i, payload in enumerate(payloads):
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), payload))


def _read(rec):
    with recpipe.RecordReader(rec) as reader:
        return [recpipe.unpack(reader.read_key(k))[1] for k in reader.keys]


OLD = [b"old-%d" % i * 5 for i in range(4)]


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs (root only); skips where it cannot be mounted."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_disk_full_keeps_the_old_pair(small_disk):
    rec = str(small_disk / "data.rec")
    _write(rec, OLD)
    with pytest.raises(OSError):
        _write(rec, [os.urandom(20 << 10) for _ in range(5)])  # 100 KB: does not fit
    assert _read(rec) == OLD
    # no temporary left
    assert sorted(os.listdir(small_disk)) == ["data.idx", "data.rec", "data.sums"]


def _failing_prepare(real):
    """Fault injection: the ``.idx``'s final flush fails as on a full disk."""

    def prepare(output):
        if output.url.endswith(".idx"):
            raise OSError(28, "No space left on device")
        return real(output)

    return prepare


def test_a_failing_index_commit_publishes_neither_file(tmp_path, monkeypatch):
    rec = str(tmp_path / "data.rec")
    _write(rec, OLD)
    monkeypatch.setattr(atomic.AtomicOutput, "prepare",
                        _failing_prepare(atomic.AtomicOutput.prepare))
    with pytest.raises(OSError, match="No space"):
        _write(rec, [b"new-%d" % i for i in range(7)])
    monkeypatch.undo()
    assert _read(rec) == OLD
    assert sorted(os.listdir(tmp_path)) == ["data.idx", "data.rec", "data.sums"]


def test_a_crash_between_the_renames_leaves_no_mismatched_pair(tmp_path, monkeypatch):
    """If the process dies after the .rec took its name, the old .idx is already gone: a
    reader scans the new .rec and finds the new records."""
    rec = str(tmp_path / "data.rec")
    _write(rec, OLD)
    real_commit = atomic.AtomicOutput.commit

    def commit(output):
        if output.url.endswith(".idx"):
            raise KeyboardInterrupt  # stands for the process dying here
        return real_commit(output)

    monkeypatch.setattr(atomic.AtomicOutput, "commit", commit)
    new = [b"new-%d" % i for i in range(7)]
    with pytest.raises(KeyboardInterrupt):
        _write(rec, new)
    monkeypatch.undo()
    assert not os.path.exists(tmp_path / "data.idx")
    with recpipe.RecordReader(rec) as reader:
        assert [recpipe.unpack(p)[1] for p in reader] == new
