"""The README's two commands, as a new user runs them, in fresh virtual environments: one made
by ``python -m venv`` and one by ``uv venv`` (which has no pip). The first (setup + main job)
must install recpipe into that venv and run the demo; the second (the test command) must say
first what it installs system-wide, then set up and pass ``tests/test_wheel.py``, the test that
used to depend on the interpreter running it.

Each runs in a copy of this checkout (the build writes into the tree), in a venv of a Python
that has none of recpipe's dependencies (the system's, else one uv manages), with recpipe's and
the tests' dependencies installed into it by the project's own scripts: a few minutes each, so
marked slow (``pytest -m slow tests/test_setup_venv.py``). uv is installed into a scratch folder
with pip when it is not on PATH.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
_SKIP_PARTS = {".git", "build", "__pycache__", ".pytest_cache", ".hypothesis"}


def readme_commands():
    """The commands of the README's first code block, comments stripped."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S).group(1)
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    return [c for c in commands if c]


def _checkout_files():
    """The checkout's files (tracked and new, without ignored ones such as builds and venvs)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True, timeout=60)
    if listed.returncode == 0:
        return [name for name in listed.stdout.decode().split("\0") if name]
    return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")  # an unpacked sdist
            if p.is_file() and not _SKIP_PARTS & set(p.relative_to(ROOT).parts)
            and not p.name.endswith(".so") and not p.relative_to(ROOT).parts[0].startswith(".venv")]


def _copy_checkout(target):
    for name in _checkout_files():
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def _uv(tmp_path):
    found = shutil.which("uv")
    if found:
        return found
    target = tmp_path / "uv-tool"
    install = subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                              "--disable-pip-version-check", "--target", str(target), "uv"],
                             capture_output=True, text=True, timeout=600)
    if install.returncode != 0:
        pytest.skip(f"uv is not on PATH and pip could not install it: {install.stderr[-500:]}")
    return str(target / "bin" / "uv")


_PROBE = ("import sys, sysconfig, os, venv, ensurepip; assert sys.version_info >= (3, 10); "
          "assert os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')); "
          "import importlib.util as u; sys.exit(u.find_spec('numpy') is not None)")


def _bare_python(uv):
    """A Python 3.10+ with venv, ensurepip and its headers but none of recpipe's dependencies
    (not the one running these tests, which has them all): the system's when it is such a one,
    else one uv manages (downloaded once). A venv of an interpreter that has the dependencies
    would hide what a new user's fresh environment lacks."""
    candidates = ["/usr/bin/python3"] + [shutil.which(f"python3.{minor}") or ""
                                         for minor in range(10, 14)]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK) and subprocess.run(
                [candidate, "-c", _PROBE], capture_output=True, timeout=60).returncode == 0:
            return candidate
    for command in ([uv, "python", "find", "--managed-python", "3.11"],
                    [uv, "python", "install", "3.11"],
                    [uv, "python", "find", "--managed-python", "3.11"]):
        found = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if found.returncode != 0:
        pytest.skip(f"no Python without recpipe's dependencies here, and uv could not get one: "
                    f"{found.stderr[-500:]}")
    return found.stdout.strip()


def _fresh_venv(kind, folder, tmp_path):
    base = _bare_python(_uv(tmp_path))
    if kind == "venv":
        command = [base, "-m", "venv", str(folder)]
    else:
        command = [_uv(tmp_path), "venv", "-q", "--python", base, str(folder)]
    made = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stderr[-2000:]
    return folder


def _inside(venv, tmp_path):
    """The environment of a shell that activated ``venv``: nothing of the running tests' own
    setup (PYTHONPATH, another venv, the checkout's mxnet venv) leaks in."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHON",
                        "RECPIPE_MXNET_PYTHON", "RECPIPE_MXNET_VENV")}
    env.update(VIRTUAL_ENV=str(venv), PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
               RECPIPE_SANITIZE="0", RECPIPE_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("UV_PYTHON", None)
    return env


@pytest.mark.parametrize("kind", ["venv", "uv"])
def test_the_readme_commands_work_in_a_fresh_venv(kind, tmp_path):
    setup, test = readme_commands()
    assert test.startswith("bash ci/test.sh"), test
    checkout = _copy_checkout(tmp_path / "checkout")
    venv = _fresh_venv(kind, tmp_path / f"{kind}-env", tmp_path)
    env = _inside(venv, tmp_path)

    first = subprocess.run(["bash", "-c", setup], cwd=checkout, env=env, capture_output=True,
                           text=True, timeout=1200)
    assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
    assert "images/s" in first.stdout and "train" in first.stdout, first.stdout[-2000:]
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import recpipe, sys; print(recpipe.__file__); print(sys.prefix)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    module, prefix = where.stdout.split()
    assert Path(module).is_relative_to(checkout) and Path(prefix) == venv, where.stdout

    second = subprocess.run(["bash", "-c", f"{test} tests/test_wheel.py -rs"], cwd=checkout,
                            env=env, capture_output=True, text=True, timeout=2400)
    output = second.stdout + second.stderr
    assert second.returncode == 0, output[-6000:]
    head = second.stderr.splitlines()[:6]
    assert head[0] == "test.sh: before the tests, this installs", head
    assert any(line.startswith("  system-wide") for line in head), head
    assert any(str(venv) in line for line in head), head  # into the venv, said so
    summary = second.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and "failed" not in summary, output[-3000:]
