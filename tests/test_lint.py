"""ruff over every Python file of the repository (the package, tests, benchmarks, CI scripts,
the docs' hooks and the experiments' scripts; what git ignores is left out): the rule set of
``[tool.ruff]`` in pyproject.toml (pycodestyle, pyflakes, bugbear, blind excepts; lines of 100)
is kept at zero findings. Skipped where ruff is not installed, except under CI, where that is
a failure (``pip install 'recpipe[test]'`` installs it)."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINTED = ["."]


def test_ruff_finds_nothing():
    if importlib.util.find_spec("ruff") is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run ruff: pip install 'recpipe[test]'")
        pytest.skip("ruff is not installed (pip install 'recpipe[test]' installs it)")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *LINTED],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"ruff found problems:\n{done.stdout}{done.stderr}"
