"""Small hostile-input cases: corrupt lengths behind an index, files truncated while open,
folders and FIFOs given as .rec files, string-keyed indexes in verify, inspect on junk."""

import os
import struct
import subprocess
import sys

import pytest

import recpipe
from recpipe.errors import RecordFormatError
from recpipe.io.verify import verify

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
