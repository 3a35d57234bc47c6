"""``python -m benchmarks --quick``: every suite runs at smoke size (CI's check that the
benchmarks still run; no timing is asserted), and the renderer turns every result into tables."""

import subprocess
import sys

import pytest

from benchmarks import render
from benchmarks.harness import REPO
from benchmarks.results import latest, validate
from benchmarks.suites import ORDER, load


@pytest.mark.timeout(1200)
def test_every_suite_runs_at_smoke_size_and_renders(tmp_path):
    out = tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--out", str(out),
                           "--work", str(tmp_path / "work")], cwd=REPO, capture_output=True,
                          text=True, timeout=1100)
    tail = (done.stdout[-3000:], done.stderr[-6000:])
    assert done.returncode == 0, tail
    results = latest(out, quick=True)
    skipped = {line.split(":", 1)[0] for line in done.stdout.splitlines()
               if ": skipped: " in line}
    assert set(results) | skipped == set(ORDER), tail
    for name, result in results.items():
        validate(result, name)
        assert result["quick"] and result["repeats"] == 1
        measured = [c for p in result["points"] for c in p["contenders"].values() if c["runs"]]
        assert measured or result["skipped"], f"{name}: nothing was measured"
        assert all(run["wall_s"] >= 0 for c in measured for run in c["runs"])
    text = render.render_markdown(out, quick=True)
    for name in results:
        assert f"## {load(name).title}" in text
    assert "No result yet" not in text or skipped
    docs = render.render_docs(out, quick=True)
    assert "<!-- chart:" in docs and "Command: `python -m benchmarks" in docs
