"""``pack --resume`` keeps only records that read back as written (issue 30, item 6).

A kept temporary ``.rec`` may hold bytes that never reached the disk as written (a page of
zeros after a power failure) while its framing is intact. Resuming checks every kept record
against the journal the packer made durable before the crash; a damaged record is packed
again, never published with a sum of its damaged bytes.
"""

import os

import pytest

import recpipe
from recpipe.io.sidecars.crc32c import crc32c
from recpipe.packing import journal as journal_module
from recpipe.packing.packer import pack_dataset
from recpipe.packing.shards import ShardWriter, journal_path

from .test_packer import _files, _Stop, _stop_after, photos  # noqa: F401 - a fixture

ARGS = dict(resize=14, shards=0, seed=4, flush_every=1, workers=0)
STOP_AT = 7


def interrupted(photos, tmp_path):  # noqa: F811 - the fixture
    """A clean pack in ``clean/`` and the same pack stopped after STOP_AT items in ``run/``;
    returns the temporary files of ``run/o`` and the offsets of their records."""
    pack_dataset(photos, tmp_path / "clean" / "o", **ARGS)
    with pytest.raises(_Stop):
        pack_dataset(photos, tmp_path / "run" / "o", progress=_stop_after(STOP_AT), **ARGS)
    run = tmp_path / "run"
    rec, idx = run / ".o.rec.pack.tmp", run / ".o.idx.pack.tmp"
    offsets = [int(line.split("\t")[1]) for line in idx.read_text().splitlines()]
    assert len(offsets) >= 5
    return rec, idx, offsets + [rec.stat().st_size]


def zero_tail(rec, start, end, count=48):
    """Zero the last ``count`` bytes of the record at ``[start, end)``: its framing stays."""
    data = bytearray(rec.read_bytes())
    assert end - start > count + 64
    data[end - count:end] = bytes(count)
    rec.write_bytes(bytes(data))


def resume_and_compare(photos, tmp_path):  # noqa: F811 - the fixture
    resumed = pack_dataset(photos, tmp_path / "run" / "o", resume=True, **ARGS)
    assert _files(tmp_path / "run") == _files(tmp_path / "clean")
    for name in _files(tmp_path / "clean"):
        clean = (tmp_path / "clean" / name).read_bytes()
        assert (tmp_path / "run" / name).read_bytes() == clean, name
    with recpipe.RecordReader(str(tmp_path / "run" / "o.rec")) as reader:  # sums checked
        assert len(list(reader)) == len(reader)
    assert not [n for n in os.listdir(tmp_path / "run") if n.startswith(".")]
    return resumed


@pytest.mark.parametrize("damaged", [-1, 2])
def test_a_record_zeroed_in_the_kept_file_is_packed_again(photos, tmp_path, damaged):  # noqa: F811
    rec, _, offsets = interrupted(photos, tmp_path)
    kept = len(offsets) - 1
    k = damaged % kept
    zero_tail(rec, offsets[k], offsets[k + 1])
    resumed = resume_and_compare(photos, tmp_path)
    assert resumed.resumed_records == k  # the damaged record and those after it: packed again


def test_a_damaged_journal_keeps_only_what_it_still_lists(photos, tmp_path):  # noqa: F811
    rec, _, offsets = interrupted(photos, tmp_path)
    journal = tmp_path / "run" / ".o.rec.pack-journal.tmp"
    lines = journal.read_bytes().split(b"\n")
    assert len(lines) - 1 == len(offsets) - 1
    data = bytearray(journal.read_bytes())
    third = sum(len(line) + 1 for line in lines[:3])
    data[third:] = bytes(len(data) - third)  # the journal's tail lost: zeros
    journal.write_bytes(bytes(data))
    resumed = resume_and_compare(photos, tmp_path)
    assert resumed.resumed_records == 3


def test_partial_files_without_a_journal_start_over(photos, tmp_path):  # noqa: F811
    interrupted(photos, tmp_path)
    os.remove(tmp_path / "run" / ".o.rec.pack-journal.tmp")
    resumed = resume_and_compare(photos, tmp_path)
    assert resumed.resumed_records == 0


def test_journal_lists_records_only_after_the_data_is_on_disk(tmp_path, monkeypatch):
    events = []
    real_fsync = os.fsync
    writer = ShardWriter(str(tmp_path / "s.rec"), str(tmp_path / "s.idx"))
    names = {writer._rec.file.fileno(): "rec", writer._idx.file.fileno(): "idx",
             writer._journal.file.fileno(): "journal"}

    def fsync(fd):
        events.append((names[fd], os.path.getsize(journal_path(str(tmp_path / "s.rec")))))
        real_fsync(fd)

    monkeypatch.setattr(journal_module.os, "fsync", fsync)
    writer.write(b"payload one", 0)
    writer.write(b"payload two", 1)
    assert os.path.getsize(journal_path(str(tmp_path / "s.rec"))) == 0
    writer.flush()
    # the data files reach the disk while the journal is still empty; then the journal
    assert [name for name, _ in events] == ["rec", "idx", "journal"]
    assert events[0][1] == events[1][1] == 0 and events[2][1] > 0
    entries, _ = journal_module.read_journal(journal_path(str(tmp_path / "s.rec")))
    assert [(e["key"], e["crc"]) for e in entries] == [(0, crc32c(b"payload one")),
                                                       (1, crc32c(b"payload two"))]
    monkeypatch.undo()
    writer.publish()
    assert sorted(os.listdir(tmp_path)) == ["s.idx", "s.rec", "s.sums"]
