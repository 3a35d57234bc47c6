"""Lazy imports of optional dependencies, failing with an install hint."""

import importlib

__all__ = ["require"]


def require(module, extra):
    """Import ``module`` or raise ImportError telling which recpipe extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f"{module} is needed for this feature: pip install 'recpipe[{extra}]'") from e
