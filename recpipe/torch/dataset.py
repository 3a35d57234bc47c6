"""``RecordDataset``: a map-style dataset over the records of a ``.rec`` for
``torch.utils.data.DataLoader``, fork-safe and spawn-safe (the package docstring)."""

from typing import Any, Callable, Optional, Sequence

import numpy as np

from ..adapters.transformed import Transformable
from ..decode.augment import Augmenter
from ..decode.augment.config import with_torchvision_crop
from ..decode.augment.effect import warn_no_effect
from ..decode.options import LoaderOptions, check_keywords, decoder_for
from ..decode.records import record_decoder
from ..io.format.layout import image_positions
from ..io.reader import RecordReader
from ..system.fork import after_fork_in_child
from .tensors import LabelCast, torch_module

__all__ = ["RecordDataset"]


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
# samples whose labels decide between int64 and float32
_LABEL_PROBE = 32
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


def _augmenter(options):
    return Augmenter(options.augment) if options.augment is not None else None


class RecordDataset(Transformable):
    """Map-style dataset over the records of a ``.rec`` (index order when there is an index).

    ``data_shape=(C, H, W)`` with ImageRecordIter augmentation keywords gives ``(C, H, W)``
    (or ``(H, W, C)`` with ``layout='NHWC'``) tensors of ``dtype``; ``data_shape=None`` gives
    the decoded RGB image as an ``(H, W, 3)`` uint8 tensor, or ``(H, W, 1)`` gray with
    ``flag=0`` (as ``gluon.data.vision.ImageRecordDataset``). Labels follow torch: int64 class
    labels when ``label_width == 1`` and the first samples' labels are whole numbers, float32
    otherwise; ``label_dtype`` chooses (e.g. ``torch.float32`` for regression targets).
    ``keys`` chooses records by index key; by default every record is served, except in a
    file in InsightFace's layout, where only the images are (``recpipe.io.format.layout``).

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
        self._hook_forks()
        o = self.options
        self._reader = RecordReader(self.url, self.index_url, self.storage_options,
                                    integrity=o.integrity, note_unprotected=True)
        try:
            self._records = image_positions(self._reader, o.keys)
            self._record_decoder = record_decoder(o, self._reader, decoder_for(o),
                                                  _augmenter(o), channels=3 if flag else 1)
            self._length = len(self._reader) if self._records is None else len(self._records)
            # int64 or float32, chosen from the labels of the first samples (every DataLoader
            # worker then agrees)
            self._labels = LabelCast(label_dtype, o.label_width)
            if label_dtype is None and o.label_width == 1 and self._length:
                first = (np.arange(min(_LABEL_PROBE, self._length)) if self._records is None
                         else self._records[:_LABEL_PROBE])
                labels = self._record_decoder.labels_of(first.tolist())
                self._labels.decide(labels)
        except BaseException:
            self._reader.close()
            raise

    def _open(self):
        """Open the reader and the record decoder again in this process (a DataLoader worker,
        or an unpickled copy)."""
        o = self.options
        self._reader = RecordReader(self.url, self.index_url, self.storage_options,
                                    integrity=o.integrity, note_unprotected=True)
        self._record_decoder = record_decoder(o, self._reader, decoder_for(o), _augmenter(o),
                                              channels=3 if self.flag else 1)
        self._inherited = False
        self._hook_forks()

    def _hook_forks(self):
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
        torch = torch_module()
        self._ensure_open()
        position = self.record_position(index)
        # the sample's random draws are keyed by its record position and the epoch
        image, label = self._record_decoder.decode(position, position, self.epoch)
        label = self._labels(label, torch)
        if self.image_transform is not None:
            return self.image_transform(image), label
        return torch.from_numpy(image), label

    def close(self):
        """Close this process's reader of the file (a forked worker's inherited one is left to
        its parent); the next ``dataset[i]`` opens it again."""
        if self._reader is not None and not self._inherited:  # (the parent's: left to it)
            self._reader.close()

    def __repr__(self):
        return (f"RecordDataset({self.url!r}, records={self._length}, "
                f"data_shape={getattr(self.options.augment, 'data_shape', None)})")


