"""Images as bytes and pixels, below the record layers: MXNet's ``mx.image`` API (``imdecode``,
``imread``, ``ImageArray``: ``import recpipe as mx; mx.image.imdecode(buf)``, in ``mximage``),
the JPEG marker walker (``jpeg``), cheap header facts of any image file (``info``), lossless
restart markers in JPEG bytes (``restart``) and OpenCV loaded in one place with the one
``imdecode`` that raises ``DecodeError`` (``opencv``).
Nothing here imports the record, decode or packing layers."""

from ..errors import NotCoveredError
from .mximage import ImageArray, imdecode, imread

__all__ = ["ImageArray", "imdecode", "imread"]


def __getattr__(name):
    # ``mx.image.<name>`` (``import recpipe.mx as mx`` / ``import recpipe as mx``) that is not here
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    raise NotCoveredError(
        f"mx.image.{name} is not in recpipe: mx.image here decodes (imdecode, imread; "
        "ImageArray: numpy arrays with .asnumpy()); augment in the iterator instead: "
        "mx.io.ImageRecordIter's keywords (resize=, rand_crop=, random_resized_crop=, "
        "rand_mirror=, brightness=, mean_r=, ...) or recpipe.torch's loaders, which take the "
        "same keywords. recpipe.mx (import recpipe.mx as mx) serves the rest of MXNet's data "
        "side: mx.io, mx.gluon.data, mx.nd array construction, contexts, mx.random.seed")
