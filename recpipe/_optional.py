"""Lazy imports of optional dependencies, failing with an install hint, and of recpipe's own
optional C extensions, None when they were not built."""

import functools
import importlib
import logging

__all__ = ["require", "extension"]

log = logging.getLogger(__name__)


def require(module, extra):
    """Import ``module`` or raise ImportError telling which recpipe extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f"{module} is needed for this feature: pip install 'recpipe[{extra}]'") from e


@functools.lru_cache(maxsize=None)
def extension(name):
    """recpipe's C extension ``recpipe.<name>``, or None when it was not built (logged once)."""
    try:
        return importlib.import_module(f"recpipe.{name}")
    except ImportError as e:
        log.debug("recpipe.%s is not built (%s): using the slower Python/OpenCV path", name, e)
        return None
