"""``import recpipe.mx as mx``: MXNet's data modules laid out as MXNet lays them out.

``mx.recordio`` (``MXRecordIO``, ``MXIndexedRecordIO``, ``pack``/``unpack``...), ``mx.image`` /
``mx.img`` (``imdecode``, ``imread``), ``mx.io`` (``ImageRecordIter``,
``ImageRecordUInt8Iter``, ``DataBatch``, ``DataDesc``, ``DataIter``) and
``mx.gluon.data.vision`` (``ImageRecordDataset``, ``transforms``), so a script that uses MXNet
only for its data changes one line: ``import mxnet as mx`` -> ``import recpipe.mx as mx``.

With MXNet installed, ``mx.io`` batches hold real NDArrays and ``mx.io.DataBatch`` is MXNet's;
without it, they hold numpy arrays that answer ``.asnumpy()`` (``recpipe.mx.dataiter``).
Submodules are imported on first use. (``import recpipe as mx`` still serves ``recordio`` and
``image``.)
"""

import importlib

__all__ = ["gluon", "image", "img", "io", "recordio"]

_SUBMODULES = {"recordio": "recpipe.recordio", "image": "recpipe.image", "img": "recpipe.image",
               "io": "recpipe.mx.io", "gluon": "recpipe.mx.gluon"}


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(_SUBMODULES[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_SUBMODULES))
