"""Packing on a Dask cluster: one task per planned shard, the same output as one machine.

This process lists the items and fixes and saves the plan exactly as ``pack_dataset`` does
(``OUT.pack-plan.json``), then submits one Dask task per shard. A task runs in a worker process:
with ``resume`` it keeps a shard an earlier run published, or continues the shard's partial
temporary files (local paths); it reads and processes the shard's items with ``ItemProcessor``
and writes them with the single-machine path's ``ShardWriter`` to the shared output URL (which
every worker must reach), hashing both files as it goes. It returns a ``ShardOutcome``: records,
bytes, SHA-256s, unusual inputs and item errors, but never the records themselves.

This process waits for the tasks (no wait without a deadline), then publishes ``OUT.labels.json``
and, last, ``OUT.manifest.json`` (``manifest``), and removes the plan. When any shard failed
neither is published and the plan stays: shards that completed stay too, and ``resume=True``
keeps them. With ``on_error="raise"`` each shard stops at its first bad image while the other
shards run to completion.
"""

import asyncio
import contextlib
import logging
import os
import time
import uuid
from dataclasses import dataclass
from typing import Optional, Tuple

from .._optional import require
from ..errors import DecodeError
from ..io.sources import url_to_fs
from .inputs import InputLimits
from .items import PackItem, join_url, load_items
from .jobs import (Job, adopt_plan, default_workers, file_name, plan_options, publish_labels,
                   write_shard)
from .lifeline import single_thread_opencv
from .manifest import build_manifest, publish_manifest
from .plan import Shard, build_plan, load_plan, remove_plan, split_counts
from .report import InputReport, PackSummary, ShardSummary
from .runners import item_results
from .shards import Progress, file_digest, is_local, recover_partial, verify_published
from .transform import ImageOptions, ItemProcessor

__all__ = ["ShardTask", "ShardOutcome", "ShardTaskError", "dask_client", "pack_on_dask",
           "pack_shard", "default_shard_count", "SHARDS_PER_THREAD"]

log = logging.getLogger(__name__)

SHARDS_PER_THREAD = 2  # default shards: enough to balance uneven shards over the threads
CONNECT_TIMEOUT = 60.0  # seconds to reach the scheduler and see a first worker
_SLACK = 120.0  # seconds on top of a shard's own deadline (scheduling, transfers)


class ShardTaskError(RuntimeError):
    """Shard tasks of a Dask pack failed; ``failures``: ``[{"shard", "error"}, ...]``."""

    def __init__(self, failures):
        self.failures = list(failures)
        shown = "; ".join(f"{f['shard']}: {f['error']}" for f in self.failures[:5])
        more = f" (and {len(self.failures) - 5} more)" if len(self.failures) > 5 else ""
        super().__init__(f"{len(self.failures)} shard task(s) failed: {shown}{more}; "
                         f"completed shards are kept, run again with --resume")


@dataclass(frozen=True)
class ShardTask:
    """Everything a worker needs to write one shard (small: item paths, not images)."""

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


@dataclass
class ShardOutcome:
    """What a task did. ``digests``: ``(rec_sha256, idx_sha256, idx_bytes)``; ``failure``:
    ``{"path", "reason"}`` of the item that stopped the shard (``on_error="raise"``)."""

    summary: ShardSummary
    report: InputReport
    written: int = 0
    failed: int = 0
    resumed_records: int = 0
    input_bytes: int = 0
    digests: Optional[tuple] = None
    failure: Optional[dict] = None


# --- in the worker ----------------------------------------------------------------------------

def _published_digests(shard, storage_options):
    rec_sha256, _ = file_digest(shard.rec, storage_options)
    idx_sha256, idx_bytes = file_digest(shard.idx, storage_options)
    return rec_sha256, idx_sha256, idx_bytes


def _keep_published(task, outcome):
    """Keep the shard an earlier run published, if it holds what the plan says."""
    keys = [item.index for item in task.items]
    done = verify_published(task.shard.rec, task.shard.idx, keys, task.storage_options)
    if done is None:
        return False
    outcome.summary.records, outcome.summary.bytes = done
    outcome.summary.kept = True
    outcome.resumed_records = outcome.summary.records
    outcome.digests = _published_digests(task.shard, task.storage_options)
    return True


def pack_shard(task):
    """Write one shard (a Dask task, run in a worker process); returns a ``ShardOutcome``."""
    shard = task.shard
    outcome = ShardOutcome(ShardSummary(shard.rec, shard.idx), InputReport())
    if task.resume and _keep_published(task, outcome):
        return outcome
    progress = Progress()
    if task.resume and is_local(shard.rec, task.storage_options):
        progress = recover_partial(shard.rec, shard.idx, [item.index for item in task.items])
        outcome.resumed_records = progress.records
    job = Job(shard, task.items, progress, outcome.summary)
    processor = ItemProcessor(task.root, task.image, task.storage_options, task.limits)
    try:  # the items of a shard task go through the serial runner, in the Dask worker
        with item_results(processor, job.todo, 0, 1, None) as results:
            rec_sha256, idx_sha256 = write_shard(
                job, results, root=task.root, report=outcome.report, summary=outcome,
                on_error=task.on_error, flush_every=task.flush_every, progress=None,
                total=len(job.todo), storage_options=task.storage_options, checksums=True)
    except DecodeError as e:
        outcome.failure = {"path": outcome.report.errors[-1]["path"], "reason": e.reason}
        return outcome
    finally:
        for error in outcome.report.errors:  # say which shard each failed item was meant for
            error["shard"] = file_name(shard.rec)
    outcome.digests = (rec_sha256, idx_sha256, _size(shard.idx, task.storage_options))
    return outcome


def _size(url, storage_options):
    fs, path = url_to_fs(url, storage_options)
    return int(fs.size(path))


# --- in this process --------------------------------------------------------------------------

@contextlib.contextmanager
def dask_client(dask, workers=None, timeout=CONNECT_TIMEOUT):
    """A ``distributed.Client`` for ``dask``: ``"local"`` starts a ``LocalCluster`` of
    ``workers`` processes (default: one per core) and closes it after; another string is a
    scheduler address; a ``Client`` is used as it is (and not closed)."""
    distributed = require("distributed", "dask")
    if isinstance(dask, distributed.Client):
        yield dask
        return
    if str(dask) == "local":
        n_workers = workers or default_workers()
        log.info("starting a local Dask cluster of %d worker processes", n_workers)
        # the scheduler's HTTP server (the dashboard, with bokeh) on a free local port: its
        # default 8787 may be taken by another cluster
        with distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1,
                                      processes=True,
                                      dashboard_address="127.0.0.1:0") as cluster:
            with distributed.Client(cluster, timeout=timeout) as client:
                yield client
        return
    with distributed.Client(str(dask), timeout=timeout) as client:
        yield client


def _cluster_info(client, timeout):
    client.wait_for_workers(1, timeout=timeout)
    threads = client.nthreads()
    return {"scheduler": client.scheduler_info().get("address"), "workers": len(threads),
            "threads": sum(threads.values()), "dashboard": _dashboard_link(client)}


def _dashboard_link(client):
    try:
        return client.dashboard_link
    except (KeyError, AttributeError, ValueError):  # a scheduler without a dashboard
        return None


def default_shard_count(threads, items, val_ratio=0.0):
    """``SHARDS_PER_THREAD`` shards per worker thread, but no empty shard in any split."""
    smallest = min(n for n in split_counts(items, val_ratio) if n) if items else 1
    return max(1, min(SHARDS_PER_THREAD * threads, smallest))


def _absolute(url):
    """A local path made absolute (a worker's working folder may differ from ours)."""
    url = str(url)
    return url if "://" in url else os.path.abspath(url)


def _tasks(plan, storage_options, on_error, resume, flush_every, limits):
    return [ShardTask(split.name,
                      Shard(_absolute(shard.rec), _absolute(shard.idx), shard.start, shard.stop),
                      split.items[shard.start:shard.stop], _absolute(plan.root),
                      plan.options.image, storage_options, on_error, resume, flush_every, limits)
            for split in plan.splits for shard in split.shards]


def _collect(future, task, deadline):
    """``(outcome, None)`` of a finished task, or ``(None, failure)`` when it raised."""
    try:
        return future.result(timeout=deadline), None
    except (Exception, asyncio.CancelledError) as e:  # noqa: BLE001 - reported per shard
        log.error("shard %s: task failed: %s: %s", task.shard.rec, type(e).__name__, e)
        return None, {"shard": file_name(task.shard.rec), "error": f"{type(e).__name__}: {e}"}


def _run_tasks(client, tasks, progress, item_timeout):
    """Outcomes of ``tasks`` in order (None where a task failed) and the failures. Each wait
    for the next task to finish is bounded by the largest shard's deadline."""
    distributed = require("distributed", "dask")
    token = uuid.uuid4().hex[:8]
    futures = [client.submit(pack_shard, task, key=f"recpipe-pack-{token}-{i:05d}", retries=0)
               for i, task in enumerate(tasks)]
    position = {future.key: i for i, future in enumerate(futures)}
    deadline = item_timeout * max(len(task.items) for task in tasks) + _SLACK
    total = sum(len(task.items) for task in tasks)
    outcomes, failures = [None] * len(tasks), []
    pending, done_items, input_bytes = set(futures), 0, 0
    try:
        while pending:
            try:
                finished, pending = distributed.wait(pending, timeout=deadline,
                                                     return_when="FIRST_COMPLETED")
            except distributed.TimeoutError:  # asyncio's before Python 3.11
                raise TimeoutError(
                    f"no shard finished within {deadline:.0f}s ({len(pending)} still queued or "
                    f"running): is a worker stuck or gone?") from None
            for future in sorted(finished, key=lambda f: position[f.key]):
                i = position[future.key]
                outcomes[i], failure = _collect(future, tasks[i], deadline)
                if failure:
                    failures.append(failure)
                done_items += len(tasks[i].items)
                input_bytes += outcomes[i].input_bytes if outcomes[i] else 0
                if progress is not None:
                    progress(done_items, total, input_bytes)
    except BaseException:
        client.cancel(list(pending))
        raise
    return outcomes, failures


def _summarize(out, plan, tasks, outcomes, info):
    summary = PackSummary(str(out), plan.total_items, plan.classes, {},
                          workers=info["workers"], cluster=info)
    report = InputReport()
    for split in plan.splits:
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
    summary.output_bytes = sum(s.bytes for shards in summary.splits.values() for s in shards)
    return summary


def _raise_failures(plan, tasks, outcomes, failures):
    """Task errors -> ``ShardTaskError``; else an item that stopped its shard (``on_error=
    "raise"``) -> ``DecodeError`` naming the shard and the item."""
    stopped = [(task, outcome.failure) for task, outcome in zip(tasks, outcomes)
               if outcome is not None and outcome.failure]
    if failures:
        failures += [{"shard": file_name(task.shard.rec), "error": f"{f['path']}: {f['reason']}"}
                     for task, f in stopped]
        raise ShardTaskError(failures)
    if stopped:
        task, failure = stopped[0]
        others = f" ({len(stopped) - 1} other shard(s) stopped too)" if len(stopped) > 1 else ""
        raise DecodeError(f"shard {file_name(task.shard.rec)}: {failure['reason']}{others}",
                          path=join_url(plan.root, failure["path"]))


def _plan_on_cluster(src, out, root, image, shuffle, seed, val_ratio, shards, shard_size,
                     extensions, resume, storage_options, threads):
    """The plan (as ``pack_dataset`` makes it) and whether it is resumed; without ``shards``
    and ``shard_size``, those of the interrupted run being resumed, else
    ``default_shard_count``. Returns ``(plan, resume, chose_shards)``."""
    saved = load_plan(out, storage_options) if resume else None
    chose = not shards and not shard_size
    if chose and saved is not None:
        shards, shard_size = saved.options.shards, saved.options.shard_size
    items, classes, item_root = load_items(src, root, extensions=extensions,
                                           need_sizes=bool(shard_size),
                                           storage_options=storage_options)
    if not shards and not shard_size:
        shards = default_shard_count(threads, len(items), float(val_ratio or 0.0))
        log.info("no shards or shard size given: %d shards (%d per worker thread)", shards,
                 SHARDS_PER_THREAD)
    options = plan_options(image, src, shuffle, seed, val_ratio, shards, shard_size)
    plan = build_plan(src, item_root, out, items, classes, options)
    return plan, adopt_plan(plan, out, resume, saved, storage_options), chose


def pack_on_dask(dask, src, out, *, root, image, shuffle, seed, val_ratio, shards, shard_size,
                 workers, on_error, resume, extensions, storage_options, progress, flush_every,
                 item_timeout, started=None, limits=InputLimits()):
    """``pack_dataset(..., dask=...)``: the plan's shards written by Dask tasks, then the label
    map and ``OUT.manifest.json``. ``progress(done, total, input_bytes)`` is called as each
    shard finishes. Returns a ``PackSummary`` with ``manifest_file`` and ``cluster`` set."""
    from .. import __version__

    started = time.perf_counter() if started is None else started
    with dask_client(dask, workers) as client:
        info = _cluster_info(client, CONNECT_TIMEOUT)
        log.info("Dask cluster %s: %d workers, %d threads; dashboard: %s", info["scheduler"],
                 info["workers"], info["threads"], info["dashboard"])
        if workers and str(dask) != "local":
            log.info("workers=%d ignored: the cluster at %s has its own", workers, dask)
        plan, resume, chose = _plan_on_cluster(
            src, out, root, image, shuffle, seed, val_ratio, shards, shard_size, extensions,
            resume, storage_options, info["threads"])
        info["shards"] = sum(len(split.shards) for split in plan.splits)
        info["default_shards"] = chose
        if str(dask) == "local" and not image.pass_through:
            client.run(single_thread_opencv)  # on the workers of a cluster we started
        tasks = _tasks(plan, storage_options, on_error, resume, flush_every, limits)
        outcomes, failures = _run_tasks(client, tasks, progress, item_timeout)
    _raise_failures(plan, tasks, outcomes, failures)
    summary = _summarize(out, plan, tasks, outcomes, info)
    summary.labels_file = publish_labels(plan, summary, storage_options)
    digests = {outcome.summary.rec: outcome.digests for outcome in outcomes}
    summary.manifest_file = publish_manifest(
        out, build_manifest(plan, summary.splits, digests, __version__), storage_options)
    remove_plan(out, storage_options)
    summary.seconds = time.perf_counter() - started
    return summary
