"""Shard tasks of a pack, shared by every runner (this process, worker processes, Dask).

A pack is planned (``partition``) as shards; ``shard_tasks`` makes a ``ShardTask`` of each (small:
item paths and options, picklable for a cluster). A runner (``runners.ShardRunner``) turns
tasks into ``ShardOutcome``s: ``open_job`` keeps a shard an earlier run published or continues
its partial files, ``write_shard`` writes a job from a stream of ``ItemResult`` and publishes
its ``.rec``/``.idx`` as one commit. ``summarize`` merges the outcomes into the
``PackSummary``; ``publish_labels`` writes ``OUT.labels.json``.
"""

import json
import logging
import os
from dataclasses import dataclass
from typing import Optional, Tuple

from ..errors import DecodeError
from ..io.atomic import publish
from ..io.sources import url_to_fs
from ..io.sidecars.record_sources import sources_url_for
from ..io.sidecars.sums import sums_url_for
from .inputs import InputLimits
from .items import PackItem, join_url
from .partition import PartitionOptions, Shard, labels_url, partition_url, save_partition
from .report import InputReport, PackSummary, ShardSummary
from .shards import (Progress, ShardWriter, SourceFile, file_digest, is_local, recover_partial,
                     verify_published)
from .transform import ACTIONS, ImageOptions

__all__ = ["ShardJob", "ShardOutcome", "ShardTask", "ShardTaskError", "adopt_partition",
           "discard_empty", "default_workers", "file_name", "finish_empty", "open_job",
           "partition_options",
           "publish_labels", "raise_failures", "shard_tasks", "summarize", "write_shard"]

log = logging.getLogger(__name__)


def default_workers(pass_through=False):
    """Worker processes by default: none for pass-through (reading files is cheaper than
    shipping them between processes), else one per usable core."""
    if pass_through:
        return 0
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


class ShardTaskError(RuntimeError):
    """Shard tasks failed; ``failures``: ``[{"shard", "error"}, ...]``."""

    def __init__(self, failures):
        self.failures = list(failures)
        shown = "; ".join(f"{f['shard']}: {f['error']}" for f in self.failures[:5])
        more = f" (and {len(self.failures) - 5} more)" if len(self.failures) > 5 else ""
        super().__init__(f"{len(self.failures)} shard task(s) failed: {shown}{more}; "
                         f"completed shards are kept, run again with --resume")


@dataclass(frozen=True)
class ShardTask:
    """Everything a runner needs to write one shard (small: item paths, not images)."""

    split: str
    shard: Shard
    items: Tuple[PackItem, ...]
    root: str
    image: ImageOptions
    storage_options: Optional[dict]
    on_error: str
    resume: bool
    flush_every: int
    limits: InputLimits = InputLimits()
    sources: bool = True  # keep the sources sidecar (``recpipe.io.sidecars.record_sources``)
    resumable: bool = True  # a shard that stops early keeps its partial files for resume


@dataclass
class ShardOutcome:
    """What a shard task did. ``digests``: ``(rec_sha256, idx_sha256, idx_bytes)`` when the
    runner hashes its output; ``failure``: ``{"path", "reason"}`` of the item that stopped the
    shard (``on_error="raise"`` on a runner that lets the other shards finish)."""

    summary: ShardSummary
    report: InputReport
    written: int = 0
    failed: int = 0
    resumed_records: int = 0
    input_bytes: int = 0
    digests: Optional[tuple] = None
    failure: Optional[dict] = None


def shard_tasks(partition, options, resume, locate=str):
    """One ``ShardTask`` per planned shard, in partition order, with the write settings of
    ``options`` (a ``PackOptions``); ``locate(url)`` names the files as the runner's workers
    must see them (e.g. local paths made absolute)."""
    return [ShardTask(split.name,
                      Shard(locate(shard.rec), locate(shard.idx), shard.start, shard.stop),
                      split.items[shard.start:shard.stop], locate(partition.root),
                      partition.options.image, options.storage_options, options.on_error, resume,
                      options.flush_every, options.limits, partition.options.sources,
                      options.resumable)
            for split in partition.splits for shard in split.shards]


class ShardJob:
    """A shard still to write: its partition, its items and where a previous run stopped."""

    def __init__(self, shard, items, progress, summary):
        self.shard = shard
        self.items = items
        self.progress = progress
        self.summary = summary
        self.unpublished = None  # the writer of a shard whose items all failed (write_shard)

    @property
    def todo(self):
        return self.items[self.progress.position:]


def _published_digests(shard, storage_options):
    rec_sha256, _ = file_digest(shard.rec, storage_options)
    idx_sha256, idx_bytes = file_digest(shard.idx, storage_options)
    return rec_sha256, idx_sha256, idx_bytes


def open_job(task, checksums=False):
    """``(job, outcome)`` of ``task``: with ``resume``, a shard an earlier run published that
    holds what the partition says is kept (``job`` None; hashed with ``checksums``), and a local
    shard's partial temporary files are continued."""
    shard = task.shard
    outcome = ShardOutcome(ShardSummary(shard.rec, shard.idx), InputReport())
    keys = [item.index for item in task.items]
    done = verify_published(shard.rec, shard.idx, keys, task.storage_options) if task.resume \
        else None
    if done is not None:
        outcome.summary.records, outcome.summary.bytes = done
        outcome.summary.kept = True
        outcome.resumed_records = outcome.summary.records
        if checksums:
            outcome.digests = _published_digests(shard, task.storage_options)
        return None, outcome
    progress = Progress()
    if task.resume and is_local(shard.rec, task.storage_options):
        progress = recover_partial(shard.rec, shard.idx, keys, sources=task.sources)
        outcome.resumed_records = progress.records
    return ShardJob(shard, task.items, progress, outcome.summary), outcome


def _as_listed(item, result, root):
    """``result``, or an error when the file read was not the one listed (a class folder
    replaced while packing): its size differs from the listing's, or (local folders) its
    modification time now does."""
    if result.error:
        return result
    if item.size >= 0 and result.input_bytes != item.size:
        change = f"{item.size} bytes then, {result.input_bytes} when read"
    elif item.mtime >= 0 and _mtime(join_url(root, item.path), item.mtime) != item.mtime:
        change = "modified after the listing"
    else:
        return result
    return result._replace(payload=None, error=(
        f"changed since it was listed ({change}): the source changed during the pack; "
        "pack it again"))


def _mtime(path, default):
    try:
        return os.stat(path).st_mtime
    except (OSError, ValueError):
        return default  # not a local path here (a Dask worker elsewhere): nothing to compare


def write_shard(job, outcome, results, task, *, advance=None, checksums=False,
                defer_empty=False):
    """Write ``job``'s remaining items from ``results`` (``ItemResult`` in item order) and
    publish the shard, counting into ``outcome``, with ``task``'s settings (``root``, the folder
    item paths are relative to, ``on_error``, ``flush_every``, ``storage_options``);
    ``advance(input_bytes)`` is called after each item. Returns the writer's ``digests()``
    (None without ``checksums``). ``defer_empty``: a shard all of whose items failed is left
    unpublished in ``job.unpublished`` (``finish_empty`` decides). Each error names the shard
    it was meant for."""
    root, on_error, flush_every = task.root, task.on_error, task.flush_every
    writer = ShardWriter(job.shard.rec, job.shard.idx, task.storage_options, job.progress,
                         checksums, sources_root=root if task.sources else None,
                         journal=task.resumable)
    report = outcome.report
    try:
        for item in job.todo:
            result = _as_listed(item, next(results), root)
            report.add(item.path, result.reasons, result.error, result.action)
            outcome.input_bytes += result.input_bytes
            if result.error:
                outcome.failed += 1
                report.errors[-1].update(shard=file_name(job.shard.rec), index=item.index)
                if on_error == "raise":
                    raise DecodeError(result.error, path=join_url(root, item.path))
                log.warning("%s: skipped: %s", item.path, result.error)
            else:
                writer.write(result.payload, item.index,
                             SourceFile(item.path, result.input_bytes, result.source_sha256))
                outcome.written += 1
                if writer.records % flush_every == 0:
                    writer.flush()
            if advance is not None:
                advance(result.input_bytes)
    except BaseException:
        writer.abandon(keep=task.resumable)
        raise
    if defer_empty and writer.records == 0 and job.todo and not job.progress.records:
        job.unpublished = writer  # every item failed: published later only if the pack is not empty
        return None
    writer.publish()
    job.summary.records, job.summary.bytes = writer.records, writer.offset
    return writer.digests()


def finish_empty(jobs, publish):
    """Publish (``publish=True``) or discard the shards that ``write_shard`` left unpublished
    because every item failed: published as empty shards when the pack has records, so that
    every planned shard exists; discarded when the whole pack is empty."""
    for job in jobs:
        writer = job.unpublished
        if writer is None:
            continue
        job.unpublished = None
        if publish:
            writer.publish()
            job.summary.records, job.summary.bytes = writer.records, writer.offset
        else:
            writer.abandon(keep=False)


def file_name(url):
    """The last part of a path or URL."""
    return url.rsplit("/", 1)[-1]


def publish_labels(partition, summary, storage_options):
    """``OUT.labels.json``: class name -> label, and records/bytes per split and shard (shard
    files named relative to the label file's folder)."""
    url = labels_url(partition.out)
    data = {
        "classes": partition.classes,
        "source": partition.src,
        "splits": {name: {"records": sum(s.records for s in shards),
                          "bytes": sum(s.bytes for s in shards),
                          "shards": [{"rec": file_name(s.rec), "idx": file_name(s.idx),
                                      "records": s.records, "bytes": s.bytes} for s in shards]}
                   for name, shards in summary.splits.items()},
    }
    return publish(url, json.dumps(data, indent=2).encode(), storage_options)


def partition_options(options, src, shards, shard_size):
    """The ``PartitionOptions`` of a pack of ``src`` with ``options`` (a ``PackOptions``) cut into
    ``shards``/``shard_size`` (shuffle defaults to True for folders, False for lists)."""
    shuffle = options.shuffle
    if shuffle is None:
        shuffle = not str(src).lower().endswith(".lst")
    return PartitionOptions(options.image_options(), bool(shuffle), int(options.seed),
                       float(options.val_ratio or 0.0), int(shards or 0), int(shard_size or 0),
                       bool(options.sources))


def adopt_partition(partition, out, resume, saved, storage_options, save=True):
    """Check ``partition`` against the ``saved`` one of an interrupted run (None: there is none),
    or save it (``save``: for a run that can be resumed); returns whether that run is being
    resumed."""
    if saved is not None and saved.fingerprint != partition.fingerprint:
        raise ValueError(
            f"{partition_url(out)} was made for different inputs or options; run the same command "
            f"to resume, or drop --resume to start over")
    if resume and saved is None:
        log.info("--resume: no interrupted run found at %s; starting from scratch", out)
    if saved is None and save:
        save_partition(partition, storage_options)
    return saved is not None


def summarize(out, partition, tasks, outcomes, workers, cluster=None):
    """The ``PackSummary`` of ``outcomes`` (None where a task failed), merged in partition order."""
    summary = PackSummary(str(out), partition.total_items, partition.classes, {}, workers=workers,
                          cluster=cluster)
    report = InputReport()
    for split in partition.splits:
        summary.splits[split.name] = []
    for task, outcome in zip(tasks, outcomes):
        if outcome is None:
            summary.splits[task.split].append(ShardSummary(task.shard.rec, task.shard.idx))
            continue
        summary.splits[task.split].append(outcome.summary)
        summary.written += outcome.written
        summary.failed += outcome.failed
        summary.resumed_records += outcome.resumed_records
        summary.input_bytes += outcome.input_bytes
        report.merge(outcome.report)
    summary.unusual = report.unusual()
    summary.errors = report.errors
    summary.actions = {action: report.actions[action] for action in ACTIONS
                       if report.actions[action]}
    summary.output_bytes = sum(s.bytes for shards in summary.splits.values() for s in shards)
    return summary


def raise_failures(partition, tasks, outcomes, failures):
    """Task errors -> ``ShardTaskError``; else an item that stopped its shard (``on_error=
    "raise"``) -> ``DecodeError`` naming the shard and the item."""
    stopped = [(task, outcome.failure) for task, outcome in zip(tasks, outcomes)
               if outcome is not None and outcome.failure]
    if failures:
        failures = failures + [{"shard": file_name(task.shard.rec),
                                "error": f"{f['path']}: {f['reason']}"} for task, f in stopped]
        raise ShardTaskError(failures)
    if stopped:
        task, failure = stopped[0]
        others = f" ({len(stopped) - 1} other shard(s) stopped too)" if len(stopped) > 1 else ""
        raise DecodeError(f"shard {file_name(task.shard.rec)}: {failure['reason']}{others}",
                          path=join_url(partition.root, failure["path"]))


def discard_empty(tasks, outcomes):
    """Remove the shards written empty (every item failed) by a runner that publishes as it
    goes: called when the whole pack is empty, so that no empty pack is left published."""
    for task, outcome in zip(tasks, outcomes):
        if outcome is None or outcome.summary.kept or outcome.summary.records:
            continue
        for url in (task.shard.rec, task.shard.idx, sums_url_for(task.shard.rec),
                    sources_url_for(task.shard.rec)):
            fs, path = url_to_fs(url, task.storage_options)
            if fs.exists(path):
                fs.rm(path)
