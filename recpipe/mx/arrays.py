"""``mx.nd`` / ``mx.ndarray`` without MXNet (this module): array construction, backed by numpy.

``array``, ``empty``, ``zeros``, ``ones``, ``full``, ``arange`` and ``from_numpy`` make
``NDArray``s: numpy arrays (``recpipe.image.ImageArray``, the class of ``mx.image.imdecode``'s
results and of ``mx.io`` batches without MXNet) that also answer MXNet's ``asnumpy()``,
``asscalar()``, ``wait_to_read()``, ``as_in_context()``, ``copyto()`` and ``context``. The dtype
default is float32, as MXNet's (``array`` keeps a numpy array's own dtype, as MXNet does).
Arrays live in host memory: a GPU ``ctx`` raises ValueError (``recpipe.mx.devices``).
Operators (``nd.transpose``, ``nd.flip``, ``nd.stack``...) are not served: these are numpy
arrays, so numpy's functions apply; the error says so. With MXNet installed, ``mx.nd``
is MXNet's own.
"""

import numpy as np

from .._optional import require
from .images import ImageArray
from .devices import host_only
from .coverage import not_covered

__all__ = ["NDArray", "arange", "array", "empty", "from_numpy", "full", "load", "ones", "save",
           "waitall", "zeros"]

NDArray = ImageArray


def _made(values, ctx, what):
    host_only(ctx, what)
    return np.ascontiguousarray(values).view(NDArray)


def array(source_array, ctx=None, dtype=None):
    """A copy of ``source_array`` (a list, numpy array or NDArray); float32 unless ``dtype``
    or the numpy array's own dtype says otherwise (MXNet's rule)."""
    if dtype is None:
        dtype = source_array.dtype if isinstance(source_array, np.ndarray) else np.float32
    return _made(np.array(source_array, dtype=dtype, copy=True), ctx, "nd.array")


def empty(shape, ctx=None, dtype=None):
    return _made(np.empty(shape, dtype=dtype or np.float32), ctx, "nd.empty")


def zeros(shape, ctx=None, dtype=None, **kwargs):
    return _made(np.zeros(shape, dtype=dtype or np.float32), ctx, "nd.zeros")


def ones(shape, ctx=None, dtype=None, **kwargs):
    return _made(np.ones(shape, dtype=dtype or np.float32), ctx, "nd.ones")


def full(shape, val, ctx=None, dtype=np.float32, out=None):
    if out is not None:
        out[...] = val
        return out
    return _made(np.full(shape, val, dtype=dtype or np.float32), ctx, "nd.full")


def arange(start, stop=None, step=1.0, repeat=1, infer_range=None, ctx=None,
           dtype=np.float32):
    values = np.arange(start, stop, step, dtype=dtype or np.float32)
    return _made(np.repeat(values, repeat) if repeat != 1 else values, ctx, "nd.arange")


def from_numpy(ndarray, zero_copy=True):
    """``ndarray`` as an NDArray, sharing its memory when it is contiguous."""
    return np.ascontiguousarray(ndarray).view(NDArray)


def waitall():
    """Nothing to wait for: numpy computes eagerly."""


def load(fname):
    require("mxnet", "mxnet")  # MXNet's .nd/.params file format needs MXNet itself


def save(fname, data):
    require("mxnet", "mxnet")


def __getattr__(name):
    raise not_covered("mx.nd", name)
