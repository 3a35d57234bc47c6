"""Writers dropped without ``close()`` publish what they wrote, at exit too (issue 30, item 1).

MXNet programs never close their writers (``tools/im2rec.py`` rebinds one per ``.lst`` and
leaves the last one open; InsightFace's ``RecBuilder`` keeps one in an object whose ``close()``
does not close it): the writer is dropped while the interpreter shuts down, when no import
works and fsspec's I/O thread no longer runs. Every recpipe writer must still publish its
files, complete, with a valid checksum sidecar. The byte-for-byte comparison with MXNet's
output of the same programs is in ``tests/mxnet/test_writers_at_exit.py``.
"""

import builtins
import contextlib
import os
import subprocess
import sys
import textwrap

import pytest

import recpipe
from recpipe import recordio
from recpipe.io.sidecars.sums import load_sums
from recpipe.packing.shards import ShardWriter

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Each writer is left to the interpreter: rebound, held by an object, or simply alive at exit.
SCRIPT = textwrap.dedent("""
    import sys
    {import_line}
    import recpipe

    out = sys.argv[1]

    def payload(i, tag):
        return mx.recordio.pack(mx.recordio.IRHeader(0, float(i), i, 0), tag * (3 * i + 1))

    # tools/im2rec.py: one module-level name per .lst, rebound; the last one is never closed
    for name in ("first", "second"):
        record = mx.recordio.MXIndexedRecordIO(out + "/" + name + ".idx",
                                               out + "/" + name + ".rec", "w")
        for i in range(5):
            record.write_idx(i, payload(i, name.encode()))

    # InsightFace's RecBuilder: the object keeps its writer; its close() leaves it open
    class Builder:
        def __init__(self, path):
            self.writer = mx.recordio.MXIndexedRecordIO(path + ".idx", path + ".rec", "w")
            self.widx = 0

        def add(self, data):
            self.writer.write_idx(self.widx, payload(self.widx, data))
            self.widx += 1

        def close(self):
            with open(self.path_property, "w") as f:
                f.write("%d\\n" % self.widx)

    builder = Builder(out + "/train")
    builder.path_property = out + "/property"
    for i in range(4):
        builder.add(b"face")
    builder.close()
    {cycle}
    plain = mx.recordio.MXRecordIO(out + "/plain.rec", "w")
    for i in range(3):
        plain.write(payload(i, b"plain"))
    raw = recpipe.RecordWriter(out + "/raw.rec")
    for i in range(6):
        raw.write(b"raw %d" % i)
    empty = recpipe.RecordWriter(out + "/empty.rec")  # nothing written, nothing summed before exit
""")

EXPECTED = {"first": 5, "second": 5, "train": 4, "plain": 3, "raw": 6, "empty": 0}
# a reference cycle holding writers: they are dropped by the interpreter's last collection
CYCLE = "builder.itself = builder"


def run_script(tmp_path, import_line, cycle):
    out = tmp_path / "out"
    out.mkdir()
    script = tmp_path / "script.py"
    script.write_text(SCRIPT.format(import_line=import_line, cycle=CYCLE if cycle else ""))
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    done = subprocess.run([sys.executable, str(script), str(out)], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return out, done.stderr


@pytest.mark.parametrize("import_line", ["import recpipe as mx", "import recpipe.mx as mx"])
@pytest.mark.parametrize("cycle", [False, True])
def test_writers_left_open_at_exit_publish_complete_files(tmp_path, import_line, cycle):
    out, stderr = run_script(tmp_path, import_line, cycle)
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    assert not [name for name in os.listdir(out) if name.endswith(".tmp")]
    for stem, count in EXPECTED.items():
        rec = str(out / f"{stem}.rec")
        assert os.path.exists(rec), f"{stem}.rec was not published: {sorted(os.listdir(out))}"
        sums = load_sums(rec, os.path.getsize(rec))
        assert sums is not None and len(sums) == count, stem
        with recpipe.RecordReader(rec) as reader:  # every record checked against the sums
            assert len(reader) == count
            assert len(list(reader)) == count
    reader = recordio.MXIndexedRecordIO(str(out / "second.idx"), str(out / "second.rec"), "r")
    assert reader.keys == list(range(5))
    reader.close()


@contextlib.contextmanager
def imports_fail():
    """Every ``import`` statement fails, as while the interpreter shuts down."""
    real = builtins.__import__

    def refuse(name, *args, **kwargs):
        raise ImportError(f"sys.meta_path is None (import of {name} refused by the test)")

    builtins.__import__ = refuse
    try:
        yield
    finally:
        builtins.__import__ = real


def test_record_writer_closes_without_importing(tmp_path):
    writer = recpipe.RecordWriter(str(tmp_path / "a.rec"))
    empty = recpipe.RecordWriter(str(tmp_path / "empty.rec"))
    writer.write(b"one")
    with imports_fail():
        writer.close()
        empty.close()
    with recpipe.RecordReader(str(tmp_path / "a.rec")) as reader:
        assert list(reader) == [b"one"]
    assert load_sums(str(tmp_path / "empty.rec"), 0) is not None


def test_recordio_writer_dropped_without_importing(tmp_path):
    rec, idx = str(tmp_path / "b.rec"), str(tmp_path / "b.idx")
    writer = recordio.MXIndexedRecordIO(idx, rec, "w")
    writer.write_idx(7, b"seven")
    with imports_fail():
        del writer
    reader = recordio.MXIndexedRecordIO(idx, rec, "r")
    assert reader.read_idx(7) == b"seven"
    reader.close()
    assert len(load_sums(rec, os.path.getsize(rec))) == 1


def test_record_writer_dropped_publishes_once(tmp_path):
    url = str(tmp_path / "c.rec")
    writer = recpipe.RecordWriter(url)
    writer.write(b"x")
    writer.close()
    writer.close()  # closing again does nothing
    del writer
    assert sorted(os.listdir(tmp_path)) == ["c.idx", "c.rec", "c.sums"]


def test_writer_whose_write_failed_publishes_nothing_when_dropped(tmp_path):
    url = str(tmp_path / "d.rec")
    writer = recpipe.RecordWriter(url)
    writer.write(b"good")

    class Full:
        def write(self, data):
            raise OSError(28, "No space left on device")

        def close(self):
            pass

    writer._rec.file.close()
    writer._rec.file = Full()
    with pytest.raises(OSError):
        writer.write(b"torn")
    with pytest.raises(RuntimeError, match="a write failed"):
        writer.close()
    del writer
    assert os.listdir(tmp_path) == []


def test_shard_writer_publishes_without_importing(tmp_path):
    writer = ShardWriter(str(tmp_path / "s.rec"), str(tmp_path / "s.idx"))
    writer.write(b"shard record", 0)
    with imports_fail():
        writer.publish()
    with recpipe.RecordReader(str(tmp_path / "s.rec")) as reader:
        assert list(reader) == [b"shard record"]


REMOTE_SCRIPT = textwrap.dedent("""
    import json, sys
    import recpipe
    url, options = sys.argv[1], json.loads(sys.argv[2])
    writer = recpipe.RecordWriter(url, storage_options=options)
    for i in range(3):
        writer.write(b"remote %d" % i)
    if sys.argv[3] == "crash":
        raise RuntimeError("the program crashed")
""")


def _run_remote(url, options, end):
    import json

    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    return subprocess.run([sys.executable, "-c", REMOTE_SCRIPT, url, json.dumps(options), end],
                          capture_output=True, text=True, timeout=60, env=env)


def test_remote_writer_of_a_crashed_program_publishes_nothing(s3):
    import fsspec

    bucket, options = s3
    done = _run_remote(f"{bucket}/crashed/open.rec", options, "crash")
    assert done.returncode == 1 and "the program crashed" in done.stderr
    fs, path = fsspec.core.url_to_fs(f"{bucket}/crashed",
                                     **{k: v for k, v in options.items() if k != "recpipe"})
    assert not fs.exists(path) or fs.ls(path) == []


def test_remote_writer_left_open_at_exit_publishes(s3, tmp_path):
    bucket, options = s3
    url = f"{bucket}/left/open.rec"
    done = _run_remote(url, options, "exit")
    assert done.returncode == 0, done.stderr
    with recpipe.RecordReader(url, storage_options=options) as reader:
        assert list(reader) == [b"remote %d" % i for i in range(3)]
        size = reader.size
    assert len(load_sums(url, size, options)) == 3


CRASH = textwrap.dedent("""
    import sys
    import recpipe as mx
    out = sys.argv[1]
    record = mx.recordio.MXIndexedRecordIO(out + "/crash.idx", out + "/crash.rec", "w")
    raw = mx.RecordWriter(out + "/raw.rec")
    for i in range(3):
        record.write_idx(i, b"record %d" % i)
        raw.write(b"raw %d" % i)
    {end}
""")


@pytest.mark.parametrize("end", ["raise RuntimeError('the program crashed')",
                                 "raise KeyboardInterrupt"])
def test_a_program_that_crashes_publishes_nothing(tmp_path, end):
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    done = subprocess.run([sys.executable, "-c", CRASH.format(end=end), str(out)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode != 0 and "Traceback" in done.stderr
    assert os.listdir(out) == []  # neither a truncated file nor a temporary one


def test_a_program_that_exits_with_sys_exit_publishes(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    done = subprocess.run([sys.executable, "-c", CRASH.format(end="sys.exit(3)"), str(out)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 3
    with recpipe.RecordReader(str(out / "crash.rec")) as reader:
        assert len(list(reader)) == 3
    assert sorted(os.listdir(out)) == ["crash.idx", "crash.rec", "crash.sums", "raw.idx",
                                       "raw.rec", "raw.sums"]
