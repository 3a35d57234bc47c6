"""Jobs of a pack, shared by every runner (this process, worker processes, a Dask cluster).

A pack is planned (``plan``) as shards; each shard still to write is a ``Job``;
``write_shard`` writes a job from a stream of ``ItemResult`` and publishes its ``.rec``/``.idx``
as one commit; ``publish_labels`` writes ``OUT.labels.json``. ``packer`` runs the items in this
process or in worker processes, ``cluster`` as Dask tasks; both use these.
"""

import json
import logging
import os

from ..errors import DecodeError
from ..io.atomic import publish
from .items import join_url
from .plan import PlanOptions, labels_url, plan_url, save_plan
from .report import ShardSummary
from .shards import Progress, ShardWriter, is_local, recover_partial, verify_published

__all__ = ["Job", "adopt_plan", "default_workers", "file_name", "finish_empty", "plan_options",
           "prepare_jobs", "publish_labels", "write_shard"]

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


class Job:
    """A shard still to write: its plan, its items and where a previous run stopped."""

    def __init__(self, shard, items, progress, summary):
        self.shard = shard
        self.items = items
        self.progress = progress
        self.summary = summary
        self.unpublished = None  # the writer of a shard whose items all failed (write_shard)

    @property
    def todo(self):
        return self.items[self.progress.position:]


def prepare_jobs(plan, summary, resume, storage_options):
    """The ``Job`` of every shard of ``plan`` still to write (published ones, when resuming,
    are checked and counted in ``summary``)."""
    jobs = []
    for split in plan.splits:
        shard_summaries = summary.splits.setdefault(split.name, [])
        for shard in split.shards:
            items = split.items[shard.start:shard.stop]
            keys = [item.index for item in items]
            shard_summary = ShardSummary(shard.rec, shard.idx)
            shard_summaries.append(shard_summary)
            done = verify_published(shard.rec, shard.idx, keys, storage_options) if resume else None
            if done is not None:
                shard_summary.records, shard_summary.bytes = done
                shard_summary.kept = True
                summary.resumed_records += shard_summary.records
                continue
            progress = Progress()
            if resume and is_local(shard.rec, storage_options):
                progress = recover_partial(shard.rec, shard.idx, keys)
                summary.resumed_records += progress.records
            jobs.append(Job(shard, items, progress, shard_summary))
    return jobs


def write_shard(job, results, *, root, report, summary, on_error, flush_every, progress, total,
                storage_options, checksums=False, defer_empty=False):
    """Write ``job``'s remaining items from ``results`` and publish the shard; ``summary`` is
    anything with ``written``/``failed``/``input_bytes`` counters. Returns the writer's
    ``digests()`` (None without ``checksums``). ``defer_empty``: a shard all of whose items
    failed is left unpublished in ``job.unpublished`` (``finish_empty`` decides)."""
    writer = ShardWriter(job.shard.rec, job.shard.idx, storage_options, job.progress, checksums)
    try:
        for item in job.todo:
            result = next(results)
            report.add(item.path, result.reasons, result.error)
            summary.input_bytes += result.input_bytes
            if result.error:
                summary.failed += 1
                if on_error == "raise":
                    raise DecodeError(result.error, path=join_url(root, item.path))
                log.warning("%s: skipped: %s", item.path, result.error)
            else:
                writer.write(result.payload, item.index)
                summary.written += 1
                if writer.records % flush_every == 0:
                    writer.flush()
            if progress is not None:
                progress(summary.written + summary.failed, total, summary.input_bytes)
    except BaseException:
        writer.abandon(keep=True)
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


def publish_labels(plan, summary, storage_options):
    """``OUT.labels.json``: class name -> label, and records/bytes per split and shard (shard
    files named relative to the label file's folder)."""
    url = labels_url(plan.out)
    data = {
        "classes": plan.classes,
        "source": plan.src,
        "splits": {name: {"records": sum(s.records for s in shards),
                          "bytes": sum(s.bytes for s in shards),
                          "shards": [{"rec": file_name(s.rec), "idx": file_name(s.idx),
                                      "records": s.records, "bytes": s.bytes} for s in shards]}
                   for name, shards in summary.splits.items()},
    }
    return publish(url, json.dumps(data, indent=2).encode(), storage_options)


def plan_options(image, src, shuffle, seed, val_ratio, shards, shard_size):
    """The ``PlanOptions`` of a pack (shuffle defaults to True for folders, False for lists)."""
    if shuffle is None:
        shuffle = not str(src).lower().endswith(".lst")
    return PlanOptions(image, bool(shuffle), int(seed), float(val_ratio or 0.0),
                       int(shards or 0), int(shard_size or 0))


def adopt_plan(plan, out, resume, saved, storage_options):
    """Check ``plan`` against the ``saved`` one of an interrupted run (None: there is none),
    or save it; returns whether that run is being resumed."""
    if saved is not None and saved.fingerprint != plan.fingerprint:
        raise ValueError(
            f"{plan_url(out)} was made for different inputs or options; run the same command "
            f"to resume, or drop --resume to start over")
    if resume and saved is None:
        log.info("--resume: no interrupted run found at %s; starting from scratch", out)
    if saved is None:
        save_plan(plan, storage_options)
    return saved is not None
