"""The code blocks of the documentation: every fenced ```python and ```bash block of
``docs/**/*.md`` and ``README.md``, with the marker written right above it.

Markers (an HTML comment on the line right above the fence, invisible on the site and on
GitHub):

- ``<!-- skip: REASON -->``: the block is not run; the reason is required and said in the test
  output (``<!-- skip -->`` alone is an error).
- ``<!-- run: mxnet -->``: a Python block run alone by the real mxnet 1.9.1's interpreter
  (``$RECPIPE_MXNET_PYTHON``, else ``.venv-mxnet``), for what needs MXNet itself.

Other fences (```text, ```console, ```yaml...) are output or configuration and are not run.
"""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

REPO_ROOT = Path(__file__).resolve().parents[2]
RUN_LANGUAGES = {"python": "python", "py": "python", "bash": "bash", "sh": "bash",
                 "shell": "bash"}
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)\s*(?P<info>[^\s`]*)")
MARKER = re.compile(r"^\s*<!--\s*(?P<kind>skip|run)\s*(?::\s*(?P<value>.*?))?\s*-->\s*$")
RUNNERS = ("mxnet",)


class MarkerError(ValueError):
    """A marker that says too little (a skip without its reason) or names no known runner."""


@dataclass(frozen=True)
class Block:
    path: str  # relative to the repository
    line: int  # 1-based line of the opening fence
    language: str  # "python" or "bash"
    code: str
    skip: Optional[str] = None  # the reason it is not run
    runner: Optional[str] = None  # "mxnet": its own interpreter

    @property
    def where(self):
        return f"{self.path}:{self.line}"


def pages() -> List[Path]:
    """README.md and every Markdown page of the site, in a stable order."""
    return [REPO_ROOT / "README.md"] + sorted((REPO_ROOT / "docs").rglob("*.md"))


def page_id(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:  # a page outside the repository (the collector's own tests)
        return str(path)


def blocks(path: Path) -> List[Block]:
    """The runnable blocks of one page, in page order."""
    lines = path.read_text(encoding="utf-8").split("\n")
    found, i = [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, indent = match["fence"], len(match["indent"])
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        language = RUN_LANGUAGES.get(match["info"].lower())
        if language is not None:
            code = "\n".join(line[indent:] if line[:indent].strip() == "" else line
                             for line in lines[i + 1:end])
            skip, runner = _marker(path, lines, i)
            found.append(Block(page_id(path), i + 1, language, code + "\n", skip, runner))
        i = end + 1
    return found


def _marker(path, lines, fence_index):
    above = lines[fence_index - 1] if fence_index > 0 else ""
    match = MARKER.match(above)
    if not match:
        if "<!--" in above and re.search(r"\b(skip|run)\b", above):
            raise MarkerError(f"{page_id(path)}:{fence_index}: unreadable marker {above.strip()!r}"
                              " (write <!-- skip: REASON --> or <!-- run: mxnet -->)")
        return None, None
    value = (match["value"] or "").strip()
    if match["kind"] == "skip":
        if not value:
            raise MarkerError(f"{page_id(path)}:{fence_index}: a skip marker must say why the "
                              "block does not run: <!-- skip: REASON -->")
        return value, None
    if value not in RUNNERS:
        raise MarkerError(f"{page_id(path)}:{fence_index}: unknown runner {value!r} "
                          f"(known: {', '.join(RUNNERS)})")
    return None, value
