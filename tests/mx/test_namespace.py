"""``import recpipe.mx as mx`` without MXNet: MXNet's data modules, numpy arrays with
``.asnumpy()`` (the same namespace with the real mxnet: tests/mxnet/test_mx_namespace.py)."""

import importlib.util

import cv2
import numpy as np
import pytest

import recpipe
import recpipe.mx as mx
from recpipe.decode.loader import ImageLoader
from recpipe.io import IRHeader, pack

N_IMAGES = 11

if importlib.util.find_spec("mxnet") is not None:
    pytest.skip("mxnet is importable here: tests/mxnet covers recpipe.mx with it",
                allow_module_level=True)


def _jpeg(i):
    h, w = 20 + i, 30 - i
    ys, xs = np.mgrid[0:h, 0:w]
    image = np.stack([(xs * 7 + i * 11) % 256, (ys * 5) % 256, np.full((h, w), i * 20)], -1)
    return cv2.imencode(".jpg", image.astype(np.uint8), [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("mx") / "small.rec")
    with recpipe.RecordWriter(url) as writer:
        for i in range(N_IMAGES):
            writer.write(pack(IRHeader(0, float(i % 4), i, 0), _jpeg(i)))
    return url


def test_the_namespace_is_laid_out_like_mxnets():
    assert mx.recordio is recpipe.mx.recordio and mx.image is mx.img is recpipe.image
    assert mx.recordio.MXIndexedRecordIO and mx.image.imdecode
    assert {"ImageRecordIter", "ImageRecordUInt8Iter", "DataBatch", "DataDesc",
            "DataIter"} <= set(mx.io.__all__)
    assert mx.gluon.data.vision.ImageRecordDataset
    with pytest.raises(ImportError, match=r"recpipe\[mxnet\]"):
        mx.gluon.data.vision.transforms  # noqa: B018 - MXNet's own transforms need MXNet
    import recpipe as mx_too  # the older one-line migration keeps working

    assert mx_too.recordio is mx.recordio and mx_too.img is mx.img


def test_image_record_iter_yields_batches_of_arrays_with_asnumpy(rec):
    it = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=4,
                               preprocess_threads=2)
    with it, ImageLoader(rec, 4, (3, 16, 16), dtype="float32", threads=2) as loader:
        expected = list(loader)
        batches = list(it)
        assert isinstance(it, mx.io.DataIter) and len(batches) == 3
        for batch, (images, labels) in zip(batches, expected):
            assert isinstance(batch, mx.io.DataBatch)
            data, label = batch.data[0].asnumpy(), batch.label[0].asnumpy()
            assert type(data) is np.ndarray and data.dtype == np.float32
            assert np.array_equal(data, images) and np.array_equal(label, labels)
        assert batches[-1].pad == 1 and batches[0].pad == 0
        assert it.provide_data == [mx.io.DataDesc("data", (4, 3, 16, 16), np.float32, "NCHW")]
        assert it.provide_label[0].name == "softmax_label"
        it.reset()
        assert np.array_equal(it.next().label[0].asnumpy(), [0, 1, 2, 3])
        assert it.iter_next() and it.getpad() == 0 and it.getdata()[0].shape == (4, 3, 16, 16)


def test_image_record_iter_argument_errors_stay_value_errors(rec):
    with pytest.raises(ValueError, match="batch_size"):
        mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 16, 16))
    with pytest.raises(ImportError, match=r"recpipe\[mxnet\]"):  # MXNet's .nd file format
        mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=4,
                              mean_img=str(rec) + ".mean.nd")


def test_gluon_image_record_dataset_is_glouns(rec):
    dataset = mx.gluon.data.vision.ImageRecordDataset(rec)
    assert len(dataset) == N_IMAGES
    image, label = dataset[5]
    assert np.array_equal(image.asnumpy(), mx.image.imdecode(_jpeg(5)).asnumpy())
    assert image.shape == (25, 25, 3) and label == 1.0
    gray, _ = mx.gluon.data.vision.ImageRecordDataset(rec, flag=0)[5]
    assert gray.shape == (25, 25, 1)
    firsts = dataset.transform_first(lambda img: img.shape)
    assert firsts[5] == ((25, 25, 3), 1.0)
    both = mx.gluon.data.vision.ImageRecordDataset(rec, transform=lambda img, lab: lab * 2)
    assert both[3] == 6.0
    assert dataset.transform(lambda img, lab: lab, lazy=False) == [float(i % 4) for i in
                                                                   range(N_IMAGES)]
    dataset.close()
