"""``mx.image.imdecode`` / ``imread`` without MXNet.

The decoded image is a numpy array that also answers ``.asnumpy()`` (MXNet's NDArray idiom),
so ``mx.image.imdecode(buf).asnumpy()`` runs unchanged. Pixels are MXNet 1.9.1's: OpenCV's
``imdecode`` (EXIF orientation applied), then BGR -> RGB when ``to_rgb``; ``flag=0`` gives a
``(H, W, 1)`` grayscale image.

>>> image = recpipe.image.imdecode(jpeg_bytes)       # doctest: +SKIP
>>> image.shape, image.asnumpy().dtype               # doctest: +SKIP
((112, 112, 3), dtype('uint8'))
"""

from typing import Optional, Union

import numpy as np

from ..image.opencv import imdecode as opencv_imdecode
from ..image.opencv import load_cv2

__all__ = ["ImageArray", "imdecode", "imread"]


class ImageArray(np.ndarray):
    """A numpy array with MXNet NDArray's ``asnumpy()`` (a copy, as MXNet returns)."""

    def asnumpy(self) -> np.ndarray:
        """A plain numpy copy of the array, as ``NDArray.asnumpy()`` gives."""
        return np.array(self, copy=True).view(np.ndarray)

    @property
    def context(self):
        """MXNet's device of the array: always the CPU here."""
        return "cpu(0)"

    ctx = context

    def asscalar(self):
        """The value of a one-element array (MXNet's ``asscalar``)."""
        if self.size != 1:
            raise ValueError(f"asscalar needs an array of one element, not shape {self.shape}")
        return self.reshape(()).item()

    def wait_to_read(self):
        """Nothing to wait for: numpy computes eagerly (MXNet's engine is asynchronous)."""

    def as_in_context(self, context):
        """This array, for a host context (``cpu``, ``cpu_pinned``, ``cpu_shared``); a GPU one
        is refused: these arrays live in host memory."""
        if not str(context).startswith("cpu"):
            raise ValueError(f"as_in_context({context}): this array lives in host memory "
                             "(numpy); move it with your framework, e.g. "
                             "torch.from_numpy(array).cuda()")
        return self

    def copyto(self, other):
        """A copy into ``other`` (an array of the same shape) or, for a context, a new array."""
        if isinstance(other, np.ndarray):
            other[...] = self
            return other
        return self.as_in_context(other).copy()


def imdecode(buf: Union[bytes, bytearray, memoryview, np.ndarray], flag: int = 1,
             to_rgb: int = 1, out: Optional[np.ndarray] = None) -> np.ndarray:
    # an ImageArray, or ``out`` itself when given
    """Decode image bytes to an ``(H, W, 3)`` (``flag=1``) or ``(H, W, 1)`` (``flag=0``) uint8
    array, RGB when ``to_rgb`` (MXNet's default) else BGR. ``out`` receives the pixels when
    given (an array of the right shape). Undecodable bytes raise ``DecodeError``."""
    if not isinstance(buf, (bytes, bytearray, memoryview, np.ndarray)):
        raise ValueError("buf must be of type bytes, bytearray or numpy.ndarray, if you would "
                         "like to input type str, please convert to bytes")
    data = np.frombuffer(buf, dtype=np.uint8) if not isinstance(buf, np.ndarray) else \
        np.ascontiguousarray(buf, dtype=np.uint8).reshape(-1)
    pixels = _decode(data, flag, to_rgb)
    if out is not None:
        if out.shape != pixels.shape:
            raise ValueError(f"out has shape {out.shape}, the image is {pixels.shape}")
        out[...] = pixels
        return out
    return pixels.view(ImageArray)


def _decode(data, flag, to_rgb):
    cv2 = load_cv2()
    decoded = opencv_imdecode(data, cv2.IMREAD_COLOR if flag else cv2.IMREAD_GRAYSCALE)
    if not flag:
        return decoded[:, :, None]
    if to_rgb:
        decoded = cv2.cvtColor(decoded, cv2.COLOR_BGR2RGB)
    return decoded


def imread(filename: str, flag: int = 1, to_rgb: int = 1,
           out: Optional[np.ndarray] = None) -> np.ndarray:
    # an ImageArray, or ``out`` itself when given
    """Read and decode an image file (any fsspec URL), like ``mx.image.imread``."""
    import fsspec

    with fsspec.open(str(filename), "rb") as f:
        data = f.read()
    return imdecode(data, flag=flag, to_rgb=to_rgb, out=out)
