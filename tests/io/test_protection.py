"""A file without a checksum sidecar is never unprotected without a word: ``verify`` says what it
checked, loaders log it once per file, ``inspect`` and ``doctor FILE`` show whether a file is
protected (sidecar bound, stale, damaged or absent); and what ``verify --decode`` can see."""

import json
import logging
import os

import pytest

import recpipe
from recpipe.cli import main
from recpipe.decode.decoders import get_decoder
from recpipe.decode.loader import ImageLoader
from recpipe.io.sidecars import sums as sums_module
from recpipe.io.health.protection import protection_of
from recpipe.io.sidecars.sums import sums_url_for
from recpipe.io.health.verify import verify

from .._damage import scan_span, textured_jpeg, write_pack


@pytest.fixture
def unprotected(tmp_path):
    """A pack as MXNet would leave it: .rec and .idx, no sidecar."""
    rec = write_pack(tmp_path / "mx.rec", 6)
    os.remove(sums_url_for(rec))
    return rec


@pytest.fixture(autouse=True)
def forget_noted(monkeypatch):
    monkeypatch.setattr(sums_module, "_noted", set())


def test_verify_says_it_checked_no_checksums_and_how_to_add_them(unprotected, capsys):
    assert main(["verify", unprotected, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "framing and index only: no checksums for this file" in out
    assert f"recpipe verify --decode --write-sums {unprotected}` protects it" in out
    assert main(["verify", unprotected, "--decode", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "image decoding (6 decoded) only" in out and "misses most damage" in out
    report = verify(unprotected)
    assert report.sums_state == "absent" and "no checksums" in report.to_dict()["checked"]


def test_verify_of_a_protected_file_says_what_matched(tmp_path, capsys):
    rec = write_pack(tmp_path / "d.rec", 4)
    assert main(["verify", rec, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "checked: framing, index and checksums (4 records match the .sums sidecar)" in out
    assert "protects it" not in out
    assert main(["verify", rec, "--no-sums", "--no-progress"]) == 0
    assert "checksums not checked: --no-sums" in capsys.readouterr().out


def test_the_loader_logs_once_per_file_that_it_has_no_sums(unprotected, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="recpipe.io.sidecars.sums"):
        for _ in range(2):
            with ImageLoader(unprotected, 3, (3, 16, 16), threads=1) as loader:
                list(loader)
        with ImageLoader(unprotected, 3, (3, 16, 16), threads=1, integrity="off") as loader:
            list(loader)
        protected = write_pack(tmp_path / "p.rec", 3)
        with ImageLoader(protected, 3, (3, 16, 16), threads=1) as loader:
            list(loader)
    notes = [r for r in caplog.records if r.name == "recpipe.io.sidecars.sums"]
    assert len(notes) == 1
    message = notes[0].getMessage()
    assert unprotected in message and "no checksum sidecar" in message
    assert "recpipe verify --decode --write-sums" in message


def test_protection_states(unprotected, tmp_path):
    assert protection_of(unprotected)["state"] == "absent"
    rec = write_pack(tmp_path / "d.rec", 6)
    bound = protection_of(rec)
    assert bound["state"] == "bound" and bound["records"] == 6
    stale = open(sums_url_for(rec), "rb").read()
    with recpipe.RecordWriter(rec, sums=False) as writer:  # same records, another order
        with recpipe.RecordReader(unprotected) as reader:
            for i in reversed(range(len(reader))):
                writer.write(reader[i])
    open(sums_url_for(rec), "wb").write(stale)
    assert protection_of(rec)["state"] == "stale"
    open(sums_url_for(rec), "wb").write(b"RECPSUMS" + bytes(40))
    assert protection_of(rec)["state"] == "unusable"
    assert protection_of(str(tmp_path / "missing.rec"))["state"] == "unknown"


def test_inspect_and_doctor_show_whether_a_file_is_protected(unprotected, tmp_path, capsys):
    rec = write_pack(tmp_path / "d.rec", 3)
    assert main(["inspect", unprotected, "--no-progress"]) == 0
    assert "checksums: NOT protected: no checksum sidecar" in capsys.readouterr().out
    assert main(["inspect", rec, "--no-progress", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["protection"]["state"] == "bound"
    assert main(["doctor", "--no-measure", unprotected, rec]) == 0
    out = capsys.readouterr().out
    assert f"{unprotected}: checksums: NOT protected" in out
    assert f"{rec}: checksums: protected" in out
    assert main(["doctor", "--no-measure", "--json", rec]) == 0
    assert json.loads(capsys.readouterr().out)["protection"][rec]["state"] == "bound"


def test_verify_decode_treats_libjpeg_warnings_as_errors(tmp_path):
    """A scan cut short before its EOI is only a warning to libjpeg ("premature end of data
    segment"): verify --decode reports it."""
    jpeg = textured_jpeg(1)
    start, end = scan_span(jpeg)
    short = jpeg[:start + (end - start) // 2] + b"\xff\xd9"
    rec = str(tmp_path / "w.rec")
    with recpipe.RecordWriter(rec, sums=False) as writer:
        writer.write(recpipe.pack(recpipe.IRHeader(0, 0.0, 0, 0), jpeg))
        writer.write(recpipe.pack(recpipe.IRHeader(0, 1.0, 1, 0), short))
    report = verify(rec, decoder=get_decoder("auto"))
    assert report.counts == {"decode-failed": 1} and report.problems[0].record == 1
