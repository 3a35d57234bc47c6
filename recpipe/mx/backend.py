"""Which ``mxnet`` the ``recpipe.mx`` modules build on: the real one when it is installed and
imports, else ``recpipe.mx.dataiter.NUMPY_BACKEND`` (numpy arrays with ``.asnumpy()``)."""

import functools
import importlib
import importlib.util
import logging
import warnings

from .dataiter import NUMPY_BACKEND

__all__ = ["mxnet_or_numpy", "real_mxnet"]

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=None)
def real_mxnet():
    """The ``mxnet`` module, or None when it is not installed or does not import (MXNet 1.9.1
    does not import beside NumPy >= 1.24: a warning says so)."""
    if importlib.util.find_spec("mxnet") is None:
        return None
    try:
        return importlib.import_module("mxnet")
    except Exception as exc:  # noqa: BLE001 - a broken install raises anything
        warnings.warn(f"mxnet is installed but does not import ({type(exc).__name__}: {exc}); "
                      "recpipe.mx serves numpy arrays instead of NDArrays", RuntimeWarning,
                      stacklevel=4)
        return None


def mxnet_or_numpy():
    """The real ``mxnet`` module when there is one, else the numpy stand-in."""
    mx = real_mxnet()
    return NUMPY_BACKEND if mx is None else mx
