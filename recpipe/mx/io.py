"""``mx.io`` without (or with) MXNet: ``ImageRecordIter``, ``ImageRecordUInt8Iter``,
``DataBatch``, ``DataDesc``, ``DataIter``.

The iterators are ``recpipe.mxnet``'s (every ImageRecordIter keyword, MXNet's pixels). With MXNet
installed they and the data classes are MXNet's own (NDArrays, ``mx.mod.Module.fit`` takes the
iterator); without it, the data classes of ``recpipe.mx.dataiter`` and numpy arrays with
``.asnumpy()``.
"""

from ..mxnet import iterator_classes
from .backend import mxnet_or_numpy

__all__ = ["DataBatch", "DataDesc", "DataIter", "ImageRecordIter", "ImageRecordUInt8Iter"]


def __getattr__(name):
    if name in ("ImageRecordIter", "ImageRecordUInt8Iter"):
        return iterator_classes(mxnet_or_numpy())[name]
    if name in ("DataBatch", "DataDesc", "DataIter"):
        return getattr(mxnet_or_numpy().io, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
