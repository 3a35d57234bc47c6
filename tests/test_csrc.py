"""The C tree (csrc/) a reader can walk: every header compiles on its own (it includes what it
uses, nothing is taken from the file that includes it), and names are by concept, not by the
branch or issue that added them."""

import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

import numpy as np
import pytest

CSRC = Path(__file__).resolve().parents[1] / "csrc"
HEADERS = sorted(str(path.relative_to(CSRC)) for path in CSRC.rglob("*.h"))
COMPILER = shutil.which("cc") or shutil.which("gcc")


def test_the_tree_has_its_families():
    families = {path.parent.name for path in CSRC.rglob("*.[ch]")}
    assert {"common", "plan", "kernels", "jpeg", "batch"} <= families
    assert not list((CSRC.parent / "recpipe").glob("_*.[ch]")), "C sources belong in csrc/"


@pytest.mark.skipif(COMPILER is None, reason="no C compiler")
@pytest.mark.parametrize("header", HEADERS)
def test_each_header_compiles_on_its_own(tmp_path, header):
    unit = tmp_path / "unit.c"
    unit.write_text(f'#include "{header}"\n')
    includes = [str(CSRC), sysconfig.get_paths()["include"], np.get_include()]
    run = subprocess.run([COMPILER, "-fsyntax-only", "-Wall", "-Werror", "-Wno-unused-function",
                          *[f"-I{folder}" for folder in includes], str(unit)],
                         capture_output=True, text=True, timeout=120)
    if run.returncode != 0 and "jpeglib.h" in run.stderr and header.startswith("jpeg/"):
        pytest.skip("no libjpeg headers here")
    assert run.returncode == 0, run.stderr[-3000:]


def test_no_branch_or_issue_names_in_the_c():
    markers = re.compile(r"native(colour|affine|inter)|issue \d+|branch \w+", re.IGNORECASE)
    found = [f"{path.relative_to(CSRC)}:{number}" for path in CSRC.rglob("*.[ch]")
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if markers.search(line)]
    assert not found, found
