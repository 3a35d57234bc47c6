"""Old import paths of modules that moved, kept for the programs that use them.

``MOVED`` maps each old dotted name to the module's home now (``PACKAGES_MOVED``: a package and
everything under it). Importing an old name gives that very module, bound in ``sys.modules``
under both names (one module object: names and patches are shared), not a copy; recpipe itself
never imports an old name (tests/test_layers.py). ``recpipe.io.format`` and ``recpipe.io.remote``
were modules and are now wings: their faces hand on the names the modules had.
"""

import importlib
import importlib.abc
import importlib.util
import sys
from typing import Dict

__all__ = ["MOVED", "PACKAGES_MOVED", "install", "new_name"]

MOVED: Dict[str, str] = {
    "recpipe.host": "recpipe.system.host",
    "recpipe.env": "recpipe.system.env",
    "recpipe.distributed": "recpipe.system.distributed",
    "recpipe.mxnet": "recpipe.mx.record_iter",
    "recpipe.mxnet_keywords": "recpipe.mx.keywords",
    "recpipe.recordio": "recpipe.mx.recordio",
    "recpipe.image.mximage": "recpipe.mx.images",
    "recpipe.packing.im2rec": "recpipe.mx.im2rec",
    "recpipe.plan": "recpipe.capacity",
    "recpipe.decode.autotune": "recpipe.decode.tune.controller",
    "recpipe.decode.tuning_window": "recpipe.decode.tune.tuner",
    **{f"recpipe.io.{name}": f"recpipe.io.format.{name}"
       for name in ("header", "layout", "scan", "sniff")},
    **{f"recpipe.io.{name}": f"recpipe.io.sidecars.{name}"
       for name in ("crc32c", "index", "index_cache", "index_table", "label_map", "quarantine",
                    "rebuild", "record_sources", "sums")},
    **{f"recpipe.io.{name}": f"recpipe.io.remote.{name}"
       for name in ("buffers", "cache", "coalesce", "gcs", "hdfs", "prefetch", "readahead",
                    "retry")},
    "recpipe.io.remote_options": "recpipe.io.remote.options",
    **{f"recpipe.io.{name}": f"recpipe.io.health.{name}"
       for name in ("contents", "explain", "integrity_check", "protection", "verify")},
}
PACKAGES_MOVED: Dict[str, str] = {"recpipe.io.ranges": "recpipe.io.remote.ranges"}


def new_name(name: str):
    """Where the module once imported as ``name`` is now, or None when it did not move."""
    if name in MOVED:
        return MOVED[name]
    for old, new in PACKAGES_MOVED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old):]
    return None


class _Alias(importlib.abc.Loader):
    """Loads an old name as the module it names now."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._spec = None

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module) -> None:
        # the import system gave the module the old name's spec: it keeps its own
        module.__spec__ = self._spec


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        new = new_name(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _Alias(new))


def install() -> None:
    """Serve the old names (once per process; ``recpipe`` does it on import). First on the
    path, so that a submodule of a moved package is never found a second time by its old name."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
