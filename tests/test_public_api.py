"""The public names: ``from recpipe import *`` gives exactly ``__all__``, and every name
resolves."""

import importlib
import pkgutil

import pytest

import recpipe

PACKAGES = ["recpipe", "recpipe.io"]


def star_import(module_name):
    namespace = {}
    exec(f"from {module_name} import *", namespace)
    namespace.pop("__builtins__")
    return namespace


@pytest.mark.parametrize("module_name", PACKAGES)
def test_star_import_is_exactly_all(module_name):
    module = importlib.import_module(module_name)
    assert all(isinstance(name, str) for name in module.__all__)
    assert len(set(module.__all__)) == len(module.__all__), "duplicate names in __all__"
    assert set(star_import(module_name)) == set(module.__all__)


@pytest.mark.parametrize("module_name", PACKAGES)
def test_every_name_resolves(module_name):
    module = importlib.import_module(module_name)
    for name in module.__all__:
        assert getattr(module, name) is not None, name


def test_core_api_is_exported():
    expected = {"RecordReader", "RecordWriter", "IRHeader", "pack", "unpack", "pack_img",
                "unpack_img", "RecordFormatError", "RecordTooLargeError", "DecodeError"}
    assert expected <= set(recpipe.__all__)
    assert issubclass(recpipe.RecordFormatError, ValueError)
    assert recpipe.RecordReader is recpipe.io.RecordReader


def core_modules():
    """The RecordIO core's modules (other packages are checked by their own tests)."""
    import recpipe.io

    names = ["recpipe", "recpipe.errors", "recpipe._optional", "recpipe.cli.inspect"]
    names += [info.name for info in pkgutil.walk_packages(recpipe.io.__path__, "recpipe.io.")]
    return names


@pytest.mark.parametrize("module_name", core_modules())
def test_every_core_module_declares_all_and_its_names_resolve(module_name):
    module = importlib.import_module(module_name)
    assert hasattr(module, "__all__"), f"{module_name} has no __all__"
    assert len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        assert hasattr(module, name), f"{module_name}.__all__ lists missing {name!r}"


def test_public_functions_are_not_shadowed_by_subpackages():
    for info in pkgutil.iter_modules(recpipe.__path__, "recpipe."):
        if info.ispkg:
            importlib.import_module(info.name)
    for name in recpipe.__all__:
        value = getattr(recpipe, name)
        assert not isinstance(value, type(recpipe)), f"recpipe.{name} is now a module"


@pytest.mark.parametrize("module_name", PACKAGES + ["recpipe.mx.recordio", "recpipe.image",
                                                    "recpipe.system.host", "recpipe.torch",
                                                    "recpipe.mx", "recpipe.mx.dataiter"])
def test_public_names_are_sorted_and_importable(module_name):
    """As torchdata checks its ``__all__``: sorted, and each name importable by ``from``."""
    module = importlib.import_module(module_name)
    assert list(module.__all__) == sorted(module.__all__), f"{module_name}.__all__ is not sorted"
    for name in module.__all__:
        exec(f"from {module_name} import {name}", {})


@pytest.mark.parametrize("old, new", [("recpipe.system.host", "recpipe.system.host"),
                                      ("recpipe.system.env", "recpipe.system.env"),
                                      ("recpipe.system.distributed", "recpipe.system.distributed")])
def test_a_moved_module_keeps_its_old_path_as_the_same_module(old, new):
    """A moved module's old path is an alias of the module itself (names and patches shared)."""
    assert importlib.import_module(old) is importlib.import_module(new)
    assert getattr(importlib.import_module(old.rsplit(".", 1)[0]), old.rsplit(".", 1)[1]) \
        is importlib.import_module(new)


def test_mxnet_style_submodules_are_package_attributes():
    import recpipe as mx

    assert mx.recordio.MXIndexedRecordIO and mx.image.imdecode and mx.img is mx.image
    assert callable(mx.recordio.unpack) and mx.recordio.IRHeader is recpipe.IRHeader


def test_the_package_is_typed():
    import pathlib

    root = pathlib.Path(recpipe.__file__).parent
    assert (root / "py.typed").exists()
    for extension in ("_batch", "_kernels", "_resize", "_colour", "_crc32c", "_plan"):
        assert (root / f"{extension}.pyi").exists(), extension


def test_install_hints_name_extras_that_exist():
    """Every ``require(module, extra)`` in the package names an extra of pyproject.toml."""
    import pathlib
    import re
    import tomllib

    root = pathlib.Path(recpipe.__file__).parent
    extras = set(tomllib.loads((root.parent / "pyproject.toml").read_text())["project"]
                 ["optional-dependencies"])
    named = set()
    for path in root.rglob("*.py"):
        named |= set(re.findall(r'require\("[\w.]+", "([\w-]+)"\)', path.read_text()))
    assert named and named <= extras, named - extras

