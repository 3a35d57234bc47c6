"""Configuration through environment variables (recpipe.system.env), each in a fresh process."""

import json
import os
import subprocess
import sys
import textwrap

import cv2
import numpy as np
import pytest

import recpipe

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = textwrap.dedent("""
    import sys
    import recpipe
    from recpipe.decode.loader import ImageLoader
    rec = sys.argv[1]
    for _ in range(2):  # two loaders, neither closed explicitly
        loader = ImageLoader(rec, 4, (3, 16, 16), threads=1, resize=16)
        list(loader)
        print(loader.threads)
""")


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("env") / "env.rec")
    with recpipe.RecordWriter(url) as writer:
        for i in range(8):
            writer.write(recpipe.pack(recpipe.IRHeader(0, 0.0, i, 0),
                                      cv2.imencode(".jpg", np.full((20, 20, 3), i, np.uint8))[1]))
    return url


def _run(rec, **env):
    return subprocess.run([sys.executable, "-c", SCRIPT, rec], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=REPO_ROOT, **env))


def test_recpipe_threads_overrides_every_loader(rec):
    done = _run(rec, RECPIPE_THREADS="3")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3", "3"]
    bad = _run(rec, RECPIPE_THREADS="lots")
    assert bad.returncode != 0 and "RECPIPE_THREADS" in bad.stderr


def test_recpipe_trace_writes_one_chrome_trace_of_every_loader(rec, tmp_path):
    path = tmp_path / "trace.json"
    done = _run(rec, RECPIPE_TRACE=str(path))
    assert done.returncode == 0, done.stderr
    events = json.loads(path.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert any(n.startswith("loader1/") for n in names) and any(n.startswith("loader2/")
                                                                 for n in names)
    # native runs (recpipe._batch) are one "decode" span each; the Python path has all three
    spans = {e["name"] for e in events if e["ph"] == "X"}
    assert spans >= {"decode", "batch"} and spans <= {"read", "decode", "augment", "batch"}


def test_recpipe_log_level_prints_recpipe_messages(rec):
    done = _run(rec, RECPIPE_LOG_LEVEL="DEBUG")
    assert done.returncode == 0, done.stderr
    assert "DEBUG recpipe." in done.stderr
    assert "DEBUG recpipe." not in _run(rec).stderr


def test_the_documentation_lists_every_variable():
    from recpipe.system.env import VARIABLES

    page = open(os.path.join(REPO_ROOT, "docs", "reference", "environment.md")).read()
    for name in VARIABLES:
        assert f"`{name}`" in page, name


def test_importing_recpipe_configures_no_logging(rec):
    """A library leaves logging to the program: RECPIPE_LOG_LEVEL acts from the first loader."""
    code = ("import logging, recpipe, recpipe.decode, recpipe.torch; "
            "logger = logging.getLogger('recpipe'); "
            "print(logger.level, [type(h).__name__ for h in logger.handlers])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=REPO_ROOT, RECPIPE_LOG_LEVEL="DEBUG"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "['NullHandler']"]


def test_recpipe_log_level_reaches_the_command_line(rec):
    done = subprocess.run([sys.executable, "-m", "recpipe", "verify", rec], capture_output=True,
                          text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=REPO_ROOT, RECPIPE_LOG_LEVEL="DEBUG"))
    assert done.returncode == 0, done.stderr
    assert "INFO recpipe.io.health.verify: verified" in done.stderr
