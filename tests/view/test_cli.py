"""``recpipe view`` on the command line: bad input is an error before any server starts, and a
started viewer prints its address, answers, and stops cleanly on SIGTERM."""

import json
import os
import select
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.view._files import write_damaged


def run(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "recpipe", "view", *args], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    return write_damaged(tmp_path_factory.mktemp("pack"), count=40)


def test_a_missing_file_is_an_error_naming_it(tmp_path):
    done = run(str(tmp_path / "nothing.rec"))
    assert done.returncode == 1 and not done.stdout
    assert "no such file" in done.stderr and "nothing.rec" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_file_that_is_not_recordio_is_an_error(tmp_path):
    import cv2
    import numpy as np

    photo = tmp_path / "photo.rec"
    photo.write_bytes(cv2.imencode(".jpg", np.zeros((8, 8, 3), np.uint8))[1].tobytes())
    done = run(str(photo))
    assert done.returncode == 1 and "not a RecordIO file" in done.stderr and not done.stdout


@pytest.mark.parametrize("args, words", [
    (["rand_mirro=true"], "did you mean 'rand_mirror'"),
    (["--recipe", "imagenet"], "choose from train, val, faces"),
    (["--seed", "1", "seed=2"], "seed given twice"),
    (["brightness"], "KEY=VALUE"),
    (["--port", "70000"], "expected 0..65535"),
])
def test_bad_settings_are_errors_before_the_file_is_opened(tmp_path, args, words):
    done = run(str(tmp_path / "never-opened.rec"), *args)
    assert done.returncode == 1 and words in done.stderr, done.stderr
    assert "no such file" not in done.stderr


def test_the_viewer_prints_its_address_answers_and_stops_on_sigterm(pack):
    process = subprocess.Popen([sys.executable, "-m", "recpipe", "view", pack, "--port", "0",
                                "--recipe", "faces", "dtype=float32", "mean_r=127.5"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline, line = time.monotonic() + 60, ""
        while " at http://" not in line and time.monotonic() < deadline:
            if select.select([process.stdout], [], [], 1.0)[0]:
                line = process.stdout.readline()
            assert process.poll() is None, process.stderr.read()
        url = line.rsplit(" at ", 1)[1].strip()
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0/")
        with urllib.request.urlopen(url + "api/info", timeout=30) as reply:
            info = json.loads(reply.read())
        assert info["records"] == 40 and info["recipe"]["dtype"] == "float32"
        assert info["recipe"]["augment"]["data_shape"] == [3, 112, 112]
        with urllib.request.urlopen(url, timeout=30) as reply:
            page = reply.read().decode()
        assert "<script src=\"/static/app.js\">" in page and "http" not in page.split(
            "<body>")[1].replace(" http", "")  # nothing loaded from elsewhere
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "stopped" in out and "Traceback" not in err


def test_the_page_needs_nothing_from_the_network():
    from importlib import resources

    folder = resources.files("recpipe.view") / "static"
    for name in ("index.html", "app.js", "style.css"):
        text = (folder / name).read_text()
        assert "http://" not in text.replace('"http://www.w3.org/2000/svg"', "")
        assert "https://" not in text and "//cdn" not in text, name
    assert os.path.getsize(str(folder / "app.js")) < 200_000
