"""What a newcomer's usual mistakes print (issue 23, item 6): the error and nothing partial
before it, in the real command line (a subprocess, so stdout, stderr and warnings are real)."""

import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

import recpipe
from recpipe.cli.pack import PackProgress
from recpipe.io import IRHeader, pack

REPO_ROOT = Path(__file__).resolve().parents[1]


def recpipe_cli(*args, env=None, cwd=None):
    environment = dict(os.environ, PYTHONPATH=str(REPO_ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", "recpipe", *args], capture_output=True,
                          text=True, timeout=120, env=environment, cwd=cwd)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("mistakes")
    jpeg = cv2.imencode(".jpg", np.full((24, 24, 3), 120, np.uint8))[1].tobytes()
    (root / "img.jpg").write_bytes(jpeg)
    with recpipe.RecordWriter(str(root / "photos.rec")) as writer:
        for i in range(4):
            writer.write(pack(IRHeader(0, float(i), i, 0), jpeg))
    return root


@pytest.mark.parametrize("name, what", [("img.jpg", "a JPEG image"),
                                        ("photos.idx", "an .idx index")])
def test_bench_and_inspect_say_not_a_recordio_file_and_nothing_else(folder, name, what):
    for command in ("bench", "inspect"):
        done = recpipe_cli(command, str(folder / name), "--seconds" if command == "bench"
                           else "--no-progress", *(["0.1"] if command == "bench" else []))
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr == (f"recpipe {command}: error: {folder / name} is not a RecordIO "
                               f"file (it starts with 0x{done.stderr.split('0x')[1][:8]}, not "
                               f"the RecordIO magic 0xced7230a): this looks like {what}"
                               + (" (give the .rec beside it)" if "idx" in name else "") + "\n")


def test_bench_rejects_a_missing_file_or_decoder_before_measuring(folder):
    missing = recpipe_cli("bench", str(folder / "nope.rec"))
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr == f"recpipe bench: error: no such file: {folder / 'nope.rec'}\n"
    decoder = recpipe_cli("bench", str(folder / "photos.rec"), "--decoder", "jpeglib")
    assert decoder.returncode == 2 and decoder.stdout == ""
    assert "argument --decoder: invalid choice: 'jpeglib'" in decoder.stderr
    assert "bare decode" not in decoder.stderr
    from recpipe.cli.bench import _check_inputs  # the library's check, behind argparse's
    import argparse

    with pytest.raises(ValueError, match="unknown decoder 'jpeglib'"):
        _check_inputs(argparse.Namespace(file=str(folder / "photos.rec"), decoder="jpeglib",
                                         storage_options=None, storage_option=[]))


def test_a_turbojpeg_library_that_does_not_load_is_a_warning_the_user_sees(folder):
    done = recpipe_cli("bench", str(folder / "photos.rec"), "--seconds", "0.05", "--configs",
                       "val", "--batch-size", "2", "--threads", "1",
                       env={"RECPIPE_TURBOJPEG_LIB": "/nonexistent/libturbojpeg.so"})
    assert done.returncode == 0
    assert "RECPIPE_TURBOJPEG_LIB=/nonexistent/libturbojpeg.so is not a usable libturbojpeg" \
        in done.stderr


def test_doctor_names_the_installed_torch_without_importing_it():
    pytest.importorskip("torch")
    from importlib.metadata import version

    from recpipe.report.doctor import diagnose

    code = ("import sys, recpipe.report.doctor as d; r = d.diagnose(measure=False); "
            "print(r['versions']['torch'], 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    assert done.stdout.split() == [version("torch"), "False"]
    assert diagnose(measure=False)["versions"]["torch"] == version("torch")


def test_the_pack_progress_rate_starts_sensible():
    now = [100.0]
    progress = PackProgress(False, clock=lambda: now[0])
    now[0] = 100.001  # the first update arrives with a whole chunk already read
    assert progress.rate(8_700_000) is None
    now[0] = 102.0
    assert progress.rate(8_700_000) == pytest.approx(4.35)  # MB over the time since the start
