"""The results kept in benchmarks/results/ and the BENCHMARKS.md made from them: every file is a
result of its suite, named by its date and commit, and BENCHMARKS.md is exactly what
``python -m benchmarks.render`` writes from them (so no figure in it lacks a result file)."""

import re

import pytest

from benchmarks import render
from benchmarks.harness import RESULTS
from benchmarks.results import load, result_files
from benchmarks.suites import ORDER

FILES = [path for paths in result_files(RESULTS).values() for path in paths]


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.name}" for p in FILES])
def test_a_result_file_is_a_full_run_of_its_suite_named_by_date_and_commit(path):
    result = load(path)
    assert result["suite"] == path.parent.name and result["suite"] in ORDER
    assert not result["quick"], "--quick smoke runs are not kept"
    assert re.fullmatch(rf"{result['date'][:10]}-{result['commit']}(-\d+)?\.json", path.name)


def test_benchmarks_md_is_what_the_renderer_writes_from_the_results():
    assert FILES, "no results in benchmarks/results/"
    expected = render.render_markdown(RESULTS)
    actual = render.BENCHMARKS_MD.read_text()
    assert actual == expected, ("BENCHMARKS.md is not generated from benchmarks/results/: run "
                                "`python -m benchmarks.render`")
