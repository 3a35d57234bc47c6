"""PyTorch adapters: a map-style ``RecordDataset`` and a threaded batch ``TorchLoader``.

``RecordDataset`` is for ``torch.utils.data.DataLoader``: ``dataset[i]`` is ``(image, label)``
for record ``i``, decoded and augmented with ImageRecordIter's keywords (``data_shape`` given)
or the decoded RGB ``(H, W, C)`` uint8 image (``data_shape=None``), then passed to
``transform`` when one is given. It is fork-safe and spawn-safe: the record file and the decoder
are opened lazily in each process (a forked worker re-opens its own descriptor, reads are
positional), and pickling sends only the arguments. Its augmentation is reproducible per
``(seed, epoch, record)``; call ``set_epoch(n)`` before each epoch (DataLoader workers get a
fresh copy of the dataset at every ``iter``, unless ``persistent_workers=True``). For many
ranks use ``ShardSampler`` (or torch's ``DistributedSampler``).

``TorchLoader`` wraps ``recpipe.decode.ImageLoader``: decode threads fill freshly allocated
numpy batches that become tensors with ``torch.from_numpy`` (no copy), optionally copied into
pinned memory and moved to ``device`` with ``non_blocking``. Rank and world size come from
``recpipe.distributed.detect_rank`` unless given; every rank gets the same number of batches
and sees the same per-epoch permutation. ``state_dict()``/``load_state_dict()`` resume exactly
mid-epoch.

Both follow torch's conventions where recpipe's MXNet adapters follow MXNet's:
``random_resized_crop=True`` is torchvision's ``RandomResizedCrop``: a crop of 8% to 100% of the
image's area (``min_random_area=0.08``, ``max_random_area=1``) at an aspect ratio drawn
log-uniformly in 3/4 to 4/3 (``min_aspect_ratio=0.75``, ``max_aspect_ratio=4/3``), resized to
``data_shape``, for each keyword left out (ImageRecordIter's defaults, area 1 and aspect 1, make
the crop a no-op; ``recpipe.mxnet`` keeps them); integer class
labels come as int64 (``label_dtype`` chooses; float labels and ``label_width > 1`` stay
float32), ``TorchLoader``'s last batch is short (``drop_last=True`` drops it,
``last_batch='pad'`` fills it as MXNet does), ``num_workers`` is taken as ``threads``, and a
``device`` that cannot be used is a ValueError in the constructor.

>>> device = "cuda" if torch.cuda.is_available() else "cpu"
>>> loader = TorchLoader("train.rec", 256, (3, 224, 224), shuffle=True,   # doctest: +SKIP
...                      random_resized_crop=True, rand_mirror=True, device=device,
...                      pin_memory=device == "cuda")
>>> for epoch in range(epochs):                                             # doctest: +SKIP
...     loader.set_epoch(epoch)
...     for images, labels in loader:
...         ...
"""

import logging
import warnings
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ._optional import require
from .decode.augment import Augmenter
from .decode.augment.config import with_torchvision_crop
from .decode.augment.effect import warn_no_effect
from .decode.loader import ImageLoader
from .decode.options import LoaderOptions, check_keywords, decoder_for
from .decode.order import epoch_order
from .decode.records import RecordDecoder
from .system.distributed import detect_rank
from .system.fork import after_fork_in_child
from .errors import DecodeError, RecordFormatError
from .io.layout import image_positions
from .io.reader import RecordReader

__all__ = ["RecordDataset", "ShardSampler", "TorchLoader", "TransformedDataset"]

log = logging.getLogger(__name__)


def _torch():
    return require("torch", "torch")


class _LabelCast:
    """Labels as torch wants them: ``label_dtype`` when given; else int64 for class labels
    (``label_width == 1`` and whole numbers), float32 otherwise.

    The choice is made on the first labels seen and kept, so every batch has one dtype; a
    fractional label after int64 was chosen raises ValueError naming ``label_dtype``.
    """

    def __init__(self, label_dtype=None, label_width=1):
        self.label_dtype = label_dtype
        self.label_width = int(label_width)
        self._integral = None if label_width == 1 else False

    def decide(self, labels):
        """Choose int64 or float32 from ``labels`` (when nothing is chosen yet)."""
        if self._integral is None and self.label_dtype is None:
            array = np.asarray(labels)
            self._integral = bool(np.all(array == np.floor(array)))

    def __call__(self, labels, torch):
        """``labels`` (a numpy array or scalar) as a tensor of the chosen dtype."""
        array = np.asarray(labels)
        if self.label_dtype is not None:
            return torch.from_numpy(array).to(self.label_dtype)
        self.decide(array)
        whole = self._integral and bool(np.all(array == np.floor(array)))
        if not self._integral:
            return torch.from_numpy(array.astype(np.float32, copy=False))
        if not whole:
            bad = array[array != np.floor(array)].ravel()[0]
            raise ValueError(f"label {bad} is fractional, after whole-number class labels "
                             "were served as int64: pass label_dtype=torch.float32 for "
                             "real-valued labels (the choice is made on the first labels)")
        return torch.from_numpy(array.astype(np.int64))


def _usable_device(torch, device):
    """``torch.device(device)``, or ValueError now when it cannot hold a tensor (``"cuda"``
    without CUDA, a GPU index past the last one) instead of at the first batch."""
    if device is None:
        return None
    device = torch.device(device)
    if device.type == "cpu":
        return device
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={str(device)!r}: CUDA is not available here (torch "
                         f"{torch.__version__}, torch.cuda.is_available() is False); use "
                         "device='cuda' if torch.cuda.is_available() else 'cpu'")
    try:
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError) as exc:
        raise ValueError(f"device={str(device)!r} cannot be used: {exc}") from exc
    return device


# DataLoader keywords that have a TorchLoader answer of another name or none
_DATALOADER_ANSWERS = {
    "prefetch_factor": "use prefetch=N (batches decoded ahead)",
    "persistent_workers": "decode threads persist across epochs already",
    "sampler": "use shuffle=, seed= and rank=/world_size= (or RecordDataset with a DataLoader)",
    "batch_sampler": "use batch_size= and last_batch= (or RecordDataset with a DataLoader)",
    "collate_fn": "batches are assembled in place (use RecordDataset with a DataLoader for a "
                  "collate_fn)",
    "worker_init_fn": "decode threads run in this process (use RecordDataset with a "
                      "DataLoader for worker processes)",
}


def _torch_keywords(loader_kwargs, drop_last=None):
    """ImageLoader keywords from TorchLoader's: ``num_workers`` as ``threads``, ``drop_last``
    as ``last_batch``, the last batch kept short by default (torch's ``drop_last=False``)."""
    keywords = dict(loader_kwargs)
    if "part_index" in keywords or "num_parts" in keywords:
        raise ValueError("give rank/world_size (or nothing, to detect them), "
                         "not part_index/num_parts")
    for name, answer in _DATALOADER_ANSWERS.items():
        if name in keywords:
            raise ValueError(f"TorchLoader has no {name}= (a DataLoader keyword): {answer}")
    if "num_workers" in keywords:
        workers = keywords.pop("num_workers")
        if "threads" in keywords:
            raise ValueError("give threads= or num_workers=, not both (num_workers is "
                             "taken as threads: TorchLoader decodes in threads)")
        keywords["threads"] = max(1, int(workers))
        log.info("num_workers=%s taken as threads=%d (decode threads, not processes)",
                 workers, keywords["threads"])
    if drop_last is not None:
        wanted = "drop" if drop_last else "partial"
        given = keywords.get("last_batch", wanted)
        if given != wanted:
            raise ValueError(f"drop_last={drop_last} contradicts last_batch={given!r}")
        keywords["last_batch"] = wanted
    keywords.setdefault("last_batch", "partial")
    return with_torchvision_crop(keywords)


# ImageLoader settings that shape batches and epochs: a DataLoader (or a sampler) decides them
# for a map-style dataset
_LOADER_ONLY = {
    "batch_size": "the DataLoader batches (DataLoader(batch_size=))",
    "shuffle": "use DataLoader(shuffle=True) or ShardSampler(shuffle=...)",
    "part_index": "use ShardSampler(rank=..., world_size=...) or DistributedSampler",
    "num_parts": "use ShardSampler(rank=..., world_size=...) or DistributedSampler",
    "last_batch": "use DataLoader(drop_last=)",
    "threads": "use DataLoader(num_workers=) (or TorchLoader, which decodes in threads)",
    "prefetch": "use DataLoader(prefetch_factor=)",
    "on_error": "a sample's error raises in __getitem__ (TorchLoader has on_error=)",
}
_LOADER_ONLY.update(dict.fromkeys(
    ("timeout", "lookahead", "run_bytes", "trace", "provenance"),
    "a setting of ImageLoader's batch pipeline (use TorchLoader for it)"))
# RecordDataset's own keywords besides the LoaderOptions ones
_DATASET_KEYWORDS = ("transform", "label_dtype", "flag", "options")


def _dataset_options(data_shape, options, keywords):
    """The dataset's ``LoaderOptions`` from ``keywords`` (ImageLoader's vocabulary, checked with
    a "did you mean"; batch and epoch settings refused with what to use instead) or ``options``
    as given (its batch and epoch settings are then not used)."""
    if options is not None:
        if keywords or data_shape is not None:
            raise TypeError("give options= or keywords (data_shape, ...), not both")
        return options
    check_keywords(keywords, "RecordDataset", _DATASET_KEYWORDS)
    for name, answer in _LOADER_ONLY.items():
        if name in keywords:
            raise ValueError(f"RecordDataset has no {name}= (an ImageLoader keyword): {answer}")
    return LoaderOptions.from_kwargs(1, data_shape, **with_torchvision_crop(keywords))


class RecordDataset:
    """Map-style dataset over the records of a ``.rec`` (index order when there is an index).

    ``data_shape=(C, H, W)`` with ImageRecordIter augmentation keywords gives ``(C, H, W)``
    (or ``(H, W, C)`` with ``layout='NHWC'``) tensors of ``dtype``; ``data_shape=None`` gives
    the decoded RGB image as an ``(H, W, 3)`` uint8 tensor, or ``(H, W, 1)`` gray with
    ``flag=0`` (as ``gluon.data.vision.ImageRecordDataset``). Labels follow torch: int64 class
    labels when ``label_width == 1`` and the first samples' labels are whole numbers, float32
    otherwise; ``label_dtype`` chooses (e.g. ``torch.float32`` for regression targets).
    ``keys`` chooses records by index key; by default every record is served, except in a
    file in InsightFace's layout, where only the images are (``recpipe.io.layout``).

    As a replacement for ``ImageRecordDataset``: ``transform=fn`` (constructor) is applied to
    the image; ``dataset.transform(fn)`` / ``dataset.transform_first(fn)`` return a new dataset
    applying ``fn`` to ``(image, label)`` / to the image, as gluon's ``Dataset`` methods do.
    ``integrity`` ('auto' default, 'strict', 'off'): records are checked against the ``.sums``
    sidecar when there is one (``RecordReader``); a damaged record raises RecordFormatError.

    The keywords are ``ImageLoader``'s (one vocabulary, checked into a ``LoaderOptions``,
    ``dataset.options``, with a "did you mean" for a misspelt one): the augmentation keywords,
    ``dtype``, ``layout``, ``label_width``, ``seed``/``aug_seed``, ``keys``, ``decoder``,
    ``fast_dct``, ``fast_upsample``, ``max_pixels``, ``max_scans``, ``integrity``,
    ``label_rule``. ``random_resized_crop=True`` takes torchvision's ``RandomResizedCrop``
    ranges for the area and aspect keywords left out (module docstring); a setting that the
    others leave without effect gets a ``NoEffectWarning`` here, once. Those that shape
    batches and epochs (``shuffle``, ``threads``, ``last_batch``, ...) are the DataLoader's and
    raise ValueError saying what to use instead.
    ``options=LoaderOptions(...)`` may be given instead of keywords (``data_shape`` from its
    ``augment``; its batch and epoch settings are not used).
    """

    def __init__(self, url: str, data_shape: Optional[Sequence[int]] = None,
                 index_url: Optional[str] = None, storage_options: Optional[dict] = None, *,
                 transform: Optional[Callable] = None, label_dtype: Any = None, flag: int = 1,
                 options: Optional[LoaderOptions] = None, **keywords) -> None:
        if flag not in (0, 1):
            raise ValueError(f"flag={flag!r}: expected 1 (colour) or 0 (grayscale)")
        self.options = _dataset_options(data_shape, options, keywords)
        config = self.options.augment
        warn_no_effect(config)  # here, once: not again in each DataLoader worker
        if flag == 0 and config is not None and config.channels != 1:
            raise ValueError(f"flag=0 (grayscale) needs a 1-channel data_shape, not "
                             f"{tuple(config.data_shape)}")
        self.url = str(url)
        self.index_url = index_url
        self.storage_options = storage_options
        self.image_transform = transform
        self.label_dtype = label_dtype
        self.flag = flag
        self.epoch = 0
        self._open()
        try:
            self._records = image_positions(self._reader, self.options.keys)
            self._length = len(self._reader) if self._records is None else len(self._records)
            self._labels = self._label_cast(label_dtype)
        except BaseException:
            self._reader.close()
            raise

    _LABEL_PROBE = 32

    def _label_cast(self, label_dtype):
        """int64 or float32, chosen from the labels of the first samples (every DataLoader
        worker then agrees)."""
        label_width = self.options.label_width
        cast = _LabelCast(label_dtype, label_width)
        if label_dtype is None and label_width == 1 and self._length:
            labels = []
            for index in range(min(self._LABEL_PROBE, self._length)):
                position = self.record_position(index)
                try:
                    header, _ = self._record_decoder.image_bytes(position)
                except (RecordFormatError, DecodeError):  # reported when the sample is read
                    continue
                labels.append(self._record_decoder.label(header, position))
            cast.decide(labels)
        return cast

    def _open(self):
        o = self.options
        self._reader = RecordReader(self.url, self.index_url, self.storage_options,
                                    integrity=o.integrity)
        augmenter = Augmenter(o.augment) if o.augment is not None else None
        self._record_decoder = RecordDecoder(self._reader, decoder_for(o), augmenter,
                                             label_width=o.label_width,
                                             label_rule=o.label_rule, seed=o.augment_seed,
                                             channels=3 if self.flag else 1)
        self._inherited = False
        if not getattr(self, "_fork_hooked", False):  # once per dataset object
            after_fork_in_child(self, RecordDataset._let_go)
            self._fork_hooked = True

    def _let_go(self):
        """After a fork, in the child (a DataLoader worker): the parent's reader and decoder
        state are not this process's; the next sample opens its own (the parent's are left,
        not closed)."""
        self._inherited = True

    def _ensure_open(self):
        if self._inherited or self._reader is None:  # a forked worker, or unpickled
            self._open()

    def __getstate__(self):
        state = self.__dict__.copy()
        for key in ("_reader", "_record_decoder"):
            state[key] = None
        state["_fork_hooked"] = False
        return state

    def __len__(self):
        return self._length

    def set_epoch(self, epoch):
        """Augmentation of the next samples uses epoch number ``epoch``."""
        self.epoch = int(epoch)

    def record_position(self, index):
        """The record position served as sample ``index``."""
        index = int(index)
        if not -self._length <= index < self._length:
            raise IndexError(f"sample {index} out of range for {self._length} samples")
        index %= self._length
        return index if self._records is None else int(self._records[index])

    def __getitem__(self, index):
        torch = _torch()
        self._ensure_open()
        position = self.record_position(index)
        # the sample's random draws are keyed by its record position and the epoch
        image, label = self._record_decoder.decode(position, position, self.epoch)
        label = self._labels(label, torch)
        if self.image_transform is not None:
            return self.image_transform(image), label
        return torch.from_numpy(image), label

    def transform(self, fn, lazy=True):
        """A dataset whose samples are ``fn(image, label)`` (gluon's ``Dataset.transform``);
        ``lazy=False`` computes every sample now."""
        return TransformedDataset(self, fn, lazy=lazy)

    def transform_first(self, fn, lazy=True):
        """A dataset whose samples are ``(fn(image), label)`` (gluon's ``transform_first``)."""
        return TransformedDataset(self, _First(fn), lazy=lazy)

    def close(self):
        """Close this process's reader of the file (a forked worker's inherited one is left to
        its parent); the next ``dataset[i]`` opens it again."""
        if self._reader is not None and not self._inherited:  # (the parent's: left to it)
            self._reader.close()

    def __repr__(self):
        return (f"RecordDataset({self.url!r}, records={self._length}, "
                f"data_shape={getattr(self.options.augment, 'data_shape', None)})")


class _First:
    """``fn`` applied to the first element of a sample (picklable, unlike a lambda)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, first, *rest):
        return (self.fn(first),) + rest


class TransformedDataset:
    """``dataset`` with ``fn(*sample)`` applied to each sample (lazily, or all at once)."""

    def __init__(self, dataset, fn, lazy=True):
        self.dataset = dataset
        self.fn = fn
        self._samples = None if lazy else [self._apply(dataset[i]) for i in range(len(dataset))]

    def _apply(self, sample):
        return self.fn(*sample) if isinstance(sample, tuple) else self.fn(sample)

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, index):
        if self._samples is not None:
            return self._samples[index]
        return self._apply(self.dataset[index])

    def set_epoch(self, epoch):
        """Pass ``epoch`` to the underlying dataset (its augmentation draws)."""
        self.dataset.set_epoch(epoch)

    def transform(self, fn, lazy=True):
        """This dataset with ``fn`` applied to every sample after the present transforms."""
        return TransformedDataset(self, fn, lazy=lazy)

    def transform_first(self, fn, lazy=True):
        """This dataset with ``fn`` applied to the image (first element) of every sample."""
        return TransformedDataset(self, _First(fn), lazy=lazy)


class ShardSampler:
    """Record positions of this rank for each epoch, for ``DataLoader(sampler=...)``.

    The same permutation on every rank for a given ``seed`` and epoch (``set_epoch``), cut into
    equal parts (wrapping around), so every rank gets the same number of samples. ``shuffle``:
    False, True/'full' or 'block' (runs of consecutive records: sequential reads).
    """

    def __init__(self, num_records, *, shuffle=False, seed=0, rank=None, world_size=None):
        info = detect_rank(rank, world_size)
        self.num_records = int(num_records)
        self.shuffle = {False: "none", None: "none", True: "full"}.get(shuffle, shuffle)
        self.seed = int(seed)
        self.rank, self.world_size = info.rank, info.world_size
        self.epoch = 0
        self._order(0)  # validate now

    def set_epoch(self, epoch):
        """Make the next ``iter`` yield epoch ``epoch``'s order (call it before each epoch)."""
        self.epoch = int(epoch)

    def _order(self, epoch):
        return epoch_order(self.num_records, shuffle=self.shuffle, seed=self.seed, epoch=epoch,
                           part_index=self.rank, num_parts=self.world_size)

    def __iter__(self):
        return iter(self._order(self.epoch).tolist())

    def __len__(self):
        return len(self._order(0))


class TorchLoader:
    """Batches ``(images, labels)`` as torch tensors from a threaded ``ImageLoader``.

    ``rank``/``world_size`` (default: ``detect_rank()``) select this rank's part; any other
    ``ImageLoader`` keyword (``threads``, ``shuffle``, ``seed``, ``dtype``, ``last_batch``,
    augmentation keywords...) passes through; ``random_resized_crop=True`` takes torchvision's
    ``RandomResizedCrop`` ranges (area 0.08-1, aspect 3/4-4/3) for the keywords left out, and a
    setting the others leave without effect gets a ``NoEffectWarning`` once. ``pin_memory`` copies each batch into page-locked
    memory (ignored with a warning when no accelerator is available); ``device`` moves it there
    (``non_blocking`` when pinned); a device that cannot be used is a ValueError here.

    torch's conventions: labels are int64 class labels when ``label_width == 1`` and the first
    batch's labels are whole numbers, else float32 (``label_dtype`` chooses); the last batch is
    short (``last_batch='partial'``; ``drop_last=True`` or ``last_batch='drop'`` drops it,
    ``last_batch='pad'`` fills it from the start, counted in ``last_pad``); ``num_workers=N``
    is taken as ``threads=N``.

    A TorchLoader is the DataLoader: iterate it directly. It is not picklable (its threads
    belong to its process): handing it to DataLoader workers or ``mp.spawn`` is a TypeError
    saying so; a copy rebuilt in each worker would serve the whole part once per worker, and
    a fork without ``exec`` is a RuntimeError at the first batch. Create one in each rank;
    for DataLoader workers use ``RecordDataset``.
    """

    def __init__(self, url: str, batch_size: int, data_shape: Sequence[int],
                 index_url: Optional[str] = None, storage_options: Optional[dict] = None, *,
                 rank: Optional[int] = None, world_size: Optional[int] = None,
                 pin_memory: bool = False, device: Any = None, non_blocking: bool = True,
                 label_dtype: Any = None, drop_last: Optional[bool] = None,
                 **loader_kwargs) -> None:
        torch = _torch()
        loader_kwargs = _torch_keywords(loader_kwargs, drop_last)
        info = detect_rank(rank, world_size)
        self.rank, self.world_size = info.rank, info.world_size
        self.device = _usable_device(torch, device)
        self.pin_memory = bool(pin_memory) and self._can_pin(torch)
        self.non_blocking = bool(non_blocking)
        self.label_dtype = label_dtype
        self._last_pad = 0
        options = LoaderOptions.from_kwargs(batch_size, data_shape, part_index=info.rank,
                                            num_parts=info.world_size, **loader_kwargs)
        self._labels = _LabelCast(label_dtype, options.label_width)
        self.loader = ImageLoader(url, index_url=index_url, storage_options=storage_options,
                                  options=options)

    @staticmethod
    def _can_pin(torch):
        if torch.cuda.is_available():
            return True
        warnings.warn("pin_memory=True ignored: no CUDA device is available",
                      RuntimeWarning, stacklevel=3)
        return False

    def _tensor(self, array, torch):
        tensor = torch.from_numpy(array) if isinstance(array, np.ndarray) else array
        if self.pin_memory:
            tensor = tensor.pin_memory()
        if self.device is not None:
            tensor = tensor.to(self.device, non_blocking=self.non_blocking and self.pin_memory)
        return tensor

    def __iter__(self):
        torch = _torch()
        for batch in self.loader:
            images, labels = batch
            self._last_pad = batch.pad
            labels = self._tensor(self._labels(labels, torch), torch)
            yield self._tensor(images, torch), labels

    def __len__(self):
        """Batches per epoch (the same on every rank)."""
        return len(self.loader)

    @property
    def last_pad(self):
        """Filler samples at the end of the batch just returned (``last_batch='pad'``)."""
        return self._last_pad

    def set_epoch(self, epoch):
        """Make the next ``iter`` epoch number ``epoch`` (its order and augmentation draws)."""
        self.loader.set_epoch(epoch)

    def state_dict(self):
        """Where the loader is (epoch, batch, order settings); plain ints and strings."""
        return self.loader.state_dict()

    def load_state_dict(self, state):
        """The next ``iter`` yields exactly the batches an uninterrupted run would have."""
        self.loader.load_state_dict(state)

    def stats(self):
        """Images/s, consumer wait, per-stage seconds and error counts (``ImageLoader.stats``)."""
        return self.loader.stats()

    def close(self):
        """Stop and join the decode threads."""
        self.loader.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __reduce__(self):
        # spawn/forkserver workers would get "cannot pickle 'module' object" from deep inside;
        # a copy rebuilt there would serve every record once per worker: say what to do instead
        from .decode.loader import not_picklable

        raise TypeError(not_picklable("a TorchLoader"))
