"""``TorchLoader``: batches ``(images, labels)`` as torch tensors from a threaded
``ImageLoader``, with torch's conventions (the package docstring)."""

import logging
import warnings
from typing import Any, Optional, Sequence

import numpy as np

from ..adapters.facade import LoaderFacade
from ..decode.augment.config import with_torchvision_crop
from ..decode.loader import ImageLoader, not_picklable
from ..decode.options import LoaderOptions
from ..system.distributed import detect_rank
from .tensors import LabelCast, torch_module, usable_device

__all__ = ["TorchLoader"]

log = logging.getLogger(__name__)


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


class TorchLoader(LoaderFacade):
    """Batches ``(images, labels)`` as torch tensors from a threaded ``ImageLoader``.

    ``rank``/``world_size`` (default: ``detect_rank()``) select this rank's part; any other
    ``ImageLoader`` keyword (``threads``, ``shuffle``, ``seed``, ``dtype``, ``last_batch``,
    augmentation keywords...) passes through; ``random_resized_crop=True`` takes torchvision's
    ``RandomResizedCrop`` ranges (area 0.08-1, aspect 3/4-4/3) for the keywords left out, and a
    setting the others leave without effect gets a ``NoEffectWarning`` once. ``pin_memory``
    copies each batch into page-locked
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
        torch = torch_module()
        loader_kwargs = _torch_keywords(loader_kwargs, drop_last)
        info = detect_rank(rank, world_size)
        self.rank, self.world_size = info.rank, info.world_size
        self.device = usable_device(torch, device)
        self.pin_memory = bool(pin_memory) and self._can_pin(torch)
        self.non_blocking = bool(non_blocking)
        self.label_dtype = label_dtype
        self._last_pad = 0
        options = LoaderOptions.from_kwargs(batch_size, data_shape, part_index=info.rank,
                                            num_parts=info.world_size, **loader_kwargs)
        self._labels = LabelCast(label_dtype, options.label_width)
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
        torch = torch_module()
        for batch in self.loader:
            images, labels = batch
            self._last_pad = batch.pad
            labels = self._tensor(self._labels(labels, torch), torch)
            yield self._tensor(images, torch), labels

    @property
    def last_pad(self):
        """Filler samples at the end of the batch just returned (``last_batch='pad'``)."""
        return self._last_pad

    def set_epoch(self, epoch):
        """Make the next ``iter`` epoch number ``epoch`` (its order and augmentation draws)."""
        self.loader.set_epoch(epoch)

    def __reduce__(self):
        # spawn/forkserver workers would get "cannot pickle 'module' object" from deep inside;
        # a copy rebuilt there would serve every record once per worker: say what to do instead
        raise TypeError(not_picklable("a TorchLoader"))
