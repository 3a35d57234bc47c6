"""One meaning per name: "plan" is the sample planner's word (``recpipe.decode.augment.plan``:
``Planner``, ``SamplePlan``), and a type name is defined once in the package (``PackOptions`` is
the pack's options, im2rec's being a preset of them, ``recpipe.mx.im2rec.im2rec_options``)."""

import ast
import collections
import pathlib

import recpipe

ROOT = pathlib.Path(recpipe.__file__).parent
PLANNER = ROOT / "decode" / "augment" / "plan.py"


def _definitions():
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                yield path, node.name


def test_plan_names_belong_to_the_sample_planner():
    modules = list(ROOT.rglob("plan*.py"))
    assert modules == [PLANNER]
    types = {(path.relative_to(ROOT).as_posix(), name) for path, name in _definitions()
             if "Plan" in name and path != PLANNER}
    assert not types, f"'Plan' names outside the sample planner: {sorted(types)}"


def test_public_types_are_defined_once():
    places = collections.defaultdict(list)
    for path, name in _definitions():
        if name[:1].isupper():
            places[name].append(path.relative_to(ROOT).as_posix())
    twice = {name: paths for name, paths in places.items() if len(paths) > 1}
    assert not twice, f"types defined in more than one place: {twice}"
