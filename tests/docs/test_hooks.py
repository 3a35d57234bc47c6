"""The documentation's build hooks on their own (no site build): the benchmark page's contract
with ``python -m benchmarks.render --docs``, the charts drawn from marked tables, and the CLI
reference's text escaping."""

import importlib.util
import sys
from types import SimpleNamespace

import pytest

from tests.docs._blocks import REPO_ROOT


def _hook(name):
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}",
                                                  REPO_ROOT / "docs" / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PAGE = SimpleNamespace(file=SimpleNamespace(src_uri="benchmarks.md"))
COMMITTED = ("# Benchmarks\n\n<!-- benchmarks:begin -->\npending tables\n"
             "<!-- benchmarks:end -->\n\n## Reproducing\n")
RENDERED = ("## Decoding\n\n<!-- chart: ratio -->\n| target | ratio |\n|---|---:|\n"
            "| recpipe vs DALI | 2.75x |\n| recpipe vs bare | 1.2-1.3x |\n")


def test_results_come_from_the_benchmark_package_when_it_exists(tmp_path, monkeypatch):
    hook = _hook("benchmark_page")
    monkeypatch.setattr(hook, "REPOSITORY", tmp_path)
    assert hook.on_page_markdown(COMMITTED, PAGE, {}, None).count("pending tables") == 1
    package = tmp_path / "benchmarks"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "render.py").write_text(
        "import sys\nassert sys.argv[1:] == ['--docs']\nprint(" + repr(RENDERED) + ")\n")
    page = hook.on_page_markdown(COMMITTED, PAGE, {}, None)
    assert "pending tables" not in page and "| recpipe vs DALI | 2.75x |" in page
    assert page.startswith("# Benchmarks") and page.rstrip().endswith("## Reproducing")
    assert page.count('<svg class="recpipe-chart"') == 1


def test_a_failing_renderer_fails_the_build(tmp_path, monkeypatch):
    hook = _hook("benchmark_page")
    monkeypatch.setattr(hook, "REPOSITORY", tmp_path)
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "__init__.py").write_text("")
    (tmp_path / "benchmarks" / "render.py").write_text("raise SystemExit('no results')\n")
    with pytest.raises(RuntimeError, match="no results"):
        hook.on_page_markdown(COMMITTED, PAGE, {}, None)


def test_chart_bars_follow_the_column(tmp_path):
    hook = _hook("benchmark_page")
    svg = hook.add_charts(RENDERED)
    bars = svg.split("<rect")[1:]
    widths = [float(bar.split('width="')[1].split('"')[0]) for bar in bars]
    assert len(bars) == 3  # 2.75; 1.2 and its spread to 1.3
    assert widths[0] > widths[1] > widths[2] > 0
    assert "recpipe vs DALI" in svg and "2.75x" in svg


@pytest.mark.parametrize("markdown, message", [
    ("<!-- chart: ratio -->\ntext, not a table\n", "right above a Markdown table"),
    ("<!-- chart: speed -->\n| a | ratio |\n|---|---|\n| x | 2x |\n", "not in the table"),
    ("<!-- chart: ratio -->\n| a | ratio |\n|---|---|\n| x | n/a |\n", "no row has a number"),
])
def test_bad_chart_markers_fail_the_build(markdown, message):
    with pytest.raises(ValueError, match=message):
        _hook("benchmark_page").add_charts(markdown)


def test_cli_reference_escapes_prose_but_not_code():
    hook = _hook("cli_reference")
    assert hook._cell("a <b> and *c* | `x_y <z>`") == r"a &lt;b&gt; and \*c\* \| `x_y <z>`"
    text = hook.cli_reference()
    assert "## recpipe pack {#recpipe-pack}" in text and "`--shard-size SIZE`" in text
    assert sys.modules.get("recpipe.cli") is not None
