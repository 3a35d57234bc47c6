"""The partition of a pack: every output file and the ordered items that go into it, fixed
before writing.

The partition is built from SRC and the options (shuffle, validation split, shards by count or
by input bytes) and saved as ``OUT.pack-plan.json`` (its name from earlier releases, so that
their interrupted runs resume) before the first record is written, so that
``--resume`` can check it is continuing the same job. It is removed once everything is published.
Its ``fingerprint`` hashes all of it; two runs with equal fingerprints write identical bytes.
"""

import dataclasses
import hashlib
import json
import logging
import random
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ..io.atomic import publish
from ..io.format.framing import HEAD_SIZE, padded
from ..io.format.header import HEADER_SIZE
from ..io.sources import url_to_fs
from .items import PackItem
from .transform import ImageOptions

__all__ = ["PartitionOptions", "Shard", "Split", "Partition", "build_partition", "partition_url",
           "labels_url", "save_partition", "load_partition", "remove_partition", "split_counts",
           "cut_by_count", "cut_by_size"]

log = logging.getLogger(__name__)

PARTITION_VERSION = 1


@dataclass(frozen=True)
class PartitionOptions:
    """Everything that decides the output bytes (worker count and error policy do not)."""

    image: ImageOptions = ImageOptions()
    shuffle: bool = True
    seed: int = 0
    val_ratio: float = 0.0
    shards: int = 0
    shard_size: int = 0
    sources: bool = True  # the shards keep a sources sidecar (recpipe.io.sidecars.record_sources)


@dataclass(frozen=True)
class Shard:
    """One ``.rec``/``.idx`` pair holding ``items[start:stop]`` of its split."""

    rec: str
    idx: str
    start: int
    stop: int


@dataclass(frozen=True)
class Split:
    name: str
    prefix: str
    items: Tuple[PackItem, ...]
    shards: Tuple[Shard, ...]


@dataclass(frozen=True)
class Partition:
    src: str
    root: str
    out: str
    options: PartitionOptions
    classes: Optional[Dict[str, int]]
    splits: Tuple[Split, ...]

    @property
    def fingerprint(self):
        blob = json.dumps(self.to_dict(include_fingerprint=False), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    @property
    def total_items(self):
        return sum(len(split.items) for split in self.splits)

    def to_dict(self, include_fingerprint=True):
        data = {
            "version": PARTITION_VERSION,
            "src": self.src,
            "root": self.root,
            "out": self.out,
            "options": dataclasses.asdict(self.options),
            "classes": self.classes,
            "splits": [{
                "name": split.name,
                "prefix": split.prefix,
                "items": [[item.index, list(item.labels), item.path] for item in split.items],
                "shards": [dataclasses.asdict(shard) for shard in split.shards],
            } for split in self.splits],
        }
        if include_fingerprint:
            data["fingerprint"] = self.fingerprint
        return data

    @classmethod
    def from_dict(cls, data):
        if data.get("version") != PARTITION_VERSION:
            raise ValueError(f"unsupported pack partition version {data.get('version')!r}")
        opts = dict(data["options"])
        opts["image"] = ImageOptions(**opts["image"])
        splits = tuple(Split(
            s["name"], s["prefix"],
            tuple(PackItem(i, tuple(labels), path) for i, labels, path in s["items"]),
            tuple(Shard(**shard) for shard in s["shards"])) for s in data["splits"])
        return cls(data["src"], data["root"], data["out"], PartitionOptions(**opts),
                   data["classes"], splits)


def partition_url(out):
    return f"{out}.pack-plan.json"


def labels_url(out):
    return f"{out}.labels.json"


def split_counts(total, val_ratio):
    """``(train, val)`` sizes: ``round(total * val_ratio)`` items go to validation."""
    if not 0.0 <= val_ratio < 1.0:
        raise ValueError(f"val_ratio must be in [0, 1), got {val_ratio}")
    val = int(round(total * val_ratio))
    return total - val, val


def cut_by_count(total, count):
    """``count`` contiguous ``(start, stop)`` ranges whose sizes differ by at most one."""
    if count < 1:
        raise ValueError(f"shard count must be >= 1, got {count}")
    base, extra = divmod(total, count)
    bounds = []
    start = 0
    for i in range(count):
        stop = start + base + (1 if i < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def record_size_estimate(item, pack_label):
    """On-disk bytes of an item's record if its file went in as is (pass-through)."""
    labels = len(item.labels) if pack_label and len(item.labels) > 1 else 0
    return HEAD_SIZE + padded(HEADER_SIZE + 4 * labels + max(item.size, 0))


def cut_by_size(items, limit, pack_label=False):
    """Contiguous ranges of at most ``limit`` estimated record bytes (at least one item each).

    The estimate is exact for pass-through; re-encoded records are usually smaller."""
    if limit < 1:
        raise ValueError(f"shard size must be positive, got {limit}")
    bounds = []
    start = 0
    size = 0
    for i, item in enumerate(items):
        rec = record_size_estimate(item, pack_label)
        if i > start and size + rec > limit:
            bounds.append((start, i))
            start, size = i, 0
        size += rec
    bounds.append((start, len(items)))
    return bounds


def _shards_for(prefix, items, options):
    if options.shard_size:
        bounds = cut_by_size(items, options.shard_size, options.image.pack_label)
    elif options.shards:
        if options.shards > len(items):
            log.warning("%d shards asked for %d images: writing %d (no empty shards)",
                        options.shards, len(items), max(1, len(items)))
        bounds = cut_by_count(len(items), max(1, min(options.shards, len(items))))
    else:
        return (Shard(f"{prefix}.rec", f"{prefix}.idx", 0, len(items)),)
    n = len(bounds)
    return tuple(Shard(f"{prefix}-{i:05d}-of-{n:05d}.rec", f"{prefix}-{i:05d}-of-{n:05d}.idx",
                       start, stop) for i, (start, stop) in enumerate(bounds))


def build_partition(src, root, out, items: List[PackItem], classes, options: PartitionOptions):
    """Order, split and shard ``items`` into a ``Partition``."""
    out = str(out)
    ordered = list(items)
    if options.shuffle:
        random.Random(options.seed).shuffle(ordered)
    n_train, n_val = split_counts(len(ordered), options.val_ratio)
    if options.val_ratio:
        parts = [("train", f"{out}_train", ordered[:n_train]),
                 ("val", f"{out}_val", ordered[n_train:])]
    else:
        parts = [("all", out, ordered)]
    splits = tuple(Split(name, prefix, tuple(part), _shards_for(prefix, part, options))
                   for name, prefix, part in parts)
    return Partition(str(src), str(root), out, options, classes, splits)


def save_partition(partition, storage_options=None):
    publish(partition_url(partition.out), json.dumps(partition.to_dict()).encode(), storage_options)


def load_partition(out, storage_options=None):
    """The saved partition of an interrupted run, or None if there is none."""
    fs, path = url_to_fs(partition_url(out), storage_options)
    try:
        data = json.loads(fs.cat_file(path))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError) as e:
        raise ValueError(f"{partition_url(out)}: unreadable pack partition ({e}); "
                         f"delete it to start over") from e
    return Partition.from_dict(data)


def remove_partition(out, storage_options=None):
    fs, path = url_to_fs(partition_url(out), storage_options)
    try:
        fs.rm(path)
    except FileNotFoundError:
        pass
