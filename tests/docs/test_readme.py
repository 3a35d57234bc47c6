"""README.md is the front door: short, the two commands first, and every link it has leads
somewhere in the repository."""

import re

from tests.docs._blocks import REPO_ROOT

README = REPO_ROOT / "README.md"
MAX_LINES = 200


def test_readme_is_under_200_lines():
    lines = README.read_text().splitlines()
    assert len(lines) < MAX_LINES, f"README.md has {len(lines)} lines: move text into docs/"


def test_readme_opens_with_the_two_commands():
    text = README.read_text()
    first_block = re.search(r"```bash\n(.*?)```", text, re.S).group(1)
    assert first_block.splitlines()[0].startswith("bash tools/install.sh && recpipe demo")
    assert first_block.splitlines()[1].startswith("bash tools/test.sh")
    assert text.index("```bash") < text.index("\n## "), "the two commands come before any section"


def test_readme_links_lead_to_files():
    text = README.read_text()
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert len(local) >= 15, "the README links to the guides"
    for link in local:
        assert (REPO_ROOT / link).exists(), f"README.md links to {link}, which does not exist"


def test_readme_links_every_guide():
    text = README.read_text()
    for guide in sorted((REPO_ROOT / "docs" / "guides").glob("*.md")):
        assert f"(docs/guides/{guide.name})" in text, f"README.md does not link {guide.name}"
