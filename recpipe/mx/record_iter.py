"""Drop-in replacements for ``mx.io.ImageRecordIter`` and ``mx.io.ImageRecordUInt8Iter``.

``recpipe.mx.record_iter.ImageRecordIter(**kwargs)`` takes every keyword of MXNet 1.9.1's iterator
(``MXNET_KEYWORDS``) and returns ``mx.io.DataBatch`` objects: ``data=[NDArray (N, C, H, W)]``
(RGB), ``label=[NDArray float32]`` of shape ``(N,)`` (``(N, label_width)`` when
``label_width > 1``), ``pad``, ``index``, plus ``provide_data``/``provide_label`` on the
iterator (names from ``data_name``/``label_name``). It is an ``mx.io.DataIter`` (mxnet is
imported when the class is first used), so ``mx.mod.Module.fit`` and ``score`` take it as is.
Decoding runs in ``recpipe.decode.ImageLoader`` threads; each batch array is fresh and handed
to MXNet without a copy (``mx.nd.from_numpy(zero_copy=True)``).

Keywords: ``preprocess_threads`` -> decode threads, ``prefetch_buffer`` -> batches decoded
ahead, ``path_imglist`` -> labels looked up by ``header.id`` in a ``.lst`` (index, then
``label_width`` numbers), ``mean_img`` -> an MXNet mean-image file, loaded (or computed and
saved when missing, like MXNet), ``seed_aug`` -> the key of the augmentation's random stream
(apart from ``seed``, which then keys only the shuffle). ``verbose``, ``ctx`` and
``shuffle_chunk_seed`` are accepted and have no effect (see below). recpipe extras:
``last_batch`` ('pad', 'drop', 'partial'; default 'pad'), ``on_error``, ``decoder``, ``layout``,
``timeout``,
``storage_options``, ``dct_scaling``, ``lookahead``. Misspelled keywords warn
(``UnknownKeywordWarning``) and are ignored; keywords we cannot honour raise
NotImplementedError naming them.

Where we deliberately differ from MXNet 1.9.1 (its bugs and weak spots, see
``shared/docs/recordio-compat.md`` sections 4, 5 and 8):

- ``reset()`` really rewinds: with ``round_batch=True`` MXNet starts the next epoch after the
  records it borrowed for padding (mxnet#8552); every epoch here visits the whole part. A
  ``reset()`` before any batch of the epoch was taken does nothing, so ``reset(); for ...`` and
  ``for ...; reset()`` loops both see each record once per epoch.
- ``pad`` is always the number of filler samples of the batch: MXNet reports 0 for the last
  batch with ``round_batch=False`` (its tail holds stale data) and keeps a stale non-zero pad on
  reused batches. Here both ``round_batch`` values fill the last batch with records from the
  start of the epoch's order and count them in ``pad`` (``last_batch='partial'`` or ``'drop'``
  give a short last batch or none).
- ``index`` holds the record positions (0-based, index order) of the samples, as uint64; MXNet
  leaves it all zeros.
- ``num_parts``/``part_index`` give every part the same number of records (wrapping around),
  hence the same number of batches; MXNet splits a ``.rec`` without ``.idx`` by bytes, so
  ranks get different counts and distributed jobs hang at the end of an epoch.
- ``shuffle=True`` permutes the whole part every epoch when an index is available (the
  ``path_imgidx`` or the ``.idx`` beside the ``.rec``) and does a block shuffle otherwise; MXNet
  without ``path_imgidx`` only shuffles inside 8 MB chunks. ``shuffle_chunk_size > 0`` turns on
  the block shuffle even with ``shuffle=False`` (as MXNet shuffles its pieces then); the block
  order is keyed by ``seed``, so ``shuffle_chunk_seed`` has no effect.
- Shuffle and augmentation are reproducible for a given ``seed`` (``seed_aug``) and epoch
  whatever the number of threads (MXNet's depend on the thread count unless ``seed_aug`` is
  set); MXNet's exact random draws (libstdc++ ``mt19937``) are not reproduced.
- Arrays come out in ``cpu(0)`` memory, shared with the decoder output; with ``device_id >= 0``
  and a GPU present they are copied into ``cpu_pinned(device_id)`` like MXNet's.
- ``path_imglist`` lines with fewer than ``label_width`` numbers after the index raise
  ValueError naming the line (MXNet reads the path as 0.0); a record id missing from the list
  raises LabelError (a RecordFormatError) naming the record (routed through ``on_error``;
  the record is not quarantined).
- With ``mean_img`` the mean image is subtracted in output coordinates; MXNet subtracts it
  before mirroring (the two differ only on mirrored samples, by the asymmetry of the mean
  image). A missing file is computed over one pass of the (augmented) data and saved; we average
  raw pixels, MXNet averages pixels already multiplied by ``scale / std`` and then subtracts
  that from raw pixels (the same file only when ``std_*`` and ``scale`` are 1).
- In validation mode (no random augmentation: resize + center crop, normalisation) the output
  is MXNet's pixels exactly, through OpenCV. ``dct_scaling=True`` opts into the fast path there
  (reduced-scale JPEG decode and the fused resize: values within one level of MXNet's). With
  random augmentation the fast path is the default (``dct_scaling=False`` turns it off).
- Argument errors are ValueError (or NotImplementedError) instances that are also
  ``mxnet.base.MXNetError``, so both ``except`` clauses written for MXNet catch them.
- With ``mean_img``, ``max_random_contrast``/``max_random_illumination`` apply as MXNet's
  ``(x - mean_image) * contrast * scale / std + illumination * scale / std``, drawn per sample
  from recpipe's stream.
- ``dtype='uint8'`` (and ``ImageRecordUInt8Iter``) with mean/std/scale keywords raises
  ValueError (MXNet ignores them silently); ``dtype='float16'`` is an extra.
- Unsupported: ``dtype='int8'``, 4-channel ``data_shape``, ``mean_a``/``std_a`` other than the
  defaults, ``aug_seq`` other than ``aug_default``: NotImplementedError.
- A bad record raises a precise exception (or is skipped / replaced with ``on_error``)
  instead of killing the process.
"""

import logging
import os
from typing import Any, Dict, Optional, Tuple

import numpy as np

from .._optional import require
from ..adapters.facade import LoaderFacade
from ..decode.augment import sample_stream
from ..decode.labels import IdLabels
from ..decode.loader import ImageLoader
from ..decode.options import LoaderOptions
from ..io.sidecars.index import read_text
from .keywords import MXNET_KEYWORDS, UnknownKeywordWarning, translate

__all__ = [
    "ImageRecordIter",
    "ImageRecordUInt8Iter",
    "MXNET_KEYWORDS",
    "UnknownKeywordWarning",
    "iterator_classes",
    "read_imglist",
]

log = logging.getLogger(__name__)

# the mean-image jitter draws from its own stream, apart from the augmenter's
_MEAN_JITTER_KEY = 1 << 65


# ------------------------------------------------------------------------------------------------
# path_imglist


def read_imglist(url, label_width=1, storage_options=None):
    """``{image id: labels}`` from an ImageRecordIter ``path_imglist``: per line an integer id
    then ``label_width`` numbers (whitespace-separated; the path after them is not read).
    Values are float32 scalars for ``label_width == 1``, else float32 arrays."""
    labels = {}
    for lineno, line in enumerate(read_text(url, storage_options).splitlines(), 1):
        tokens = line.split()
        if not tokens:
            continue
        try:
            if len(tokens) < 1 + label_width:
                raise ValueError("too few columns")
            values = np.array([float(t) for t in tokens[1:1 + label_width]], dtype=np.float32)
            image_id = int(tokens[0])
        except ValueError as exc:
            raise ValueError(f"{url} line {lineno}: expected an integer image id and "
                             f"{label_width} label(s), got {line!r} ({exc})") from None
        labels[image_id] = values[0] if label_width == 1 else values
    return labels


def _make_loader(loader_kwargs, imglist_url):
    kwargs = dict(loader_kwargs)
    url, index_url = kwargs.pop("url"), kwargs.pop("index_url", None)
    storage_options = kwargs.pop("storage_options", None)
    options = LoaderOptions.from_kwargs(kwargs.pop("batch_size"), kwargs.pop("data_shape"),
                                        **kwargs)
    if imglist_url is not None:
        imglist = read_imglist(imglist_url, options.label_width, storage_options)
        # a table recpipe._batch looks ids up in itself: imglist labels stay on the native path
        options = options.replace(label_rule=IdLabels(imglist, options.label_width,
                                                      source=imglist_url, path=str(url)))
    return ImageLoader(url, index_url=index_url, storage_options=storage_options,
                       options=options)


# ------------------------------------------------------------------------------------------------
# mean image


def _compute_mean_image(loader_kwargs, imglist_url):
    """Mean of the augmented float32 images over one pass of the whole file (MXNet's
    ``CreateMeanImg``), shape ``(C, H, W)``."""
    kwargs = dict(loader_kwargs, shuffle=False, part_index=0, num_parts=1,
                  last_batch="partial", layout="NCHW", lookahead=False)
    total: Optional[np.ndarray] = None
    count = 0
    loader = _make_loader(kwargs, imglist_url)
    with loader:
        for images, _ in loader:
            batch_sum = images.sum(axis=0, dtype=np.float64)
            total = batch_sum if total is None else total + batch_sum
            count += len(images)
    if total is None or not count:
        raise ValueError(f"cannot compute a mean image: {loader_kwargs['url']} has no records")
    return (total / count).astype(np.float32)


def _save_mean_image(mx, path, mean):
    tmp = f"{path}.tmp-{os.getpid()}"
    mx.nd.save(tmp, {"mean_img": mx.nd.array(mean)})
    os.replace(tmp, path)
    log.info("saved mean image %s", path)


def _load_mean_image(mx, path, data_shape):
    loaded = mx.nd.load(path)
    arrays = list(loaded.values()) if isinstance(loaded, dict) else list(loaded)
    if len(arrays) != 1:
        raise ValueError(f"mean_img {path}: expected one array, found {len(arrays)}")
    mean = arrays[0].asnumpy().astype(np.float32)
    if mean.shape != tuple(data_shape):
        raise ValueError(f"mean_img {path}: shape {mean.shape} does not match "
                         f"data_shape {tuple(data_shape)}")
    return mean


def _mean_image(mx, path, loader_kwargs, imglist_url, data_shape):
    if "://" in path and not path.startswith("file://"):
        raise NotImplementedError(f"mean_img={path!r}: only local mean image files are supported")
    path = path[len("file://"):] if path.startswith("file://") else path
    if os.path.exists(path):
        log.info("loading mean image %s", path)
        return _load_mean_image(mx, path, data_shape)
    log.info("mean image %s not found: computing it over the data", path)
    mean = _compute_mean_image(loader_kwargs, imglist_url)
    _save_mean_image(mx, path, mean)
    return mean


class _Normalizer:
    """MXNet's normalisation with a mean image, in place:
    ``(x - mean_image) * contrast * scale / std + illumination * scale / std`` with
    ``contrast = 1 + U(-max_random_contrast, max_random_contrast)`` and
    ``illumination = U(-max_random_illumination, max_random_illumination)`` drawn per sample
    from a stream keyed by ``(seed, epoch, record)`` (the same whatever the thread count)."""

    def __init__(self, mean, normalize, layout, seed):
        channels = mean.shape[0]
        std = np.array([normalize.get(k, 1.0) for k in ("std_r", "std_g", "std_b")][:channels],
                       dtype=np.float32)
        factor = np.float32(normalize.get("scale", 1.0)) / std
        self.max_contrast = float(normalize.get("max_random_contrast", 0.0))
        self.max_illumination = float(normalize.get("max_random_illumination", 0.0))
        self.seed = _MEAN_JITTER_KEY + seed
        self.nhwc = layout == "NHWC"
        if self.nhwc:
            self.mean, self.factor = mean.transpose(1, 2, 0), factor
        else:
            self.mean, self.factor = mean, factor[:, None, None]

    def _jitter(self, positions, epoch):
        """Per-sample ``(contrast, illumination)`` arrays shaped to broadcast over images."""
        contrast = np.ones(len(positions), np.float32)
        illumination = np.zeros(len(positions), np.float32)
        for i, position in enumerate(positions):
            # the sample's first two uniforms (Generator.random(2) of its stream), drawn in C
            u = np.frombuffer(sample_stream(self.seed, epoch, int(position)).draws(False)[0],
                              np.float64, 2)
            contrast[i] += (u[0] * 2 - 1) * self.max_contrast
            illumination[i] = (u[1] * 2 - 1) * self.max_illumination
        return contrast[:, None, None, None], illumination[:, None, None, None]

    def __call__(self, images, positions=(), epoch=0):
        images -= self.mean
        if self.max_contrast or self.max_illumination:
            contrast, illumination = self._jitter(positions, epoch)
            images *= contrast
            images += illumination
        images *= self.factor
        return images


# ------------------------------------------------------------------------------------------------
# the iterator


class _RecordIterBase(LoaderFacade):
    """The body of ``ImageRecordIter``; the public classes add ``mx.io.DataIter`` as a base."""

    _default_dtype = "float32"

    _backend: Any = None  # the mxnet module, or a stand-in (recpipe.mx.dataiter.NUMPY_BACKEND)
    batch_size: int  # set by mx.io.DataIter's constructor

    def __init__(self, **kwargs):
        mx = self._backend
        try:
            loader_kwargs, options, imglist_url = translate(
                kwargs, default_dtype=self._default_dtype, cls_name=type(self).__name__)
        except (ValueError, NotImplementedError) as exc:
            raise _mxnet_error(mx, exc) from exc
        shape = loader_kwargs["data_shape"]
        # mx.io.DataIter's constructor: that base is added by iterator_classes
        super().__init__(options.batch_size)  # type: ignore[call-arg]
        self._mx: Any = mx
        self._options = options
        self.data_name, self.label_name = options.data_name, options.label_name
        self._normalizer = None
        if options.mean_img:
            layout = loader_kwargs.get("layout", "NCHW")
            mean = _mean_image(mx, options.mean_img, loader_kwargs, imglist_url, shape)
            self._normalizer = _Normalizer(mean, options.normalize, layout,
                                           loader_kwargs.get("aug_seed", loader_kwargs["seed"]))
        self._pinned = (mx.cpu_pinned(options.device_id)
                        if options.device_id >= 0 and mx.context.num_gpus() > 0 else None)
        self.loader = _make_loader(loader_kwargs, imglist_url)  # starts threads: keep it last
        self._batch: Any = None
        self._started = False
        self._epoch = iter(self.loader)  # start decoding the first batches now

    # -- DataIter protocol ----------------------------------------------------------------

    @property
    def provide_data(self):
        out_shape = self.loader.augmenter.out_shape
        layout = self.loader.options.augment.layout
        return [self._mx.io.DataDesc(self.data_name, (self.batch_size,) + tuple(out_shape),
                                     np.dtype(self.loader.augmenter.dtype).type, layout)]

    @property
    def provide_label(self):
        label_width = self.loader.options.label_width
        shape = (self.batch_size,) if label_width == 1 else (self.batch_size, label_width)
        return [self._mx.io.DataDesc(self.label_name, shape, np.float32)]

    def reset(self):
        """Start the next epoch (a no-op while no batch of the current epoch was taken)."""
        if self._started:
            self._epoch = iter(self.loader)
            self._started = False
        self._batch = None

    def next(self):
        batch = next(self._epoch)
        images, labels = batch
        self._started = True
        if self._normalizer is not None:
            images = self._normalizer(images, batch.positions, self.loader.epoch)
        index = batch.positions.astype(np.uint64)
        data, label = self._ndarray(images), self._ndarray(labels)
        io = self._mx.io
        self._batch = io.DataBatch(
            data=[data], label=[label], pad=batch.pad, index=index,
            provide_data=[io.DataDesc(self.data_name, data.shape, data.dtype,
                                      self.loader.options.augment.layout)],
            provide_label=[io.DataDesc(self.label_name, label.shape, label.dtype)])
        return self._batch

    def __next__(self):
        return self.next()

    def __iter__(self):
        return self

    def iter_next(self):
        try:
            self.next()
        except StopIteration:
            return False
        return True

    def getdata(self):
        return self._batch.data

    def getlabel(self):
        return self._batch.label

    def getindex(self):
        return self._batch.index

    def getpad(self):
        return self._batch.pad

    def _ndarray(self, array):
        array = self._mx.nd.from_numpy(np.ascontiguousarray(array), zero_copy=True)
        return array.as_in_context(self._pinned) if self._pinned is not None else array

    # -- recpipe extras -------------------------------------------------------------------

    def load_state_dict(self, state):
        """Make the next ``next()`` yield what an uninterrupted run would have yielded."""
        self.loader.load_state_dict(state)
        self._epoch = iter(self.loader)
        self._started = False
        self._batch = None


_CLASSES: Dict[Tuple[int, str], type] = {}  # (backend id, class name) -> class
_ERROR_CLASSES: Dict[Tuple[type, type], type] = {}  # (error type, MXNetError) -> both


def _mxnet_error(mx, exc):
    """``exc`` as an instance of its own type and of ``mxnet.base.MXNetError`` (what MXNet
    raises for a bad argument), so that code catching either still works."""
    kind = type(exc)
    if kind not in (ValueError, NotImplementedError):
        return exc
    key = (kind, mx.base.MXNetError)
    if key not in _ERROR_CLASSES:
        _ERROR_CLASSES[key] = type(f"MXNet{kind.__name__}", (kind, mx.base.MXNetError),
                                   {"__module__": __name__})
    return _ERROR_CLASSES[key](*exc.args)


def iterator_classes(backend=None):
    """``{"ImageRecordIter": cls, "ImageRecordUInt8Iter": cls}`` yielding ``backend``'s
    batches: the ``mxnet`` module's (imported, with an install hint, when ``backend`` is None)
    or a stand-in's such as ``recpipe.mx.dataiter.NUMPY_BACKEND`` (numpy arrays)."""
    mx = require("mxnet", "mxnet") if backend is None else backend
    if (id(mx), "ImageRecordIter") not in _CLASSES:
        for name, dtype in (("ImageRecordIter", "float32"), ("ImageRecordUInt8Iter", "uint8")):
            cls = type(name, (_RecordIterBase, mx.io.DataIter),
                       {"_default_dtype": dtype, "_backend": mx, "__module__": __name__,
                        "__doc__": f"recpipe's drop-in ``mx.io.{name}`` (default dtype "
                                   f"{dtype}); see the ``recpipe.mx.record_iter`` "
                                   "module docstring."})
            _CLASSES[id(mx), name] = cls
    return {name: _CLASSES[id(mx), name] for name in ("ImageRecordIter", "ImageRecordUInt8Iter")}


def __getattr__(name):
    if name in ("ImageRecordIter", "ImageRecordUInt8Iter"):
        return iterator_classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
