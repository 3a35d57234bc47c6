"""Every Python and shell example of the documentation runs (docs/**/*.md and README.md).

Each page's blocks run in order in a process of their own, in a fresh folder holding the small
files the examples name (tests/docs/_data.py), with ``recpipe`` on PATH running this tree.
A block that must not run carries ``<!-- skip: REASON -->`` right above it; ``<!-- run: mxnet
-->`` runs a block by the real mxnet's interpreter (tests/docs/_blocks.py).
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs._blocks import REPO_ROOT, MarkerError, blocks, page_id, pages
from tests.docs._data import make_example_data

RUNNER = Path(__file__).with_name("_run_page.py")
PAGE_TIMEOUT = 400


def mxnet_python():
    configured = os.environ.get("RECPIPE_MXNET_PYTHON")
    candidates = [configured] if configured else []
    candidates.append(str(REPO_ROOT / ".venv-mxnet" / "bin" / "python"))
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


@pytest.fixture(scope="session")
def example_data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("example-data")
    make_example_data(folder)
    return folder


@pytest.fixture(scope="session")
def s3_endpoint():
    """A moto S3 server on 127.0.0.1 (tests/io/s3server.py), for the pages whose examples read
    ``s3://my-bucket/...``: they run as on AWS, the endpoint and test credentials coming from
    the environment (``AWS_ENDPOINT_URL``) as a user's would."""
    pytest.importorskip("s3fs", reason="s3fs not installed: pip install -e '.[test,s3]'")
    pytest.importorskip("moto.moto_server.werkzeug_app", reason="moto[server] not installed")
    from tests.io.s3server import S3Server

    server = S3Server()
    yield server.endpoint
    server.stop()


S3_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
          "BOTO_CONFIG": "/dev/null"}


def _fill_bucket(endpoint, work, env):
    """``s3://my-bucket`` holding the example files (train.*, faces_emore/*), fresh per page."""
    code = f"""
import os, s3fs
fs = s3fs.S3FileSystem(endpoint_url={endpoint!r})
if fs.exists("my-bucket"):
    fs.rm("my-bucket", recursive=True)
fs.mkdir("my-bucket")
for name in sorted(os.listdir(".")):
    if name.startswith("train."):
        fs.put_file(name, "my-bucket/" + name)
for name in sorted(os.listdir("faces_emore")):
    fs.put_file("faces_emore/" + name, "my-bucket/faces_emore/" + name)
"""
    subprocess.run([sys.executable, "-c", code], cwd=work, env=env, check=True, timeout=120)


@pytest.fixture
def workdir(example_data, tmp_path):
    """A copy of the example data, a private cache and quarantine, and ``recpipe`` on PATH."""
    work = tmp_path / "work"
    shutil.copytree(example_data, work)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "recpipe"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m recpipe "$@"\n')
    shim.chmod(0o755)
    python = bin_dir / "python"
    python.symlink_to(sys.executable)
    env = dict(os.environ,
               PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONPATH=os.pathsep.join(
                   [str(REPO_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(
                       os.pathsep) if p]),
               XDG_CACHE_HOME=str(tmp_path / "cache"),
               RECPIPE_QUARANTINE_DIR=str(tmp_path / "quarantine"),
               MPLBACKEND="Agg", PYTHONUNBUFFERED="1")
    env.pop("RECPIPE_CACHE_DIR", None)
    return work, env


def _run(blocks_to_run, python, work, env):
    payload = json.dumps([{"where": b.where, "language": b.language, "code": b.code}
                          for b in blocks_to_run])
    result = subprocess.run([python, str(RUNNER)], input=payload, cwd=work, env=env,
                            capture_output=True, text=True, timeout=PAGE_TIMEOUT)
    return result.returncode, result.stdout + result.stderr


PAGES = pages()


@pytest.mark.timeout(PAGE_TIMEOUT + 60)
@pytest.mark.parametrize("page", PAGES, ids=[page_id(p) for p in PAGES])
def test_page_examples_run(page, workdir, request):
    work, env = workdir
    found = blocks(page)
    runnable = [b for b in found if b.skip is None and b.runner is None]
    if any("s3://" in b.code for b in runnable):
        endpoint = request.getfixturevalue("s3_endpoint")
        for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
            env.pop(name, None)
        env.update(S3_ENV, AWS_ENDPOINT_URL=endpoint)
        _fill_bucket(endpoint, work, env)
    for block in found:
        if block.skip:
            print(f"{block.where}: not run: {block.skip}")
    if runnable:
        code, output = _run(runnable, sys.executable, work, env)
        assert code == 0, f"an example of {page_id(page)} failed:\n{output[-6000:]}"
    for block in (b for b in found if b.runner == "mxnet"):
        python = mxnet_python()
        if python is None:
            pytest.skip(f"{block.where}: needs the mxnet venv (bash tools/setup_mxnet_venv.sh)")
        code, output = _run([block], python, work, env)
        assert code == 0, f"the MXNet example {block.where} failed:\n{output[-6000:]}"


def test_every_page_has_its_blocks_collected():
    """The collector sees the blocks: a page set in Markdown that hides its examples from it
    (an unknown fence) would pass silently."""
    total = sum(len(blocks(p)) for p in PAGES)
    assert total >= 40, f"only {total} code blocks found in the documentation"


def test_skip_without_reason_is_refused(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n<!-- skip -->\n```bash\nrecpipe doctor\n```\n")
    with pytest.raises(MarkerError, match="must say why"):
        blocks(page)


def test_markers_are_read(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- skip: needs a GPU -->\n```python\nimport torch\n```\n\n"
                    "```bash\nrecpipe doctor\n```\n\n```text\noutput\n```\n"
                    "<!-- run: mxnet -->\n```python\nimport mxnet\n```\n")
    found = blocks(page)
    assert [(b.language, b.skip, b.runner) for b in found] == [
        ("python", "needs a GPU", None), ("bash", None, None), ("python", None, "mxnet")]


def test_a_failing_example_fails(workdir):
    """The runner reports a failing block with its place, in both languages."""
    work, env = workdir
    from tests.docs._blocks import Block

    for block in (Block("x.md", 3, "python", "assert 1 == 2\n"),
                  Block("x.md", 9, "bash", "recpipe inspect missing.rec\n")):
        code, output = _run([block], sys.executable, work, env)
        assert code == 1 and f"FAILED: x.md:{block.line}" in output, output
