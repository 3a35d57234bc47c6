"""``pack_dataset``: a folder of class subfolders or an im2rec ``.lst`` -> RecordIO shards.

Steps: list the items (``items``), fix the partition and save it (``partition``), make a
``ShardTask`` of each planned shard (``jobs``) and hand them to a runner
(``runners.ShardRunner``), which writes each shard and publishes it, ``.rec`` and ``.idx`` as
one commit:
``runners.LocalRunner`` in this process (items computed here or in worker processes),
``cluster.DaskRunner`` as one task per shard on a Dask cluster (``dask=``). Then, whatever
the runner, the outcomes are merged into the returned ``PackSummary`` (unusual inputs and
per-item errors included), the label map ``OUT.labels.json`` is published (and
``OUT.manifest.json`` when the runner hashed the shards) and the partition removed.
"""

import contextlib
import logging
import time
from typing import Any, Callable, Optional

from .items import load_items
from .jobs import (adopt_partition, default_workers, discard_empty, partition_options,
                   publish_labels, raise_failures, shard_tasks, summarize)
from .manifest import build_manifest, publish_manifest
from .partition import build_partition, load_partition, remove_partition
from .report import PackSummary
from .options import PACK_ON_ERROR, PackOptions
from .runners import LocalRunner

__all__ = ["pack_dataset", "default_workers", "output_prefix", "parse_size", "PACK_ON_ERROR",
           "PackOptions"]

log = logging.getLogger(__name__)

_SIZE_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "M": 1 << 20, "MB": 1 << 20,
               "G": 1 << 30, "GB": 1 << 30, "T": 1 << 40, "TB": 1 << 40}


def parse_size(text):
    """``"256MB"`` -> 268435456 (binary units; ``K``/``KB``, ``M``/``MB``, ``G``/``GB``)."""
    text = str(text).strip().upper().replace("IB", "B")
    number = text.rstrip("KMGTB")
    unit = text[len(number):]
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"not a size: {text!r} (use e.g. 256MB)") from None
    if unit not in _SIZE_UNITS or value <= 0:
        raise ValueError(f"not a size: {text!r} (use e.g. 256MB)")
    return int(value * _SIZE_UNITS[unit])


def _partition_for(src, out, options, runner):
    """The partition, and whether an interrupted run of it is being resumed (its saved one exists:
    without one, outputs already present cannot be trusted to come from the same options).
    Without ``shards`` and ``shard_size``: those of the interrupted run being resumed, else the
    runner's default."""
    storage_options, val_ratio = options.storage_options, options.val_ratio
    shards, shard_size = options.shards, options.shard_size
    saved = load_partition(out, storage_options) if options.resume else None
    if not shards and not shard_size and saved is not None:
        shards, shard_size = saved.options.shards, saved.options.shard_size
    items, classes, item_root = load_items(src, options.root, extensions=options.extensions,
                                           need_sizes=bool(shard_size),
                                           storage_options=storage_options)
    if not shards and not shard_size:
        shards = runner.default_shards(len(items), float(val_ratio or 0.0))
    settings = partition_options(options, src, shards, shard_size)
    partition = build_partition(src, item_root, out, items, classes, settings)
    return partition, adopt_partition(partition, out, options.resume, saved, storage_options,
                                      save=options.resumable)


@contextlib.contextmanager
def _runner(options):
    workers = options.workers
    if options.dask is None:
        yield LocalRunner(default_workers(options.pass_through) if workers is None else workers,
                          options.chunksize, options.item_timeout)
        return
    from .cluster import dask_runner

    with dask_runner(options.dask, workers, options.item_timeout,
                     options.pass_through) as runner:
        yield runner


def output_prefix(out):
    """The prefix of the files to write: ``out`` without a ``.rec`` ending (``out/train.rec``
    and ``out/train`` both write ``out/train.rec`` + ``out/train.idx``). An empty name, or one
    naming a folder, raises ValueError (it would write hidden files like ``.rec``)."""
    prefix = str(out)
    if prefix.lower().endswith(".rec"):
        prefix = prefix[:-4]
    if not prefix.rsplit("/", 1)[-1]:
        raise ValueError(f"output prefix {str(out)!r} names no file: give e.g. out/train")
    return prefix


def pack_dataset(src: str, out: str, options: Optional[PackOptions] = None, *,
                 progress: Optional[Callable[[int, int, int], None]] = None,
                 **keywords: Any) -> PackSummary:
    """Pack the images of ``src`` into RecordIO files named from the prefix ``out``.

    ``src`` is a folder of class subfolders (labels in sorted folder order) or an im2rec ``.lst``
    (paths relative to ``root``, default the list's folder). ``out`` is any fsspec URL prefix:
    ``out.rec``/``out.idx``, or ``out-00000-of-00004.rec`` ... with ``shards``/``shard_size``
    (bytes; cut by input sizes), and ``out_train``/``out_val`` with ``val_ratio``. ``shuffle``
    defaults to True for folders and False for lists. Items that fail are skipped and reported
    (``on_error="raise"`` stops instead); ``resume=True`` continues an interrupted run with the
    same arguments. ``progress(done, total, input_bytes)`` is called after each item. A worker
    process that yields nothing for ``item_timeout`` seconds per item stops the run.

    Images: JPEGs keep their pixels unless an option asks for a change (``resize``,
    ``center_crop``, ``quality``, PNG ``encoding``, ``color=0``) or ``keep_jpeg=False``; what
    must be re-encoded is (other formats, CMYK, EXIF-rotated JPEGs; quality 95 unless given).
    ``restart`` (default ``"auto"``; ``image.restart``): every JPEG written gets restart markers,
    losslessly (a kept JPEG's coefficients are written back: same pixels, usually fewer bytes),
    so that a random crop decodes only the intervals it touches; ``restart="off"`` keeps the
    JPEG bytes as they are. ``pass_through=True`` stores every file's bytes as they are.
    ``summary.actions`` counts the images kept, restarted, re-encoded and transcoded.

    ``limits`` (``inputs.InputLimits``): image paths must stay inside the root and name regular
    files of at most 1 GiB unless it says otherwise; refused items are reported and counted.

    ``dask``: write the shards on a Dask cluster instead, one task per shard, each writing its
    own files to ``out`` (which every worker must reach): ``"local"`` starts a ``LocalCluster``
    of ``workers`` processes, a string is a scheduler address, or pass a
    ``distributed.Client``. It also publishes ``OUT.manifest.json`` (``manifest``); without
    ``shards``/``shard_size`` it writes two shards per worker thread. See ``cluster``.
    The settings come as ``options`` (a ``PackOptions``) or as keywords (its field names, e.g.
    ``resize=256``; with ``options`` too, they replace its fields), all checked before any file
    is touched; a misspelt keyword raises TypeError with a "did you mean".
    Returns a ``PackSummary``.
    """
    started = time.perf_counter()
    if options is None:
        options = PackOptions.from_kwargs(**keywords)
    elif keywords:
        options = options.replace(**keywords)
    out = output_prefix(out)
    storage_options = options.storage_options
    with _runner(options) as runner:
        partition, resume = _partition_for(src, out, options, runner)
        tasks = shard_tasks(partition, options, resume, runner.locate)
        outcomes, failures = runner.run(tasks, progress)
    raise_failures(partition, tasks, outcomes, failures)
    summary = summarize(out, partition, tasks, outcomes, runner.workers, runner.cluster)
    if summary.written == 0 and summary.failed and not summary.resumed_records:
        first = summary.errors[0] if summary.errors else {}
        discard_empty(tasks, outcomes)
        remove_partition(out, storage_options)
        raise ValueError(f"nothing packed: all {summary.failed} image(s) failed (first: "
                         f"{first.get('path')}: {first.get('reason')}); no output was published")
    if options.labels_file:
        summary.labels_file = publish_labels(partition, summary, storage_options)
    if runner.publishes_manifest:
        from .. import __version__

        digests = {outcome.summary.rec: outcome.digests for outcome in outcomes}
        summary.manifest_file = publish_manifest(
            out, build_manifest(partition, summary.splits, digests, __version__), storage_options)
    remove_partition(out, storage_options)
    summary.seconds = time.perf_counter() - started
    return summary
