"""mypy over the modules listed in ``files`` of [tool.mypy] in pyproject.toml (with the settings
there). The list is a ratchet: it must keep at least MINIMUM_ENTRIES entries, so the checked set
only grows."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
# Raise this when you add entries to [tool.mypy] files (never lower it).
MINIMUM_ENTRIES = 49


def checked_paths():
    try:
        import tomllib
    except ImportError:  # Python 3.10: mypy's own dependency
        import tomli as tomllib
    with open(PYPROJECT, "rb") as f:
        return list(tomllib.load(f)["tool"]["mypy"]["files"])


def test_the_checked_set_only_grows():
    paths = checked_paths()
    assert len(paths) >= MINIMUM_ENTRIES, (
        f"{PYPROJECT} [tool.mypy] files lists {len(paths)} entries, fewer than the "
        f"{MINIMUM_ENTRIES} already checked: the type-checked set may only grow")
    assert len(set(paths)) == len(paths), "an entry is listed twice"
    missing = [path for path in paths if not (ROOT / path).exists()]
    assert not missing, f"listed for type checking but not in the tree: {missing}"


def test_listed_modules_pass_mypy(tmp_path):
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (pip install 'recpipe[test]' installs it)")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(tmp_path / "mypy-cache"), "--no-error-summary", *checked_paths()],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    report = (done.stdout + done.stderr).strip()
    assert done.returncode == 0, f"mypy found errors:\n{report}"
