"""Images as bytes and pixels, below the record layers: MXNet's ``mx.image`` API (``imdecode``,
``imread``, ``ImageArray``: ``import recpipe as mx; mx.image.imdecode(buf)``, in ``mximage``),
the JPEG marker walker (``jpeg``), cheap header facts of any image file (``info``) and OpenCV
loaded in one place with the one ``imdecode`` that raises ``DecodeError`` (``opencv``).
Nothing here imports the record, decode or packing layers."""

from .mximage import ImageArray, imdecode, imread

__all__ = ["ImageArray", "imdecode", "imread"]
