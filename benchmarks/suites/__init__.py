"""One module per topic; each registers its ``Suite`` with ``harness.suite``. ``ORDER`` is the
order of ``python -m benchmarks`` and of BENCHMARKS.md."""

import importlib

from ..harness import SUITES

__all__ = ["ORDER", "load", "load_all"]

ORDER = ["decode", "peers", "faces", "restart", "decoders", "kernels", "index", "order", "pack",
         "integrity", "stores", "autotune", "provenance", "capacity", "wheel", "view",
         "wholefile", "layers"]


def load(name):
    """The ``Suite`` class of suite ``name`` (its module imported on first use)."""
    if name not in SUITES:
        if name not in ORDER:
            raise KeyError(f"no suite {name!r}: choose from {', '.join(ORDER)}")
        importlib.import_module(f"{__name__}.{name}")
    return SUITES[name]


def load_all():
    return [load(name) for name in ORDER]
