"""The repository's folders outside the package: CI and developer scripts in ci/, benchmarks in
benchmarks/, dated investigations in experiments/, no tools/ shed; and the README's two commands
are the ones CI runs."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# a path into the repository written in prose or code (a script under ci, benchmarks ...)
PATH = re.compile(r"(?<![\w./-])((?:ci|benchmarks|experiments|tools)/[\w./-]+\.(?:sh|py|txt|c))")
MXNETS_OWN = {"tools/im2rec.py", "tools/rec2idx.py"}  # MXNet's scripts, named as MXNet names them
JOINED = re.compile(r"""/ ["']tools["'] /""")  # ROOT / "tools" / "x.sh" (MXNet's own: in its tree)


def readme_commands():
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    return [line.split("#", 1)[0].strip() for line in block.splitlines()
            if line.split("#", 1)[0].strip()]


def test_ci_runs_the_readmes_test_command():
    setup, test = readme_commands()
    run = (ROOT / ".ci" / "run").read_text()
    assert re.search(rf"^exec {re.escape(test)}\s*$", run, re.M), run
    for command in (setup, test):
        for script in re.findall(r"bash (\S+\.sh)", command):
            assert (ROOT / script).is_file(), f"the README runs {script}, which is not there"


def test_no_tools_shed_and_no_path_to_a_missing_script():
    assert not (ROOT / "tools").exists(), "tools/ is gone: ci/, benchmarks/, experiments/"
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    missing = []
    for name in tracked:
        # the journal's notes keep the commands as they were run (experiments/README.md maps them)
        if not name.endswith((".py", ".sh", ".md", ".toml", ".txt", ".c", ".h", ".yml")) or \
                name.startswith("experiments/") or name == "BENCHMARKS.md":
            continue
        path = ROOT / name
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        missing += [f"{name}: a path joined under tools/" for line in text.splitlines()
                    if JOINED.search(line) and "mxnet" not in line.lower()]
        for found in PATH.findall(text):
            if found not in MXNETS_OWN and not (ROOT / found.rstrip(".")).exists():
                missing.append(f"{name}: {found}")
    assert not missing, "paths to files that are not there:\n" + "\n".join(missing)
