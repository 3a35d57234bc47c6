"""``mx.gluon.data`` for ``recpipe.mx``: ``DataLoader`` (recpipe's threaded one without MXNet,
MXNet's with it) and ``vision`` (``ImageRecordDataset``, ``transforms``)."""

from ...backend import real_mxnet
from ...coverage import not_covered
from . import vision
from .dataloader import DataLoader as _OwnLoader

__all__ = ["DataLoader", "vision"]


def __getattr__(name):
    if name == "DataLoader":
        mx = real_mxnet()
        return _OwnLoader if mx is None else mx.gluon.data.DataLoader
    raise not_covered("mx.gluon.data", name)
