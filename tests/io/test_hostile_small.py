"""Small hostile-input cases: corrupt lengths behind an index, files truncated while open,
folders and FIFOs given as .rec files, string-keyed indexes in verify, inspect on junk."""

import os
import struct
import subprocess
import sys

import pytest

import recpipe
from recpipe.errors import RecordFormatError
from recpipe.io.health.verify import verify

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _rec(path, count=3, size=101):
    with recpipe.RecordWriter(str(path)) as writer:
        for i in range(count):
            writer.write(b"x" * (size - 1) + bytes([i]))
    return str(path)


def test_a_shortened_length_field_behind_an_index_raises(tmp_path):
    rec = _rec(tmp_path / "a.rec")
    data = bytearray(open(rec, "rb").read())
    magic, word = struct.unpack_from("<II", data, 112)  # record 1 (record 0 takes 8 + 104 bytes)
    struct.pack_into("<II", data, 112, magic, (word & ~((1 << 29) - 1)) | 50)
    open(rec, "wb").write(data)
    with recpipe.RecordReader(rec) as reader:
        assert len(reader[0]) == 101 and len(reader[2]) == 101
        with pytest.raises(RecordFormatError, match="no record head follows") as caught:
            reader[1]
    assert caught.value.offset == 112 and caught.value.record == 1


def test_a_file_truncated_while_open_raises_a_format_error(tmp_path):
    rec = _rec(tmp_path / "b.rec", count=50, size=1000)
    reader = recpipe.RecordReader(rec)
    try:
        os.truncate(rec, 20000)
        for position in (19, 30, 49):
            with pytest.raises(RecordFormatError, match="truncated while open"):
                reader[position]
    finally:
        reader.close()


def test_folders_and_fifos_are_refused_with_their_path(tmp_path):
    with pytest.raises(IsADirectoryError, match="folder") as caught:
        recpipe.RecordReader(str(tmp_path))
    assert str(tmp_path) in str(caught.value)
    fifo = tmp_path / "f.rec"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file") as caught:  # at once: no hang
        recpipe.RecordReader(str(fifo))
    assert str(fifo) in str(caught.value)


def test_verify_reports_string_keys_that_readers_cannot_parse_as_ints(tmp_path):
    rec = str(tmp_path / "s.rec")
    with recpipe.RecordWriter(rec) as writer:
        for key in ("a", "b"):
            writer.write(b"payload", key=key)
    report = verify(rec)
    assert [p.kind for p in report.problems] == ["index-string-keys"]
    assert report.index_entries == 2
    with pytest.raises(RecordFormatError, match="key_type=str"):
        recpipe.RecordReader(rec)


@pytest.mark.parametrize("command", ["inspect", "verify"])
def test_cli_on_junk_folders_and_fifos_exits_non_zero_with_the_path(tmp_path, command):
    junk = tmp_path / "junk.rec"
    junk.write_bytes(b"this is not a RecordIO file at all")
    os.mkfifo(tmp_path / "pipe.rec")
    for target in (junk, tmp_path, tmp_path / "pipe.rec"):
        done = subprocess.run([sys.executable, "-m", "recpipe", command, str(target)],
                              capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, PYTHONPATH=REPO_ROOT))
        assert done.returncode == 1, (target, done.stdout, done.stderr)
        assert str(target) in done.stderr + done.stdout
        assert "Traceback" not in done.stderr


_OPEN_AND_READ = """
import sys, recpipe
try:
    with recpipe.RecordReader(sys.argv[1], integrity=sys.argv[2]) as reader:
        print("OPENED", len(reader), reader.sums is not None, reader.index_url is not None)
except Exception as exc:
    print("ERROR", type(exc).__name__, exc)
"""


@pytest.mark.parametrize("ext", ["sums", "idx"])
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_fifo_or_dev_zero_beside_the_rec_is_refused_at_once(tmp_path, ext, kind):
    """One guard for every file read whole beside a .rec (``.idx``, ``.sums``): a FIFO would
    block forever and /dev/zero read until memory runs out; both are refused, naming the file."""
    rec = str(tmp_path / "d.rec")
    with recpipe.RecordWriter(rec) as writer:
        for i in range(3):
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), b"x" * 100))
    hostile = tmp_path / f"d.{ext}"
    hostile.unlink()
    if kind == "fifo":
        os.mkfifo(hostile)
    else:
        os.symlink("/dev/zero", hostile)
    for integrity in ("auto", "strict"):
        done = subprocess.run([sys.executable, "-c", _OPEN_AND_READ, rec, integrity],
                              capture_output=True, text=True, timeout=60)
        out = done.stdout.strip()
        assert out.startswith("ERROR OSError") and "not a regular file" in out, out
        assert str(hostile) in out
    # with integrity='off' the sidecar is never opened
    if ext == "sums":
        done = subprocess.run([sys.executable, "-c", _OPEN_AND_READ, rec, "off"],
                              capture_output=True, text=True, timeout=60)
        assert done.stdout.startswith("OPENED 3 False True"), done.stdout


def test_a_sidecar_larger_than_its_rec_allows_is_not_read(tmp_path):
    rec = str(tmp_path / "d.rec")
    with recpipe.RecordWriter(rec) as writer:
        writer.write(b"x" * 100)
    with open(tmp_path / "d.sums", "wb") as f:
        f.truncate(1 << 30)  # sparse: 1 GiB that is never read
    with pytest.raises(RecordFormatError, match="more than any sidecar"):
        recpipe.RecordReader(rec)
