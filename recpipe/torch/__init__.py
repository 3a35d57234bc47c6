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
``recpipe.system.distributed.detect_rank`` unless given; every rank gets the same number of batches
and sees the same per-epoch permutation. ``state_dict()``/``load_state_dict()`` resume exactly
mid-epoch.

Both follow torch's conventions where recpipe's MXNet adapters follow MXNet's:
``random_resized_crop=True`` is torchvision's ``RandomResizedCrop``: a crop of 8% to 100% of the
image's area (``min_random_area=0.08``, ``max_random_area=1``) at an aspect ratio drawn
log-uniformly in 3/4 to 4/3 (``min_aspect_ratio=0.75``, ``max_aspect_ratio=4/3``), resized to
``data_shape``, for each keyword left out (ImageRecordIter's defaults, area 1 and aspect 1, make
the crop a no-op; ``recpipe.mx.record_iter`` keeps them); integer class
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

from ..adapters.transformed import TransformedDataset
from .dataset import RecordDataset
from .loader import TorchLoader
from .sampler import ShardSampler

__all__ = ["RecordDataset", "ShardSampler", "TorchLoader", "TransformedDataset"]
