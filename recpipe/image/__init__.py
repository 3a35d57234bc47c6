"""Images as bytes and pixels, below the record layers: the JPEG marker walker (``jpeg``), cheap
header facts of any image file (``info``), lossless restart markers in JPEG bytes (``restart``)
and OpenCV loaded in one place with the one ``imdecode`` that raises ``DecodeError``
(``opencv``). Nothing in those modules imports the record, decode or packing layers.

This package is also ``mx.image`` for ``import recpipe as mx`` (and ``import recpipe.mx as mx``):
``imdecode``, ``imread`` and ``ImageArray`` are ``recpipe.mx.images``' (MXNet's image API lives
with the rest of MXNet's, in ``recpipe.mx``); any other ``mx.image`` name raises
``NotCoveredError`` saying what to do instead."""

__all__ = ["ImageArray", "imdecode", "imread"]

_MXNET_IMAGE = frozenset(__all__)


def __getattr__(name):
    if name in _MXNET_IMAGE:
        from ..mx import images

        return getattr(images, name)
    from ..mx.coverage import not_covered

    raise not_covered("mx.image", name)
