"""``mx.io`` without (or with) MXNet: ``ImageRecordIter``, ``ImageRecordUInt8Iter``,
``DataBatch``, ``DataDesc``, ``DataIter``.

The iterators are ``recpipe.mx.record_iter``'s (every ImageRecordIter keyword, MXNet's pixels), and
take ``mx.random.seed``'s seed when they are given no ``seed`` (``recpipe.mx.random``). With MXNet
installed they and the data classes are MXNet's own (NDArrays, ``mx.mod.Module.fit`` takes the
iterator); without it, the data classes of ``recpipe.mx.dataiter`` and numpy arrays with
``.asnumpy()``. Other ``mx.io`` names raise ``NotCoveredError`` saying what to use instead.
"""

from typing import Dict

from .record_iter import iterator_classes
from .backend import mxnet_or_numpy
from .coverage import not_covered
from .random import current_seed

__all__ = ["DataBatch", "DataDesc", "DataIter", "ImageRecordIter", "ImageRecordUInt8Iter"]

_SEEDED: Dict[type, type] = {}


def _seeded(cls):
    """``cls`` taking ``mx.random.seed``'s seed as its ``seed`` when none is given."""
    if cls not in _SEEDED:
        def __init__(self, **kwargs):
            if "seed" not in kwargs and current_seed() is not None:
                kwargs["seed"] = current_seed()
            cls.__init__(self, **kwargs)

        _SEEDED[cls] = type(cls.__name__, (cls,), {
            "__init__": __init__, "__module__": __name__,
            "__doc__": f"{cls.__doc__} Without ``seed=``, ``mx.random.seed``'s seed."})
    return _SEEDED[cls]


def __getattr__(name):
    if name in ("ImageRecordIter", "ImageRecordUInt8Iter"):
        return _seeded(iterator_classes(mxnet_or_numpy())[name])
    if name in ("DataBatch", "DataDesc", "DataIter"):
        return getattr(mxnet_or_numpy().io, name)
    raise not_covered("mx.io", name)
