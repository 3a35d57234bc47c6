"""``import recpipe.mx as mx``: MXNet's data side laid out as MXNet lays it out.

What a script that uses MXNet for its data touches works with one line changed (``import mxnet
as mx`` -> ``import recpipe.mx as mx``):

- ``mx.recordio`` (``MXRecordIO``, ``MXIndexedRecordIO``, ``pack``/``unpack``...), ``mx.image``
  / ``mx.img`` (``imdecode``, ``imread``);
- ``mx.io`` (``ImageRecordIter``, ``ImageRecordUInt8Iter``, ``DataBatch``, ``DataDesc``,
  ``DataIter``) and ``mx.gluon.data`` (``DataLoader``, ``vision.ImageRecordDataset``,
  ``vision.transforms``);
- contexts (``mx.cpu()``, ``mx.gpu(0)``, ``mx.cpu_pinned()``, ``mx.Context``,
  ``mx.context.num_gpus()``, ``mx.current_context()``);
- ``mx.nd`` / ``mx.ndarray`` array construction (``array``, ``empty``, ``zeros``, ``ones``,
  ``full``, ``arange``, ``from_numpy``): numpy arrays with ``.asnumpy()``;
- ``mx.random.seed``, which recpipe's loaders made after it honour, and ``uniform``/``normal``/
  ``randint``; ``mx.kvstore.create`` for the rank and worker count that shard the data.

Every other name raises ``recpipe.errors.NotCoveredError`` (an AttributeError) saying what
recpipe.mx covers and what to do instead (``recpipe.mx.coverage``). With MXNet installed,
batches hold real NDArrays, ``mx.io.DataBatch`` is MXNet's, and the contexts, ``mx.nd``,
``mx.kvstore``, the ``DataLoader`` and the random draws are MXNet's own; ``mx.random.seed`` then
seeds MXNet and recpipe's loaders both. Submodules are imported on first use. ``import recpipe
as mx`` serves ``recordio`` and ``image`` the same way, and points at ``recpipe.mx`` for the rest.
"""

import importlib

__all__ = ["Context", "MXNetError", "base", "context", "cpu", "cpu_pinned", "current_context",
           "gluon", "gpu", "image", "img", "io", "kv", "kvstore", "nd", "ndarray", "num_gpus",
           "random", "recordio", "rnd"]

_SUBMODULES = {"recordio": "recpipe.mx.recordio", "image": "recpipe.image", "img": "recpipe.image",
               "io": "recpipe.mx.io", "gluon": "recpipe.mx.gluon", "random": "recpipe.mx.random",
               "rnd": "recpipe.mx.random"}
# served by MXNet when it is installed, else by recpipe.mx's own module
_MXNET_FIRST = {"nd": ("nd", "recpipe.mx.arrays"), "ndarray": ("nd", "recpipe.mx.arrays"),
                "context": ("context", "recpipe.mx.devices"),
                "kvstore": ("kvstore", "recpipe.mx.kvstores"),
                "kv": ("kvstore", "recpipe.mx.kvstores")}
_CONTEXT_NAMES = ("Context", "cpu", "gpu", "cpu_pinned", "num_gpus", "current_context")


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(_SUBMODULES[name])
    if name in ("base", "MXNetError"):  # what `except mx.base.MXNetError:` names
        from .backend import mxnet_or_numpy

        base = mxnet_or_numpy().base
        return base if name == "base" else base.MXNetError
    if name in _MXNET_FIRST or name in _CONTEXT_NAMES:
        from .backend import real_mxnet

        mx = real_mxnet()
        if name in _CONTEXT_NAMES:
            return getattr(mx.context if mx is not None else
                           importlib.import_module("recpipe.mx.devices"), name)
        real, own = _MXNET_FIRST[name]
        return getattr(mx, real) if mx is not None else importlib.import_module(own)
    from .coverage import not_covered

    raise not_covered("mx", name)


def __dir__():
    return sorted(set(globals()) | set(__all__))
