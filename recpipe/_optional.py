"""Lazy imports of optional dependencies, failing with an install hint, and of recpipe's own C
extensions: the required ones (``native``: ``_resize``, ``_colour``, ``_crc32c``, built wherever
recpipe installs) and the libjpeg one (``extension("_batch")``: None when it was not built)."""

import functools
import importlib
import logging

__all__ = ["extension", "native", "require"]

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
    """recpipe's C extension ``recpipe.<name>``, or None when it was not built (logged once):
    the libjpeg one (``_batch``) is optional; ``recpipe doctor`` probes the required ones so."""
    try:
        return importlib.import_module(f"recpipe.{name}")
    except ImportError as e:
        log.debug("recpipe.%s is not built (%s): using the slower Python/OpenCV path", name, e)
        return None


@functools.lru_cache(maxsize=None)
def native(name):
    """recpipe's required C extension ``recpipe.<name>`` (it needs only a C compiler, and the
    build fails without it); ImportError saying how to build it in a checkout that was not."""
    try:
        return importlib.import_module(f"recpipe.{name}")
    except ImportError as e:
        raise ImportError(f"recpipe.{name} is not built: in a source checkout run `python setup.py "
                          "build_ext --inplace` (needs a C compiler and Python's headers), or "
                          "reinstall recpipe") from e
