"""The quarantine file (concurrent writers, hostile folders) and ``recpipe verify`` with sums:
checking without decoding, ``--decode --write-sums`` for files made elsewhere, listing and
clearing quarantined records."""

import json
import multiprocessing
import os

import pytest

import recpipe
from recpipe.cli import main
from recpipe.decode.decoders import get_decoder
from recpipe.decode.loader import ImageLoader
from recpipe.io.sidecars.quarantine import (QuarantineEntry, QuarantineFile, quarantine_dir,
                                            quarantine_of)
from recpipe.io.sidecars.sums import sums_url_for
from recpipe.io.health.verify import verify

from .._damage import damage, textured_jpeg, write_pack
from ..test_face_layout import write_faces


def _append_many(directory, identity, writer, count):
    file = QuarantineFile(identity, directory)
    for i in range(count):
        file.add(QuarantineEntry(writer * 100000 + i, i, "decode", f"w{writer} " + "x" * 3000))


def test_concurrent_writers_never_interleave(tmp_path):
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_append_many, args=(str(tmp_path), "ds", w, 150))
               for w in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    entries = QuarantineFile("ds", str(tmp_path)).entries()
    assert len(entries) == 8 * 150
    assert all(len(e.line()) < 4096 for e in entries.values())
    assert {e.reason[:3] for e in entries.values()} == {f"w{w} " for w in range(8)}
    assert {e.reason[3:] for e in entries.values()} == {"x" * 397}  # truncated, whole lines


def test_default_folder_is_the_users_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("RECPIPE_QUARANTINE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert quarantine_dir() == str(tmp_path / "recpipe" / "quarantine")


def test_symlinked_file_is_neither_followed_nor_trusted(tmp_path):
    file = QuarantineFile("ds", str(tmp_path))
    target = tmp_path / "elsewhere.txt"
    target.write_text("5\t1\tsum\tplanted\n")
    os.symlink(target, file.path)
    assert file.entries() == {}
    assert not file.add(QuarantineEntry(7, 2, "sum", "bad"))
    assert target.read_text() == "5\t1\tsum\tplanted\n"


def test_symlinked_folder_is_ignored(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "link")
    file = QuarantineFile("ds", str(tmp_path / "link"))
    assert not file.add(QuarantineEntry(7, 2, "sum", "bad"))
    assert os.listdir(real) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a file of another user")
def test_files_of_another_user_are_not_trusted(tmp_path):
    file = QuarantineFile("ds", str(tmp_path))
    with open(file.path, "w") as f:
        f.write("5\t1\tsum\tplanted\n")
    os.chown(file.path, 65534, 65534)
    assert file.entries() == {}
    folder = tmp_path / "theirs"
    folder.mkdir()
    os.chown(folder, 65534, 65534)
    assert not QuarantineFile("ds", str(folder)).add(QuarantineEntry(7, 2, "sum", "bad"))


def test_torn_and_foreign_lines_are_ignored(tmp_path):
    file = QuarantineFile("ds", str(tmp_path))
    file.add(QuarantineEntry(8, 1, "format", "bad magic"))
    with open(file.path, "a") as f:
        f.write("garbage line\n12\tx\tsum\tno\n40\t3\tsu")
    assert list(file.entries()) == [8]


# -- verify --------------------------------------------------------------------------------------


def _damaged_in_place(rec, position, how="flip"):
    """Damage record ``position`` keeping the file's identity (inode and mtime)."""
    st = os.stat(rec)
    with recpipe.RecordReader(rec) as reader:
        offset = int(reader.offsets[position])
    original = open(rec, "rb").read()
    damage(rec, offset, how)
    os.utime(rec, ns=(st.st_atime_ns, st.st_mtime_ns))
    return offset, original


def test_verify_checks_sums_without_decoding(tmp_path):
    rec = write_pack(tmp_path / "d.rec", 8)
    report = verify(rec)
    assert report.ok and report.sums_checked == 8 and report.decoded is None
    offset, _ = _damaged_in_place(rec, 5, "zero")
    report = verify(rec)
    assert not report.ok and report.counts == {"checksum-mismatch": 1}
    assert (report.problems[0].offset, report.problems[0].record) == (offset, 5)
    assert main(["verify", rec, "--no-progress"]) == 1
    assert verify(rec, sums=False).ok  # a decoder does not see this damage


def test_verify_reports_a_stale_sidecar_and_write_sums_replaces_it(tmp_path, capsys):
    rec = write_pack(tmp_path / "d.rec", 6)
    stale = open(sums_url_for(rec), "rb").read()
    write_pack(tmp_path / "d.rec", 7)
    open(sums_url_for(rec), "wb").write(stale)
    report = verify(rec)
    assert report.counts == {"sums-stale": 1} and "changed" in report.problems[0].reason
    assert main(["verify", rec, "--write-sums", "--no-progress"]) == 2
    assert main(["verify", rec, "--decode", "--write-sums", "--no-progress"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert verify(rec).ok and verify(rec).sums_checked == 7


def test_write_sums_protects_a_file_made_elsewhere(tmp_path):
    rec = str(tmp_path / "mx.rec")
    writer = recpipe.mx.recordio.MXIndexedRecordIO(str(tmp_path / "mx.idx"), rec, "w")
    for i in range(6):
        writer.write_idx(i, recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), textured_jpeg(i)))
    writer.close()
    os.remove(sums_url_for(rec))  # as MXNet would have written it
    assert verify(rec).sums_checked is None
    report = verify(rec, decoder=get_decoder("auto"), write_sums=True)
    assert report.ok and report.sums_written == sums_url_for(rec)
    _damaged_in_place(rec, 3)
    with recpipe.RecordReader(rec) as reader:
        with pytest.raises(recpipe.RecordFormatError, match="checksum mismatch"):
            reader[3]


def test_write_sums_refuses_a_file_with_a_bad_record(tmp_path):
    rec = str(tmp_path / "mx.rec")
    with recpipe.RecordWriter(rec, sums=False) as writer:
        for i in range(4):
            jpeg = textured_jpeg(i)
            writer.write(recpipe.pack(recpipe.IRHeader(0, 0.0, i, 0),
                                      jpeg[:len(jpeg) // 2] if i == 2 else jpeg))
    report = verify(rec, decoder=get_decoder("auto"), write_sums=True)
    assert report.counts == {"decode-failed": 1} and report.sums_written is None
    assert not os.path.exists(sums_url_for(rec))


def test_write_sums_on_an_insightface_file(tmp_path):
    rec, labels = write_faces(tmp_path)
    os.remove(sums_url_for(rec))
    report = verify(rec, decoder=get_decoder("auto"), write_sums=True)
    assert report.ok and report.decoded == len(labels) and report.sums_written


def test_verify_lists_and_clears_quarantined_records(tmp_path, capsys):
    rec = write_pack(tmp_path / "d.rec", 8)
    offset, original = _damaged_in_place(rec, 4)
    with ImageLoader(rec, 4, (3, 32, 32), on_error="skip", threads=1) as loader:
        assert sum(len(labels) for _, labels in loader) == 7
    entries = quarantine_of(rec).entries()
    assert [(e.offset, e.record, e.kind) for e in entries.values()] == [(offset, 4, "sum")]
    assert main(["inspect", rec, "--no-progress"]) == 0
    assert "QUARANTINED" in capsys.readouterr().out
    report = verify(rec)  # still damaged: the entry stays, listed
    assert report.counts["quarantined"] == 1 and report.counts["checksum-mismatch"] == 1
    # the damage was on the wire, not on the disk: the bytes read back clean now
    st = os.stat(rec)
    with open(rec, "r+b") as f:
        f.write(original)
    os.utime(rec, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert main(["verify", rec, "--no-progress", "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["quarantine_cleared"] == 1 and len(done["quarantined"]) == 1
    assert quarantine_of(rec).entries() == {}
    with ImageLoader(rec, 4, (3, 32, 32), threads=1) as loader:
        assert sum(len(labels) for _, labels in loader) == 8


def test_a_quarantined_decode_failure_raises_a_decode_error_in_later_runs(tmp_path):
    rec = str(tmp_path / "d.rec")
    with recpipe.RecordWriter(rec) as writer:
        for i in range(6):
            body = b"\xff\xd8 not a jpeg" if i == 3 else textured_jpeg(i)
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), body))
    for run in range(2):
        with ImageLoader(rec, 3, (3, 32, 32), threads=1) as loader:
            with pytest.raises(recpipe.DecodeError) as info:
                list(loader)
        assert info.value.record == 3
        assert info.value.reason.startswith("quarantined") == (run == 1)
    assert [e.kind for e in quarantine_of(rec).entries().values()] == ["decode"]


def test_decode_entries_are_cleared_only_by_a_decoding_verify(tmp_path):
    rec = write_pack(tmp_path / "d.rec", 4)
    file = quarantine_of(rec)
    with recpipe.RecordReader(rec) as reader:
        offset = int(reader.offsets[1])
    file.add(QuarantineEntry(offset, 1, "decode", "libjpeg: Corrupt JPEG data"))
    report = verify(rec)
    assert report.counts == {"quarantined": 1} and report.quarantine_cleared == 0
    report = verify(rec, decoder=get_decoder("auto"))
    assert report.ok and report.quarantine_cleared == 1


# -- only faults of the bytes are quarantined -----------------------------------------------------


def _progressive_pack(path, count=8):
    """``count`` progressive JPEG records (several scans each), labels ``0..count-1``."""
    import cv2
    import numpy as np

    with recpipe.RecordWriter(str(path)) as writer:
        for i in range(count):
            rng = np.random.default_rng(i)
            img = cv2.GaussianBlur(rng.integers(0, 256, (64, 80, 3), dtype=np.uint8), (3, 3), 0)
            jpeg = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_PROGRESSIVE, 1])[1].tobytes()
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), jpeg))
    return str(path)


def _served(rec, **keywords):
    with ImageLoader(rec, 4, (3, 32, 32), on_error="skip", threads=1, last_batch="partial",
                     **keywords) as loader:
        return sum(len(labels) for _, labels in loader)


@pytest.mark.parametrize("wrong", [{"label_width": 2}, {"max_scans": 2},
                                   {"max_pixels": 100}],
                         ids=["label_width", "max_scans", "max_pixels"])
@pytest.mark.parametrize("integrity", ["auto", "strict"])
def test_a_run_with_wrong_settings_quarantines_nothing(tmp_path, wrong, integrity):
    rec = _progressive_pack(tmp_path / "p.rec")
    assert _served(rec, integrity=integrity, **wrong) == 0
    assert quarantine_of(rec).entries() == {}
    assert _served(rec, integrity=integrity) == 8


def test_settings_errors_say_they_are_the_settings_fault(tmp_path):
    rec = _progressive_pack(tmp_path / "p.rec")
    with ImageLoader(rec, 4, (3, 32, 32), threads=1, label_width=2) as loader:
        with pytest.raises(recpipe.errors.LabelError) as info:
            list(loader)
    assert info.value.fault == "settings" and "label_width=2" in str(info.value)
    with ImageLoader(rec, 4, (3, 32, 32), threads=1, max_scans=2) as loader:
        with pytest.raises(recpipe.DecodeError) as info:
            list(loader)
    assert info.value.fault == "settings" and "max_scans" in str(info.value)


def test_a_crop_that_fails_where_the_whole_image_decodes_is_not_quarantined(tmp_path,
                                                                               monkeypatch):
    """A decode that fails only for the crop or scale asked (a decoder's bug, as in region
    decodes with fast_upsample) is the settings' fault: confirmed by a whole decode."""
    from recpipe.decode import native as native_module
    from recpipe.decode.decoder_base import Decoder

    real = native_module.extension
    monkeypatch.setattr(native_module, "extension",
                        lambda name: None if name == "_batch" else real(name))

    def broken_region(self, data, box, **keywords):
        raise recpipe.DecodeError("Corrupt JPEG data: premature end of data segment")

    monkeypatch.setattr(Decoder, "decode_region", broken_region)
    rec = write_pack(tmp_path / "d.rec", 8)
    with ImageLoader(rec, 4, (3, 32, 32), threads=1, rand_crop=True) as loader:
        with pytest.raises(recpipe.DecodeError) as info:
            list(loader)
    assert info.value.fault == "settings" and "whole image decodes" in str(info.value)
    assert _served(rec, rand_crop=True) == 0
    assert quarantine_of(rec).entries() == {}


def test_entries_name_what_found_them(tmp_path):
    rec = str(tmp_path / "d.rec")
    with recpipe.RecordWriter(rec) as writer:
        for i in range(6):
            body = b"\xff\xd8 not a jpeg" if i == 3 else textured_jpeg(i)
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), body))
    _damaged_in_place(rec, 1)
    assert _served(rec) == 4
    entries = sorted(quarantine_of(rec).entries().values())
    assert [(e.record, e.kind) for e in entries] == [(1, "sum"), (3, "decode")]
    assert "CRC32C of" in entries[0].detector and "d.sums" in entries[0].detector
    assert "decode of the whole image" in entries[1].detector


# -- entries die with the sidecar that produced them -----------------------------------------


def test_a_repack_beside_a_stale_sidecar_quarantines_nothing(tmp_path):
    rec = write_pack(tmp_path / "d.rec", 8)
    with recpipe.RecordReader(rec) as reader:
        payloads = [reader[i] for i in range(8)]
    old = open(sums_url_for(rec), "rb").read()
    writer = recpipe.mx.recordio.MXIndexedRecordIO(str(tmp_path / "d.idx"), rec, "w")
    for key, payload in enumerate(reversed(payloads)):
        writer.write_idx(key, payload)
    writer.close()
    open(sums_url_for(rec), "wb").write(old)  # MXNet leaves the old sidecar
    with pytest.raises(recpipe.errors.StaleSumsError):
        _served(rec)
    assert quarantine_of(rec).entries() == {}
    report = verify(rec)
    assert "sums-stale" in report.counts and "checksum-mismatch" not in report.counts
    os.remove(sums_url_for(rec))
    assert _served(rec) == 8


def test_sum_entries_die_with_their_sidecar(tmp_path):
    rec = write_pack(tmp_path / "d.rec", 8)
    offset, _ = _damaged_in_place(rec, 4)
    assert _served(rec) == 7
    [entry] = quarantine_of(rec).entries().values()
    assert entry.kind == "sum" and entry.basis.startswith("sums:")
    assert _served(rec) == 7  # remembered while its sidecar is there
    os.remove(sums_url_for(rec))  # without it nothing says the record is damaged
    assert _served(rec) == 8
    report = verify(rec)  # and verify drops the entry
    assert report.ok and quarantine_of(rec).entries() == {}


def test_a_stale_sidecar_of_same_offsets_fails_reads_and_quarantines_nothing(tmp_path):
    """Records of one length re-packed in another order keep every offset: the sidecar is
    found stale at the first record that differs, by probing others; nothing is quarantined."""
    rec = str(tmp_path / "d.rec")
    images = [recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), textured_jpeg(0)) for i in
              range(8)]  # one JPEG, labels 0..7: one payload length
    with recpipe.RecordWriter(rec) as writer:
        for payload in images:
            writer.write(payload)
    old = open(sums_url_for(rec), "rb").read()
    with recpipe.RecordWriter(rec, sums=False) as writer:
        for payload in reversed(images):
            writer.write(payload)
    assert not os.path.exists(sums_url_for(rec))  # the writer removed it...
    open(sums_url_for(rec), "wb").write(old)  # ...a tool that knows nothing of it would not
    with ImageLoader(rec, 4, (3, 32, 32), threads=1, on_error="raise") as loader:
        with pytest.raises(recpipe.errors.StaleSumsError, match="does not describe"):
            list(loader)
    assert _served(rec) == 0
    assert quarantine_of(rec).entries() == {}
    report = verify(rec)
    assert report.counts == {"sums-stale": 1} and report.sums_state == "stale"
    os.remove(sums_url_for(rec))
    assert _served(rec) == 8


# -- --write-sums never certifies what a valid sidecar calls damaged ---------------------------


def _relabel_in_place(rec, position, old, new):
    """Change the label of record ``position`` (float32 ``old`` -> ``new``) keeping the file's
    size, inode and mtime: damage a decoder cannot see."""
    import struct

    st = os.stat(rec)
    with recpipe.RecordReader(rec) as reader:
        offset = int(reader.offsets[position])
    data = bytearray(open(rec, "rb").read())
    at = offset + 8 + 4  # part head, then IRHeader flag (uint32), then the label
    assert struct.unpack_from("<f", data, at)[0] == old
    struct.pack_into("<f", data, at, new)
    open(rec, "r+b").write(data)
    os.utime(rec, ns=(st.st_atime_ns, st.st_mtime_ns))
    return offset


def test_write_sums_refuses_to_certify_what_the_sidecar_calls_damaged(tmp_path, capsys):
    rec = write_pack(tmp_path / "d.rec", 8)
    sidecar = open(sums_url_for(rec), "rb").read()
    offset = _relabel_in_place(rec, 3, 3.0, 2.0)
    assert _served(rec) == 7  # the loader quarantines record 3
    assert [e.record for e in quarantine_of(rec).entries().values()] == [3]
    report = verify(rec, decoder=get_decoder("auto"), write_sums=True)
    assert report.counts == {"checksum-mismatch": 1, "quarantined": 1}
    assert report.sums_written is None and report.decode_failures == 0
    assert open(sums_url_for(rec), "rb").read() == sidecar
    assert main(["verify", rec, "--decode", "--write-sums", "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "checksum-mismatch" in out and "--accept-current-bytes" in out
    assert open(sums_url_for(rec), "rb").read() == sidecar
    assert [e.record for e in quarantine_of(rec).entries().values()] == [3]
    assert _served(rec) == 7
    # the explicit override, said so in the output
    assert main(["verify", rec, "--decode", "--write-sums", "--accept-current-bytes",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "ACCEPTED" in out and f"byte {offset}" in out
    assert quarantine_of(rec).entries() == {}
    with ImageLoader(rec, 8, (3, 32, 32), threads=1) as loader:
        [(_, labels)] = list(loader)
    assert sorted(labels.tolist()) == [0, 1, 2, 2, 4, 5, 6, 7]


def test_accept_current_bytes_needs_write_sums(tmp_path, capsys):
    rec = write_pack(tmp_path / "d.rec", 2)
    assert main(["verify", rec, "--decode", "--accept-current-bytes", "--no-progress"]) == 2
    assert "--write-sums" in capsys.readouterr().err


# -- a quarantine file of any size is read whole, kept compact, rewritten cleanly ------------


def test_entries_past_64_mib_are_seen_and_the_file_is_compacted(tmp_path):
    rec = write_pack(tmp_path / "d.rec", 8)
    offset, _ = _damaged_in_place(rec, 5)
    with recpipe.RecordReader(rec) as reader:
        token = reader.sums.token
        first = int(reader.offsets[0])
    file = quarantine_of(rec)
    filler = QuarantineEntry(first, 0, "decode", "x" * 300, "test", "").line()
    os.makedirs(file.directory, exist_ok=True)
    with open(file.path, "wb") as f:  # a file grown past 64 MiB by repeated lines
        f.write(filler * ((65 << 20) // len(filler) + 1))
        f.write(QuarantineEntry(offset, 5, "sum", "damaged", "test", token).line())
    assert os.path.getsize(file.path) > 64 << 20
    assert set(file.entries()) == {first, offset}
    os.remove(file.path)
    with open(file.path, "wb") as f:
        f.write(filler.replace(b"decode", b"format") * ((65 << 20) // len(filler) + 1))
    assert _served(rec) == 6  # record 0 stays out; 5 is found damaged, quarantined once...
    size = os.path.getsize(file.path)
    assert size < 4096  # ...and the loader compacted the file: 2 entries
    assert {e.record for e in file.entries().values()} == {0, 5}
    assert _served(rec) == 6 and os.path.getsize(file.path) == size  # nothing appended again


def test_a_rewrite_on_a_full_disk_leaves_no_temporary_file(tmp_path, monkeypatch):
    import errno

    from recpipe.io.sidecars import quarantine as quarantine_module

    file = QuarantineFile("ds", str(tmp_path))
    for i in range(3):
        file.add(QuarantineEntry(8 * i, i, "format", "bad magic", "test"))
    before = open(file.path, "rb").read()
    real_write = os.write

    def full(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".tmp"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(quarantine_module.os, "write", full)
    assert file.rewrite([QuarantineEntry(0, 0, "format", "bad magic", "test")]) is False
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(file.path)]
    assert open(file.path, "rb").read() == before


_REWRITE_UNDER_FSIZE = """
import resource, signal, sys
from recpipe.io.sidecars.quarantine import QuarantineEntry, QuarantineFile
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a signal
file = QuarantineFile("ds", sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
entries = [QuarantineEntry(8 * i, i, "format", "y" * 200, "test") for i in range(50)]
print("REWRITTEN" if file.rewrite(entries) else "REFUSED")
"""


def test_a_rewrite_past_the_file_size_limit_leaves_no_temporary_file(tmp_path):
    import subprocess
    import sys

    file = QuarantineFile("ds", str(tmp_path))
    file.add(QuarantineEntry(8, 1, "format", "bad magic", "test"))
    before = open(file.path, "rb").read()
    done = subprocess.run([sys.executable, "-c", _REWRITE_UNDER_FSIZE, str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "REFUSED", done.stderr
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(file.path)]
    assert open(file.path, "rb").read() == before
