"""The ``.pyi`` stubs of recpipe's C extensions agree with the built modules: every extension has
one; the functions and constants a stub declares are exactly those the module exports; each
function's parameters are those its docstring signature names, and as many as the C parses
(its argument-count errors, probed with no and with too many arguments); the constants have the
declared types. A stub that lies fails here."""

import ast
import re
from pathlib import Path

import pytest

import recpipe
from recpipe._optional import extension

PACKAGE = Path(recpipe.__file__).parent
# constants a module has only in some builds (#ifdef in the C)
CONDITIONAL = {"_batch": {"LIBJPEG_TURBO_VERSION"}}  # libjpeg-turbo's headers, not plain libjpeg
CSRC = PACKAGE.parent / "csrc"  # the C sources: an extension's module file defines PyInit_<name>
MODULES = sorted(name for path in CSRC.rglob("*.c")
                 for name in re.findall(r"PyMODINIT_FUNC\s+PyInit_(_\w+)", path.read_text()))


def _stub(name):
    return ast.parse((PACKAGE / f"{name}.pyi").read_text())


def _module(name):
    module = extension(name)
    if module is None:
        pytest.skip(f"recpipe.{name} is not built (the build without libjpeg)")
    return module


def _public(module):
    return {name: getattr(module, name) for name in dir(module) if not name.startswith("_")}


def test_every_extension_has_a_stub():
    assert {"_batch", "_colour", "_crc32c", "_kernels", "_plan", "_resize"} <= set(MODULES)
    assert MODULES == sorted(path.stem for path in PACKAGE.glob("_*.pyi"))


@pytest.mark.parametrize("name", MODULES)
def test_the_stub_declares_what_the_module_exports(name):
    module, tree = _module(name), _stub(name)
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    constants = {node.target.id for node in tree.body if isinstance(node, ast.AnnAssign)}
    exported = _public(module)
    assert functions == {key for key, value in exported.items() if callable(value)}
    declared = {key for key, value in exported.items() if not callable(value)}
    assert declared <= constants and constants - declared <= CONDITIONAL.get(name, set())


def _stub_parameters(function):
    """``[(name, has_default)]`` of a stub's positional parameters."""
    args = function.args
    assert not (args.vararg or args.kwarg or args.kwonlyargs), function.name
    first_default = len(args.args) - len(args.defaults)
    return [(arg.arg, i >= first_default) for i, arg in enumerate(args.args)]


def _doc_parameters(function):
    """``[(name, has_default)]`` from the first line of a C function's docstring,
    ``name(a, b, c=0) -> ...``."""
    match = re.match(rf"{function.__name__}\(([^)]*)\)", function.__doc__ or "")
    assert match, f"{function.__name__}'s docstring does not start with its signature"
    parameters, optional = [], False  # "a, b[, c]": c is optional too
    for part in match.group(1).split(","):
        name = part.replace("[", "").replace("]", "").split("=")[0].strip()
        if name:
            parameters.append((name, optional or "=" in part or part.strip().startswith("[")))
        optional = optional or "[" in part
    return parameters


def _arity(function):
    """``(fewest, most)`` positional arguments the C accepts, from its own argument errors."""
    counts = []
    for args in ((), (None,) * 64):
        try:
            function(*args)
        except TypeError as e:
            message = str(e)
        else:
            counts.append(len(args))  # accepted (a function of no arguments, called with none)
            continue
        if "takes no arguments" in message:
            counts.append(0)
            continue
        found = re.search(r"takes (?:exactly|at least|at most) (\d+) argument", message)
        assert found, message
        counts.append(int(found.group(1)))
    return counts[0], counts[1]


@pytest.mark.parametrize("name", MODULES)
def test_each_function_takes_the_stubs_parameters(name):
    module, tree = _module(name), _stub(name)
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        function = getattr(module, node.name)
        stub = _stub_parameters(node)
        assert [p for p, _ in stub] == [p for p, _ in _doc_parameters(function)], node.name
        assert [d for _, d in stub] == [d for _, d in _doc_parameters(function)], node.name
        required = sum(not has_default for _, has_default in stub)
        assert _arity(function) == (required, len(stub)), node.name


_CHECKS = {
    "int": lambda v: isinstance(v, int),
    "Tuple[str, ...]": lambda v: isinstance(v, tuple) and all(isinstance(s, str) for s in v),
    "Dict[str, int]": lambda v: isinstance(v, dict) and all(
        isinstance(k, str) and isinstance(i, int) for k, i in v.items()),
}


@pytest.mark.parametrize("name", MODULES)
def test_the_constants_have_the_declared_types(name):
    module, tree = _module(name), _stub(name)
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and hasattr(module, node.target.id):
            annotation = ast.unparse(node.annotation)
            assert annotation in _CHECKS, f"add a check for {annotation}"
            assert _CHECKS[annotation](getattr(module, node.target.id)), node.target.id


def test_the_probes_catch_a_lying_stub():
    """The checks above fail on a stub that adds, drops or reorders a parameter."""
    fill = next(node for node in _stub("_batch").body
                if isinstance(node, ast.FunctionDef) and node.name == "fill")
    module = _module("_batch")
    truth = _stub_parameters(fill)
    assert truth == _doc_parameters(module.fill)
    optional = sum(1 for _, has_default in truth if has_default)
    assert _arity(module.fill) == (len(truth) - optional, len(truth))
    dropped = ast.parse(ast.unparse(fill).replace(", label_values: Buffer=b''", "")).body[0]
    assert _stub_parameters(dropped) != _doc_parameters(module.fill)
    swapped = ast.parse(ast.unparse(fill).replace("key_lo", "KEY").replace("key_hi", "key_lo")
                        .replace("KEY", "key_hi")).body[0]
    assert _stub_parameters(swapped) != _doc_parameters(module.fill)


def test_the_batch_stub_types_fill_options_as_run_options():
    """_batch.pyi types fill's options as recpipe.decode.native.RunOptions, whose fields are the
    module's OPTION_FIELDS."""
    from recpipe.decode.native import RunOptions

    module, tree = _module("_batch"), _stub("_batch")
    imported = {alias.name: node.module for node in tree.body
                if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert imported["RunOptions"] == "recpipe.decode.native"
    fill = next(node for node in tree.body
                if isinstance(node, ast.FunctionDef) and node.name == "fill")
    annotation = next(arg for arg in fill.args.args if arg.arg == "options").annotation
    assert ast.unparse(annotation) == "RunOptions"
    assert module.OPTION_FIELDS == RunOptions._fields


@pytest.mark.parametrize("name", MODULES)
def test_every_stub_function_has_a_docstring(name):
    for node in _stub(name).body:
        if isinstance(node, ast.FunctionDef):
            assert ast.get_docstring(node), f"{name}.{node.name} has no docstring in its stub"


def test_the_plan_stub_lists_the_option_fields_in_order():
    """_plan.pyi's docstring names OPTION_FIELDS, and its Options alias has one type a field;
    they are the module's, and the first fields of _batch's RunOptions."""
    from recpipe.decode.native import RunOptions

    module = _module("_plan")
    tree = _stub("_plan")
    docstring = ast.get_docstring(tree)
    block = docstring.split("``OPTION_FIELDS`` is", 1)[1].split("\n\n", 1)[1]
    listed = tuple(name.strip() for name in block.replace("\n", " ").split(",") if name.strip())
    assert listed == module.OPTION_FIELDS
    assert RunOptions._fields[:len(listed)] == listed
    alias = next(node for node in tree.body if isinstance(node, ast.Assign)
                 and node.targets[0].id == "Options")
    assert len(alias.value.slice.elts) == len(module.OPTION_FIELDS)
