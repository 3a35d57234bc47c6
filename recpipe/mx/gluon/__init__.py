"""``mx.gluon`` for ``recpipe.mx``: its ``data`` part (``DataLoader``, ``vision``); the rest of
gluon (``nn``, ``Trainer``, ``loss``...) is training, MXNet's own, and raises saying so."""

from ..coverage import not_covered
from . import data

__all__ = ["data"]


def __getattr__(name):
    raise not_covered("mx.gluon", name)
