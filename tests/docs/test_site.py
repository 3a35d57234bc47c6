"""The documentation site: it builds in strict mode (a broken link or reference fails it), its
generated references are complete, and it renders in a real headless browser (Debian's
chromium): pages, search, charts.

Needs the ``docs`` extra (``pip install -e '.[docs]'``, installed by ci/test.sh); without it
the tests skip, except under CI, where a missing extra is a failure.
"""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests._browser import chromium, css, missing, wait
from tests.docs._blocks import REPO_ROOT

BUILD_TIMEOUT = 600


def _docs_missing():
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            return f"{module} is not installed: pip install -e '.[docs]'"
    return None


def _build(config, out):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1",
               PYTHONPATH=os.pathsep.join([str(REPO_ROOT)] + [
                   p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config),
                           "-d", str(out)], cwd=Path(config).parent, env=env,
                          capture_output=True, text=True, timeout=BUILD_TIMEOUT)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    reason = _docs_missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI must build the documentation: {reason}")
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("site")
    result = _build(REPO_ROOT / "mkdocs.yml", out)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr[-8000:]}"
    return out


def _text(html):
    return re.sub(r"<[^>]+>", " ", html)


def test_every_page_of_the_nav_is_built(site):
    pages = sorted(p.relative_to(REPO_ROOT / "docs") for p in (REPO_ROOT / "docs").rglob("*.md"))
    for page in pages:
        built = site / page.with_suffix("") / "index.html"
        if page.name == "index.md":
            built = site / page.parent / "index.html"
        assert built.is_file(), f"{page} was not built"


def test_cli_reference_lists_every_command_and_option(site):
    from recpipe.cli import build_parser

    html = (site / "reference" / "cli" / "index.html").read_text()
    parser = build_parser()
    commands = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    assert len(commands.choices) >= 10
    for name, sub in commands.choices.items():
        assert f'id="recpipe-{name}"' in html, f"recpipe {name} has no section"
        section = html.split(f'id="recpipe-{name}"', 1)[1].split('<h2 id="recpipe-', 1)[0]
        for action in sub._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert option in section, f"recpipe {name} {option} is not documented"


def test_api_reference_documents_the_public_names(site):
    import recpipe
    import recpipe.io
    import recpipe.torch

    lazy = {"ImageLoader": "recpipe.decode.ImageLoader",
            "LoaderOptions": "recpipe.decode.LoaderOptions",
            "replay": "recpipe.decode.replay.replay"}
    pages = {"recpipe": ("recpipe", recpipe.__all__), "io": ("recpipe.io", recpipe.io.__all__),
             "torch": ("recpipe.torch", recpipe.torch.__all__)}
    for page, (module, names) in pages.items():
        html = (site / "reference" / "api" / page / "index.html").read_text()
        for name in names:
            if name.isupper():  # constants (MAGIC, HEADER_SIZE) are not headed entries
                continue
            anchor = lazy.get(name,
                              f"{module}.{name}") if module == "recpipe" else f"{module}.{name}"
            assert f'id="{anchor}"' in html, f"{module}.{name} is missing from the API reference"


def test_benchmark_page_has_charts(site):
    html = (site / "benchmarks" / "index.html").read_text()
    assert html.count('<svg class="recpipe-chart"') >= 5
    # with the benchmark package, the results block is generated (the pending note is gone)
    generated = (REPO_ROOT / "benchmarks" / "render.py").exists()
    assert ("Pending generation" not in html) == generated


def test_strict_build_fails_on_a_broken_link(tmp_path, site):
    """--strict is what CI relies on: a page linking to a page that does not exist fails it."""
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(REPO_ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    shutil.copytree(REPO_ROOT / "docs", copy / "docs")
    with open(copy / "docs" / "index.md", "a") as page:
        page.write("\nSee [the missing page](guides/no-such-page.md).\n")
    result = _build(copy / "mkdocs.yml", tmp_path / "out")
    assert result.returncode != 0
    assert "no-such-page.md" in result.stderr


@pytest.fixture(scope="module")
def served(site):
    """The built site on http://127.0.0.1:PORT/ (search needs http, not file://)."""
    process = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "--bind", "127.0.0.1",
                                "0", "--directory", str(site)],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = process.stdout.readline()  # "Serving HTTP on 127.0.0.1 port N (http://...) ..."
        port = int(re.search(r"port (\d+)", line).group(1))
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url, timeout=5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()


@pytest.fixture(scope="module")
def browser():
    reason = missing()
    if reason:
        pytest.skip(reason)
    with chromium(prefix="recpipe-docs-chromium-") as driver:
        yield driver


def _size(driver, element):
    return driver.execute_script(
        "const r = arguments[0].getBoundingClientRect(); return [r.width, r.height];", element)


PAGES = ["", "getting-started/", "guides/faces/", "reference/cli/", "reference/api/recpipe/",
         "benchmarks/"]


@pytest.mark.parametrize("path", PAGES)
def test_pages_render(served, browser, path):
    browser.get(served + path)
    heading = wait(browser, lambda d: css(d, "article h1"), f"the heading of /{path}")[0]
    assert heading.text.strip() and "404" not in browser.title
    assert _size(browser, heading)[1] > 0
    nav = css(browser, "nav.md-nav--primary a.md-nav__link")
    assert len(nav) >= 10, "the navigation did not render"


def test_search_finds_a_query(served, browser):
    browser.get(served)
    wait(browser, lambda d: css(d, "article h1"), "the home page")
    box = wait(browser, lambda d: [e for e in css(d, "input.md-search__input") if e.is_enabled()],
               "the search box")[0]
    browser.execute_script("arguments[0].focus()", box)
    box.send_keys("quarantine")
    items = wait(browser, lambda d: css(d, "li.md-search-result__item"), "search results")
    texts = " ".join(item.text for item in items).lower()
    assert "quarantine" in texts
    link = css(browser, "li.md-search-result__item a")[0].get_attribute("href")
    assert link.startswith(served)


def test_charts_and_images_render(served, browser):
    browser.get(served + "benchmarks/")
    charts = wait(browser, lambda d: css(d, "svg.recpipe-chart"), "the charts")
    assert len(charts) >= 5
    for chart in charts:
        width, height = _size(browser, chart)
        assert width > 100 and height > 50, (width, height)
        bars = chart.find_elements("css selector", "rect")
        assert bars and all(_size(browser, bar)[0] > 0 for bar in bars)
    browser.get(served + "guides/view/")
    images = wait(browser, lambda d: css(d, "article img"), "the screenshots")
    for image in images:
        wait(browser, lambda d, image=image: d.execute_script(
            "return arguments[0].complete && arguments[0].naturalWidth > 0", image),
            f"the image {image.get_attribute('src')}")
