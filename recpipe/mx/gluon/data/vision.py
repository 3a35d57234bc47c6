"""``mx.gluon.data.vision``: ``ImageRecordDataset`` (and ``transforms``) for ``recpipe.mx``.

``ImageRecordDataset(filename, flag=1, transform=None)`` is gluon's: ``dataset[i]`` is
``(image, label)`` of record ``i`` in ``.idx`` order, the image decoded as MXNet decodes it
(``(H, W, 3)`` RGB uint8, ``(H, W, 1)`` with ``flag=0``), the label ``header.label`` (a float,
or a float32 array for packed labels); ``transform(image, label)`` is applied when given, and
``transform`` / ``transform_first`` return transformed datasets as gluon's ``Dataset`` does.
Images are NDArrays when MXNet is installed, numpy arrays with ``.asnumpy()`` otherwise.
``transforms`` is MXNet's ``gluon.data.vision.transforms`` (it needs MXNet).
"""

from ...._optional import require
from ....adapters.transformed import Transformable
from ...images import imdecode
from ....io.format.header import unpack_header
from ....io.reader import RecordReader
from ...backend import real_mxnet
from ...coverage import not_covered

__all__ = ["ImageRecordDataset", "transforms"]


class ImageRecordDataset(Transformable):
    """gluon's ``ImageRecordDataset`` over a ``.rec`` (any fsspec URL) and its ``.idx``."""

    eager_list = True  # gluon's transform(fn, lazy=False) gives the samples computed

    def __init__(self, filename, flag=1, transform=None):
        if flag not in (0, 1):
            raise ValueError(f"flag={flag!r}: expected 1 (colour) or 0 (grayscale)")
        self.filename = str(filename)
        self._flag = flag
        self._transform = transform
        self._reader = RecordReader(self.filename)
        self._mx = real_mxnet()

    def __len__(self):
        return len(self._reader)

    def __getitem__(self, index):
        position = int(index)
        payload = self._reader[position]
        header, start = unpack_header(payload, path=self.filename, record=position)
        image = imdecode(memoryview(payload)[start:], self._flag)
        if self._mx is not None:
            image = self._mx.nd.array(image, dtype="uint8")
        if self._transform is not None:
            return self._transform(image, header.label)
        return image, header.label

    def close(self):
        self._reader.close()

    def __repr__(self):
        return f"ImageRecordDataset({self.filename!r}, records={len(self)})"


def __getattr__(name):
    if name == "transforms":  # MXNet's own
        if real_mxnet() is None:
            require("mxnet", "mxnet")
        return real_mxnet().gluon.data.vision.transforms
    raise not_covered("mx.gluon.data.vision", name)
