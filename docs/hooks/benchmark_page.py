"""MkDocs hook: the benchmark page's results, and a chart drawn from any table that asks for one.

Results. ``docs/benchmarks.md`` keeps its results between ``<!-- benchmarks:begin -->`` and
``<!-- benchmarks:end -->``. When the repository has the benchmark package (its module
``benchmarks/render.py``), the build runs ``python -m benchmarks.render --docs`` in the
repository root and puts what it prints on stdout (Markdown: one table per question, each with
the command that reproduces it, made from ``benchmarks/results/*.json``) in place of that block;
a non-zero exit fails the build. Without the package the page keeps the block as committed.

Charts. A table directly under a line ``<!-- chart: COLUMN -->`` (optionally ``<!-- chart:
COLUMN | TITLE -->``) gets an SVG bar chart after it, drawn at build time: one bar per row,
labelled by the row's first cell, as long as the number in column COLUMN (a header name). A
cell such as ``2.9x`` is one value; ``2.5-2.75x`` is drawn as a bar to 2.5 with a lighter part
to 2.75 (a range over runs); a cell without a number gets no bar. The renderer only has to
write such tables; no plotting library is needed to build the site.
"""

import html
import re
import subprocess
import sys
from pathlib import Path

BEGIN, END = "<!-- benchmarks:begin -->", "<!-- benchmarks:end -->"
CHART = re.compile(r"^<!-- chart: *(?P<column>[^|]+?) *(?:\| *(?P<title>.+?) *)?-->\s*$")
NUMBER = re.compile(r"(\d+(?:\.\d+)?)(?:\s*[-–]\s*(\d+(?:\.\d+)?))?")
REPOSITORY = Path(__file__).resolve().parents[2]

WIDTH, LABEL_WIDTH, BAR_HEIGHT, GAP = 720, 300, 20, 8


def on_page_markdown(markdown, page, config, files):
    if BEGIN in markdown and (REPOSITORY / "benchmarks" / "render.py").is_file():
        markdown = _rendered_results(markdown)
    if "<!-- chart:" in markdown:
        markdown = add_charts(markdown, page.file.src_uri)
    return markdown


def _rendered_results(markdown):
    """The page with its results block replaced by ``python -m benchmarks.render --docs``."""
    head, rest = markdown.split(BEGIN, 1)
    if END not in rest:
        raise ValueError(f"docs/benchmarks.md: {BEGIN} without {END}")
    tail = rest.split(END, 1)[1]
    result = subprocess.run([sys.executable, "-m", "benchmarks.render", "--docs"],
                            cwd=REPOSITORY, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise RuntimeError("python -m benchmarks.render --docs failed "
                           f"({result.returncode}): {result.stderr[-2000:]}")
    return f"{head}{BEGIN}\n{result.stdout}\n{END}{tail}"


def add_charts(markdown, where="page"):
    """``markdown`` with an SVG chart after every table marked ``<!-- chart: COLUMN -->``."""
    lines, out, i = markdown.split("\n"), [], 0
    while i < len(lines):
        match = CHART.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        start = i + 1
        end = start
        while end < len(lines) and lines[end].lstrip().startswith("|"):
            end += 1
        table = lines[start:end]
        if len(table) < 3:
            raise ValueError(f"{where}: line {i + 1}: a chart marker must sit right above a "
                             "Markdown table")
        out += table
        out += ["", chart_svg(table, match["column"], match["title"], where), ""]
        i = end
    return "\n".join(out)


def _cells(row):
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def chart_svg(table, column, title=None, where="page"):
    """An inline SVG horizontal bar chart of ``column`` of a Markdown ``table`` (its lines)."""
    header = _cells(table[0])
    names = [re.sub(r"[`*]", "", name) for name in header]
    if column not in names:
        raise ValueError(f"{where}: chart column {column!r} is not in the table ({names})")
    index = names.index(column)
    bars = []
    for row in table[2:]:
        cells = _cells(row)
        label = re.sub(r"[`*\[\]]|\(.*?\)", "", cells[0]).strip()
        match = NUMBER.search(cells[index]) if index < len(cells) else None
        if match:
            low = float(match[1])
            bars.append((label, low, float(match[2]) if match[2] else low, cells[index]))
    if not bars:
        raise ValueError(f"{where}: chart of {column!r}: no row has a number in that column")
    top = max(high for _, _, high, _ in bars) or 1.0
    scale = (WIDTH - LABEL_WIDTH - 90) / top
    height = len(bars) * (BAR_HEIGHT + GAP) + GAP + 24
    title = title or column
    parts = [f'<svg class="recpipe-chart" xmlns="http://www.w3.org/2000/svg" role="img" '
             f'width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
             f'aria-label="{html.escape(title)}">',
             f'<title>{html.escape(title)}</title>',
             f'<text x="{LABEL_WIDTH}" y="16" font-size="13" font-weight="bold">'
             f'{html.escape(title)}</text>']
    for n, (label, low, high, text) in enumerate(bars):
        y = 24 + GAP + n * (BAR_HEIGHT + GAP)
        parts.append(f'<text x="{LABEL_WIDTH - 8}" y="{y + 15}" font-size="12" '
                     f'text-anchor="end">{html.escape(label[:48])}</text>')
        parts.append(f'<rect x="{LABEL_WIDTH}" y="{y}" width="{max(low * scale, 1):.1f}" '
                     f'height="{BAR_HEIGHT}" fill="#3f51b5"/>')
        if high > low:
            parts.append(f'<rect x="{LABEL_WIDTH + low * scale:.1f}" y="{y}" '
                         f'width="{(high - low) * scale:.1f}" height="{BAR_HEIGHT}" '
                         f'fill="#9fa8da"/>')
        parts.append(f'<text x="{LABEL_WIDTH + high * scale + 6:.1f}" y="{y + 15}" '
                     f'font-size="12">{html.escape(re.sub(r"[`*]", "", text))}</text>')
    parts.append("</svg>")
    return '<div class="recpipe-chart-box">' + "".join(parts) + "</div>"  # raw HTML block
