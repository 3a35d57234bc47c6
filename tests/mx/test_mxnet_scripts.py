"""``import recpipe.mx as mx`` running the data side of MXNet's own example scripts and of
InsightFace's recognition loaders, written as those scripts write it (only the import line
changed): apache/mxnet example/image-classification/common/data.py (get_rec_iter,
SyntheticDataIter) and common/fit.py (the kvstore's rank, the --test-io loop, the contexts),
example/gluon/data.py (DummyIter; ImageRecordDataset + DataLoader), InsightFace's
recognition/ArcFace/image_iter.py (FaceImageIter's record walk and batch assembly) and
arcface_torch's MXFaceDataset. What recpipe.mx does not serve raises NotCoveredError saying
what to do instead. (With the real MXNet: tests/mxnet/test_mx_namespace.py.)"""

import importlib.util
import numbers
import threading
import warnings

import cv2
import numpy as np
import pytest

import recpipe
import recpipe.mx as mx
import recpipe.mx.random as mx_random
from recpipe.decode.augment.effect import NoEffectWarning
from recpipe.errors import NotCoveredError
from recpipe.io import IRHeader, pack

from ..test_face_layout import write_faces

if importlib.util.find_spec("mxnet") is not None:
    pytest.skip("mxnet is importable here: tests/mxnet covers recpipe.mx with it",
                allow_module_level=True)

N_IMAGES = 10


def _jpeg(i, h=40, w=48):
    ys, xs = np.mgrid[0:h, 0:w]
    image = np.stack([(xs * 5 + i * 17) % 256, (ys * 3 + i * 7) % 256, np.full((h, w), i * 23)],
                     -1).astype(np.uint8)
    return cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("scripts") / "train.rec")
    with recpipe.RecordWriter(url) as writer:
        for i in range(N_IMAGES):
            writer.write(pack(IRHeader(0, float(i % 3), i, 0), _jpeg(i)))
    return url


@pytest.fixture(autouse=True)
def unseeded(monkeypatch):
    """mx.random.seed is process-wide: each test starts without one and leaves none behind."""
    monkeypatch.setattr(mx_random, "_state", {"seed": None,
                                              "generator": np.random.default_rng()})


class Args:
    """argparse's namespace, as the scripts' parsers fill it."""

    def __init__(self, **values):
        self.__dict__.update(values)


# -- example/image-classification/common/data.py ------------------------------------------------

class SyntheticDataIter(mx.io.DataIter):  # data.py's class, verbatim but for the import
    def __init__(self, num_classes, data_shape, max_iter, dtype):
        self.batch_size = data_shape[0]
        self.cur_iter = 0
        self.max_iter = max_iter
        self.dtype = dtype
        label = np.random.randint(0, num_classes, [self.batch_size, ])
        data = np.random.uniform(-1, 1, data_shape)
        self.data = mx.nd.array(data, dtype=self.dtype, ctx=mx.Context('cpu_pinned', 0))
        self.label = mx.nd.array(label, dtype=self.dtype, ctx=mx.Context('cpu_pinned', 0))

    def __iter__(self):
        return self

    @property
    def provide_data(self):
        return [mx.io.DataDesc('data', self.data.shape, self.dtype)]

    @property
    def provide_label(self):
        return [mx.io.DataDesc('softmax_label', (self.batch_size,), self.dtype)]

    def next(self):
        self.cur_iter += 1
        if self.cur_iter <= self.max_iter:
            return mx.io.DataBatch(data=(self.data,), label=(self.label,), pad=0, index=None,
                                   provide_data=self.provide_data,
                                   provide_label=self.provide_label)
        raise StopIteration

    def __next__(self):
        return self.next()

    def reset(self):
        self.cur_iter = 0


def get_rec_iter(args, kv=None):  # data.py's, the ImageRecordIter branch
    image_shape = tuple([int(part) for part in args.image_shape.split(',')])
    if kv:
        (rank, nworker) = (kv.rank, kv.num_workers)
    else:
        (rank, nworker) = (0, 1)
    rgb_mean = np.array([float(i) for i in args.rgb_mean.split(',')])
    gpu_devs = None
    if args.use_gpu_augmenter:
        gpu_devs = [mx.gpu(int(i)) for i in args.gpus.split(',')]
    train = mx.io.ImageRecordIter(
        path_imgrec=args.data_train, path_imgidx=args.data_train_idx, label_width=1,
        mean_r=rgb_mean[0], mean_g=rgb_mean[1], mean_b=rgb_mean[2], data_name='data',
        label_name='softmax_label', data_shape=image_shape, batch_size=args.batch_size,
        rand_crop=args.random_crop, max_random_scale=args.max_random_scale, pad=args.pad_size,
        fill_value=127, min_random_scale=args.min_random_scale,
        max_aspect_ratio=args.max_random_aspect_ratio, random_h=args.max_random_h,
        random_s=args.max_random_s, random_l=args.max_random_l,
        max_rotate_angle=args.max_random_rotate_angle,
        max_shear_ratio=args.max_random_shear_ratio, rand_mirror=args.random_mirror,
        preprocess_threads=args.data_nthreads, shuffle=True, num_parts=nworker,
        part_index=rank)
    val = mx.io.ImageRecordIter(
        path_imgrec=args.data_val, path_imgidx=args.data_val_idx, label_width=1,
        mean_r=rgb_mean[0], mean_g=rgb_mean[1], mean_b=rgb_mean[2], data_name='data',
        label_name='softmax_label', batch_size=args.batch_size, data_shape=image_shape,
        preprocess_threads=args.data_nthreads, rand_crop=False, rand_mirror=False,
        round_batch=False, num_parts=nworker, part_index=rank)
    return (train, val), gpu_devs


def _data_args(rec, **changes):
    values = dict(image_shape="3,24,24", rgb_mean="123.68,116.779,103.939", batch_size=4,
                  data_train=rec, data_train_idx=rec[:-4] + ".idx", data_val=rec,
                  data_val_idx="", random_crop=1, random_mirror=1, max_random_scale=1,
                  min_random_scale=1, pad_size=0, max_random_aspect_ratio=0, max_random_h=36,
                  max_random_s=50, max_random_l=50, max_random_rotate_angle=10,
                  max_random_shear_ratio=0.1, data_nthreads=2, use_gpu_augmenter=1,
                  gpus="0,1", kv_store="device", disp_batches=2, test_io=1)
    values.update(changes)
    return Args(**values)


def test_image_classification_synthetic_iter():
    it = SyntheticDataIter(10, (4, 3, 8, 8), 3, np.float32)
    batches = list(it)
    assert len(batches) == 3 and batches[0].pad == 0
    assert batches[0].data[0].shape == (4, 3, 8, 8) and batches[0].data[0].dtype == np.float32
    assert batches[0].data[0].context == mx.cpu() and batches[0].provide_data[0].name == "data"
    assert np.array_equal(batches[0].label[0].asnumpy(), it.label.asnumpy())
    it.reset()
    assert it.next().data[0] is it.data


def test_image_classification_rec_iter_and_fit_test_io(rec):
    """get_rec_iter with fit.py's kvstore, then fit.py's --test-io loop and its contexts."""
    args = _data_args(rec)
    kv = mx.kvstore.create(args.kv_store)  # fit.py
    head = '%(asctime)-15s Node[' + str(kv.rank) + '] %(message)s'
    assert (kv.rank, kv.num_workers) == (0, 1) and "Node[0]" in head
    with warnings.catch_warnings():  # fill_value=127 colours the rotation's border here
        warnings.simplefilter("error", NoEffectWarning)
        (train, val), gpu_devs = get_rec_iter(args, kv)
    with train, val:
        _test_io(args, train, val, gpu_devs)


def _test_io(args, train, val, gpu_devs):
    assert gpu_devs == [mx.gpu(0), mx.gpu(1)] and str(gpu_devs[1]) == "gpu(1)"
    seen = 0
    for i, batch in enumerate(train):  # fit.py, args.test_io
        for j in batch.data:
            j.wait_to_read()
        seen += batch.data[0].shape[0] - batch.pad
        if (i + 1) % args.disp_batches == 0:
            assert batch.data[0].shape == (4, 3, 24, 24)
    assert seen == N_IMAGES
    labels = np.concatenate([b.label[0].asnumpy()[:4 - b.pad] for b in val])
    assert labels.tolist() == [float(i % 3) for i in range(N_IMAGES)]
    devs = mx.cpu() if args.gpus is None or args.gpus == '' else [
        mx.gpu(int(i)) for i in args.gpus.split(',')]
    assert devs == ["gpu(0)", "gpu(1)"]


def test_the_kvstore_shards_the_data_by_the_environments_rank(rec, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    kv = mx.kvstore.create("dist_sync")
    assert (kv.rank, kv.num_workers) == (1, 2)
    assert mx.kvstore.create("local").rank == 0  # one worker, as MXNet's
    with pytest.raises(NotCoveredError, match="training is MXNet's own"):
        kv.push(3, mx.nd.ones((2,)))
    level_one = _data_args(rec, use_gpu_augmenter=0, max_random_h=0, max_random_s=0,
                           max_random_l=0, max_random_rotate_angle=0, max_random_shear_ratio=0)
    with pytest.warns(NoEffectWarning, match="fill_value has no effect: pad=0 and no affine"):
        (train, val), _ = get_rec_iter(level_one, kv)  # the script's fill_value=127 unused
    with train, val:
        labels = np.concatenate([b.label[0].asnumpy()[:4 - b.pad] for b in train])
    assert len(labels) == N_IMAGES // 2  # this rank's half


# -- example/gluon/data.py ----------------------------------------------------------------------

class DummyIter(mx.io.DataIter):  # gluon/data.py's, verbatim but for the import
    def __init__(self, batch_size, data_shape, batches=100):
        super(DummyIter, self).__init__(batch_size)
        self.data_shape = (batch_size,) + data_shape
        self.label_shape = (batch_size,)
        self.provide_data = [('data', self.data_shape)]
        self.provide_label = [('softmax_label', self.label_shape)]
        self.batch = mx.io.DataBatch(data=[mx.nd.zeros(self.data_shape)],
                                     label=[mx.nd.zeros(self.label_shape)])
        self._batches = 0
        self.batches = batches

    def next(self):
        if self._batches < self.batches:
            self._batches += 1
            return self.batch
        self._batches = 0
        raise StopIteration


def test_gluon_dummy_iter():
    batches = list(DummyIter(4, (3, 8, 8), batches=3))
    assert len(batches) == 3 and batches[0].data[0].shape == (4, 3, 8, 8)
    assert not batches[0].data[0].any() and batches[0].label[0].dtype == np.float32


def _to_tensor(image):  # gluon's crop + to_tensor, with numpy where recpipe.mx has no op
    image = image[4:36, 8:40]
    return np.transpose(image, (2, 0, 1)).astype(np.float32) / 255


def _train_transform(image, label):
    return _to_tensor(image), label


def test_gluon_image_record_dataset_through_the_dataloader(rec):
    from recpipe.mx.gluon.data import DataLoader  # `from mxnet.gluon.data import DataLoader`
    from recpipe.mx.gluon.data.vision import ImageRecordDataset

    train_dataset = ImageRecordDataset(rec).transform_first(_to_tensor)
    train_data = DataLoader(train_dataset, 4, shuffle=True, last_batch='discard', num_workers=2)
    batches = list(train_data)
    assert len(batches) == len(train_data) == 2
    data, label = batches[0]
    assert data.shape == (4, 3, 32, 32) and data.dtype == np.float32 and label.shape == (4,)
    assert isinstance(data, mx.nd.NDArray) and data.asnumpy().max() <= 1.0
    val_data = DataLoader(ImageRecordDataset(rec).transform(_train_transform), 4,
                          last_batch='keep', num_workers=2)
    labels = np.concatenate([label.asnumpy() for _, label in val_data])
    assert labels.tolist() == [float(i % 3) for i in range(N_IMAGES)]  # in order, all kept
    images = np.concatenate([data.asnumpy() for data, _ in val_data])
    expected = np.stack([_train_transform(*ImageRecordDataset(rec)[i])[0]
                         for i in range(N_IMAGES)])
    assert np.array_equal(images, expected)
    rolled = DataLoader(ImageRecordDataset(rec), 4, last_batch='rollover')
    assert [len(b[1]) for b in rolled] == [4, 4] and [len(b[1]) for b in rolled] == [4, 4, 4]


def test_the_dataloaders_threads_end_with_the_iteration(rec):
    from recpipe.mx.gluon.data.vision import ImageRecordDataset

    before = threading.active_count()
    loader = mx.gluon.data.DataLoader(ImageRecordDataset(rec), 2, num_workers=3)
    iteration = iter(loader)
    next(iteration)
    iteration.close()  # a loop left early
    assert threading.active_count() == before
    assert len(list(loader)) == 5 and threading.active_count() == before


def test_gluons_image_ops_are_not_served_and_say_what_to_use():
    with pytest.raises(NotCoveredError, match=r"mx\.image\.resize_short .*augment in the "
                                              r"iterator instead: mx\.io\.ImageRecordIter"):
        mx.image.resize_short  # noqa: B018 - gluon/data.py's val_transform
    with pytest.raises(NotCoveredError, match=r"mx\.nd\.transpose .*use numpy on them "
                                              r"\(np\.transpose\)"):
        mx.nd.transpose  # noqa: B018 - gluon/data.py's caltech transform
    with pytest.raises(NotCoveredError, match=r"mx\.gluon\.utils .*recpipe\.mx serves"):
        mx.gluon.utils  # noqa: B018
    with pytest.raises(NotCoveredError, match=r"mx\.io\.PrefetchingIter .*decodes ahead"):
        mx.io.PrefetchingIter  # noqa: B018 - InsightFace's get_face_image_iter
    with pytest.raises(NotCoveredError, match=r"mx\.mod .*training is MXNet's own"):
        mx.mod  # noqa: B018
    with pytest.raises(NotCoveredError, match=r"mx\.np .*numpy arrays"):
        mx.np  # noqa: B018
    assert not hasattr(mx, "sym") and getattr(mx.gluon, "nn", None) is None


# -- InsightFace: recognition/ArcFace/image_iter.py and arcface_torch's MXFaceDataset ------------

def test_insightface_face_image_iter_walk_and_batches(tmp_path):
    """FaceImageIter's __init__ (header0, identity ranges), next_sample and next's batch
    assembly, as written, with numpy's transpose where it calls nd.transpose."""
    from recpipe.mx import io, recordio
    from recpipe.mx import ndarray as nd

    path_imgrec, labels = write_faces(tmp_path)
    path_imgidx = path_imgrec[0:-4] + ".idx"
    imgrec = recordio.MXIndexedRecordIO(path_imgidx, path_imgrec, 'r')
    s = imgrec.read_idx(0)
    header, _ = recordio.unpack(s)
    assert header.flag > 0
    imgidx, id2range = [], {}
    for identity in range(int(header.label[0]), int(header.label[1])):
        s = imgrec.read_idx(identity)
        header, _ = recordio.unpack(s)
        a, b = int(header.label[0]), int(header.label[1])
        id2range[identity] = (a, b)
        imgidx += range(a, b)
    nd_mean = mx.nd.array(np.array([127.5] * 3, dtype=np.float32).reshape(1, 1, 3)).reshape(
        (1, 1, 3))
    batch_size, (c, h, w) = 4, (3, 40, 40)
    batch_data = nd.empty((batch_size, c, h, w))
    batch_label = nd.empty((batch_size,))
    for i, idx in enumerate(imgidx[:batch_size]):
        header, img = recordio.unpack(imgrec.read_idx(idx))
        label = header.label if isinstance(header.label, numbers.Number) else header.label[0]
        _data = mx.image.imdecode(img).astype('float32', copy=False)
        _data -= nd_mean
        _data *= 0.0078125
        batch_data[i][:] = np.transpose(_data, axes=(2, 0, 1))
        batch_label[i] = label  # numpy: x[i] of a 1-D array is a scalar, not MXNet's (1,)
    batch = io.DataBatch([batch_data], [batch_label], batch_size - 4)
    assert len(id2range) == 4 and imgidx == list(range(1, len(labels) + 1))
    assert batch.data[0].shape == (4, 3, 40, 40) and batch.pad == 0
    assert batch.label[0].asnumpy().tolist() == [float(v) for v in labels[:4]]
    assert -1.0 <= float(batch.data[0].min()) and float(batch.data[0].max()) <= 1.0
    imgrec.close()


def test_arcface_torch_mxface_dataset_reads(tmp_path):
    path_imgrec, labels = write_faces(tmp_path)
    imgrec = mx.recordio.MXIndexedRecordIO(path_imgrec[:-4] + ".idx", path_imgrec, 'r')
    header, _ = mx.recordio.unpack(imgrec.read_idx(0))
    imgidx = np.array(range(1, int(header.label[0])))
    header, img = mx.recordio.unpack(imgrec.read_idx(int(imgidx[2])))
    sample = mx.image.imdecode(img).asnumpy()
    assert type(sample) is np.ndarray and sample.shape == (40, 40, 3)
    assert float(header.label) == labels[2]
    imgrec.close()


# -- seeding ------------------------------------------------------------------------------------

def _epoch(rec, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoEffectWarning)
        with mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 24, 24), batch_size=5,
                                   shuffle=True, rand_crop=True, rand_mirror=True,
                                   preprocess_threads=2, **kwargs) as it:
            return [(b.data[0].asnumpy(), b.label[0].asnumpy()) for b in it]


def _same(a, b):
    return all(np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1]) for x, y in zip(a, b))


def test_mx_random_seed_is_honoured_by_the_loaders(rec):
    unseeded = _epoch(rec)
    mx.random.seed(7)
    first, again = _epoch(rec), _epoch(rec)
    assert _same(first, again) and _same(first, _epoch(rec, seed=7))
    assert not _same(first, unseeded)  # unseeded loaders keep seed 0, as MXNet's
    assert _same(_epoch(rec, seed=0), unseeded)  # an explicit seed wins
    from recpipe.mx.gluon.data.vision import ImageRecordDataset

    def order():
        loader = mx.gluon.data.DataLoader(ImageRecordDataset(rec), 3, shuffle=True)
        return [label.asnumpy().tolist() for _, label in loader]

    seven = order()
    assert seven == order() and sorted(sum(seven, [])) == sorted(float(i % 3)
                                                               for i in range(N_IMAGES))
    mx.random.seed(8)
    assert order() != seven and not _same(_epoch(rec), first)
    draws = mx.random.uniform(0, 1, shape=(3,))
    mx.random.seed(8)
    assert np.array_equal(draws, mx.random.uniform(0, 1, shape=(3,)))
    with pytest.raises(ValueError, match="seed_state"):
        mx.random.seed(-1)


def test_contexts_and_arrays_without_mxnet():
    assert mx.cpu() == mx.Context("cpu", 0) == "cpu(0)" and mx.gpu(2).device_id == 2
    assert mx.num_gpus() == mx.context.num_gpus() == 0 and mx.current_context() == mx.cpu()
    with mx.gpu(1):
        assert mx.current_context() == mx.gpu(1)
        with pytest.raises(ValueError, match="host memory"):
            mx.nd.zeros((2,))  # on the current context, a GPU one
    assert mx.current_context() == mx.cpu()
    with pytest.raises(ValueError, match=r"gpu\(0\).*host memory"):
        mx.nd.array([1, 2], ctx=mx.gpu(0))
    a = mx.nd.array([[1, 2], [3, 4]])
    assert a.dtype == np.float32 and mx.nd.array(np.arange(3)).dtype == np.arange(3).dtype
    assert mx.nd.ones((2, 2), dtype="uint8").sum() == 4 and mx.nd.full((2,), 7).tolist() == [7, 7]
    assert mx.nd.arange(0, 3).tolist() == [0, 1, 2] and mx.nd.array([4]).asscalar() == 4.0
    assert a.as_in_context(mx.cpu_pinned()) is a and a.copyto(mx.cpu()).tolist() == a.tolist()
    shared = np.zeros(3, np.float32)
    mx.nd.from_numpy(shared)[0] = 5
    assert shared[0] == 5 and mx.nd.waitall() is None


def test_import_recpipe_as_mx_points_at_recpipe_mx():
    import recpipe as mx_too

    assert mx_too.recordio is mx.recordio and mx_too.image is mx.image
    for name in ("cpu", "nd", "gluon", "random", "kvstore", "mod"):
        with pytest.raises(NotCoveredError, match=r"use `import recpipe\.mx as mx`"):
            getattr(mx_too, name)
    with pytest.raises(AttributeError) as caught:
        mx_too.ImageLodaer  # noqa: B018 - not an MXNet name: the plain error
    assert not isinstance(caught.value, NotCoveredError)
