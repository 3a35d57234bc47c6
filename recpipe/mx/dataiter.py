"""MXNet's ``mx.io`` data classes without MXNet: ``DataDesc``, ``DataBatch``, ``DataIter``.

They hold what MXNet's hold, under the same names, so a training loop written for
``mx.io.ImageRecordIter`` batches (``batch.data[0].asnumpy()``, ``batch.label[0]``,
``batch.pad``, ``it.provide_data``, ``it.reset()``) runs without MXNet. Arrays are
``recpipe.image.ImageArray``: numpy arrays that answer ``.asnumpy()``. ``NUMPY_BACKEND`` is
the stand-in for the ``mxnet`` module that ``recpipe.mx.record_iter`` builds its iterators on when
MXNet is not installed.
"""

from types import SimpleNamespace
from typing import NamedTuple, Tuple

import numpy as np

from .._optional import require
from .images import ImageArray

__all__ = ["DataBatch", "DataDesc", "DataIter", "NUMPY_BACKEND", "from_numpy"]


class DataDesc(NamedTuple):
    """Name, shape, dtype and layout of an input (``mx.io.DataDesc``)."""

    name: str
    shape: Tuple[int, ...]
    dtype: type = np.float32
    layout: str = "NCHW"


class DataBatch:
    """One batch (``mx.io.DataBatch``): ``data`` and ``label`` lists of arrays, ``pad``
    filler samples at the end, ``index`` record positions."""

    def __init__(self, data, label=None, pad=None, index=None, bucket_key=None,
                 provide_data=None, provide_label=None):
        self.data = data
        self.label = label
        self.pad = pad
        self.index = index
        self.bucket_key = bucket_key
        self.provide_data = provide_data
        self.provide_label = provide_label

    def __repr__(self):
        shapes = [tuple(d.shape) for d in self.data or ()]
        labels = [tuple(lab.shape) for lab in self.label or ()]
        return f"DataBatch: data shapes: {shapes} label shapes: {labels}"


class DataIter:
    """Base of data iterators (``mx.io.DataIter``): ``next()`` from ``iter_next`` and the
    ``get*`` methods, iteration protocol, ``reset``."""

    def __init__(self, batch_size=0):
        self.batch_size = batch_size

    def __iter__(self):
        return self

    def reset(self):
        pass

    def next(self):
        if self.iter_next():
            return DataBatch(data=self.getdata(), label=self.getlabel(), pad=self.getpad(),
                             index=self.getindex())
        raise StopIteration

    def __next__(self):
        return self.next()

    def iter_next(self):
        return False

    def getdata(self):
        return None

    def getlabel(self):
        return None

    def getindex(self):
        return None

    def getpad(self):
        return None


def from_numpy(array, zero_copy=True):
    """``array`` as an ``ImageArray`` (shared memory, as ``mx.nd.from_numpy(zero_copy=True)``)."""
    return np.ascontiguousarray(array).view(ImageArray)


def _mxnet_file(*args, **kwargs):
    require("mxnet", "mxnet")  # MXNet's .nd file format (mean_img) needs MXNet itself


class _NoMXNetError(Exception):
    """Stands in for ``mxnet.base.MXNetError`` when MXNet is absent (never raised alone)."""


NUMPY_BACKEND = SimpleNamespace(
    io=SimpleNamespace(DataBatch=DataBatch, DataDesc=DataDesc, DataIter=DataIter),
    nd=SimpleNamespace(from_numpy=from_numpy, load=_mxnet_file, save=_mxnet_file,
                       array=np.asarray),
    context=SimpleNamespace(num_gpus=lambda: 0),
    base=SimpleNamespace(MXNetError=_NoMXNetError),
    cpu_pinned=None,
)


