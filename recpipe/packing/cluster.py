"""Packing on a Dask cluster: ``DaskRunner``, one task per planned shard, the same output as
one machine.

``pack_dataset(..., dask=...)`` lists the items and fixes and saves the plan exactly as without
Dask (``OUT.pack-plan.json``), then hands the shard tasks to a ``DaskRunner`` (the
``runners.ShardRunner`` interface), which submits one Dask task per shard. A task
(``pack_shard``) runs in a worker process: with ``resume`` it keeps a shard an earlier run
published, or continues the shard's partial temporary files (local paths); it reads and
processes the shard's items with ``ItemProcessor`` and writes them with the single-machine
path's ``write_shard`` to the shared output URL (which every worker must reach), hashing both
files as it goes. It returns a ``ShardOutcome``: records, bytes, SHA-256s, unusual inputs and
item errors, but never the records themselves.

The runner waits for the tasks (no wait without a deadline); the pack then publishes
``OUT.labels.json`` and, last, ``OUT.manifest.json`` (``manifest``), and removes the plan. When
any shard failed neither is published and the plan stays: shards that completed stay too, and
``resume=True`` keeps them. With ``on_error="raise"`` each shard stops at its first bad image
while the other shards run to completion.
"""

import asyncio
import contextlib
import logging
import os
import uuid

from .._optional import require
from ..errors import DecodeError
from ..io.sources import url_to_fs
from .jobs import default_workers, file_name, open_job, write_shard
from .lifeline import single_thread_opencv
from .partition import split_counts
from .runners import item_results
from .transform import ItemProcessor

__all__ = ["DaskRunner", "absolute_url", "cluster_info", "dask_client", "dask_runner",
           "default_shard_count", "pack_shard", "run_tasks", "SHARDS_PER_THREAD"]

log = logging.getLogger(__name__)

SHARDS_PER_THREAD = 2  # default shards: enough to balance uneven shards over the threads
CONNECT_TIMEOUT = 60.0  # seconds to reach the scheduler and see a first worker
_SLACK = 120.0  # seconds on top of a shard's own deadline (scheduling, transfers)


# --- in the worker ----------------------------------------------------------------------------

def pack_shard(task):
    """Write one shard (a Dask task, run in a worker process); returns a ``ShardOutcome``."""
    job, outcome = open_job(task, checksums=True)
    if job is None:
        return outcome
    processor = ItemProcessor(task.root, task.image, task.storage_options, task.limits,
                              digests=task.sources)
    try:  # the items of a shard task go through the serial runner, in the Dask worker
        with item_results(processor, job.todo, 0, 1, None) as results:
            rec_sha256, idx_sha256 = write_shard(job, outcome, results, task, checksums=True)
    except DecodeError as e:
        outcome.failure = {"path": outcome.report.errors[-1]["path"], "reason": e.reason}
        return outcome
    outcome.digests = (rec_sha256, idx_sha256, _size(task.shard.idx, task.storage_options))
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
        with _local_worker_environment():
            cluster = distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1,
                                               processes=True, dashboard_address="127.0.0.1:0")
        with cluster, _local_worker_environment(), \
                distributed.Client(cluster, timeout=timeout) as client:
            yield client
        return
    with distributed.Client(str(dask), timeout=timeout) as client:
        yield client


# Dask's nannies start workers with MALLOC_TRIM_THRESHOLD_=65536, which also fixes glibc's
# mmap threshold at 128 KiB: every decoded image and read block is then a fresh mmap, zeroed
# page by page. It cost verify's chunk tasks 35% more CPU (BENCHMARKS.md, whole-file jobs on
# a cluster): the workers of a local cluster start with glibc's own (adaptive) settings.
_LOCAL_WORKER_CONFIG = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}


@contextlib.contextmanager
def _local_worker_environment():
    """Dask's settings for the workers of a local cluster; and this process's environment
    restored after (a nanny copies its workers' variables into it when it starts one)."""
    saved = dict(os.environ)
    try:
        with require("dask", "dask").config.set(_LOCAL_WORKER_CONFIG):
            yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def cluster_info(client, timeout=CONNECT_TIMEOUT):
    """Scheduler, workers, threads and dashboard of ``client``'s cluster, once a first worker
    is there."""
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


def absolute_url(url):
    """A local path made absolute (a worker's working folder may differ from ours)."""
    url = str(url)
    return url if "://" in url else os.path.abspath(url)


class DaskRunner:
    """A ``runners.ShardRunner`` writing each shard as one task on a Dask cluster, which
    hashes what it writes (the pack publishes a manifest). Made by ``dask_runner``."""

    publishes_manifest = True

    def __init__(self, client, cluster, item_timeout):
        self.client = client
        self.cluster = cluster  # scheduler, workers, threads, dashboard, shards
        self.cluster["default_shards"] = False
        self.workers = cluster["workers"]
        self.item_timeout = item_timeout

    def default_shards(self, items, val_ratio):
        shards = default_shard_count(self.cluster["threads"], items, val_ratio)
        self.cluster["default_shards"] = True
        log.info("no shards or shard size given: %d shards (%d per worker thread)", shards,
                 SHARDS_PER_THREAD)
        return shards

    def locate(self, url):
        return absolute_url(url)

    def run(self, tasks, progress):
        self.cluster["shards"] = len(tasks)
        return _run_tasks(self.client, tasks, progress, self.item_timeout)


@contextlib.contextmanager
def dask_runner(dask, workers=None, item_timeout=60.0, pass_through=False):
    """A ``DaskRunner`` on ``dask`` (see ``dask_client``), connected and with a first worker;
    the workers of a cluster it starts decode with one OpenCV thread each."""
    with dask_client(dask, workers) as client:
        info = cluster_info(client, CONNECT_TIMEOUT)
        log.info("Dask cluster %s: %d workers, %d threads; dashboard: %s", info["scheduler"],
                 info["workers"], info["threads"], info["dashboard"])
        if workers and str(dask) != "local":
            log.info("workers=%d ignored: the cluster at %s has its own", workers, dask)
        if str(dask) == "local" and not pass_through:
            client.run(single_thread_opencv)
        yield DaskRunner(client, info, item_timeout)


def _run_tasks(client, tasks, progress, item_timeout):
    """Outcomes of ``tasks`` in order (None where a task failed) and the failures. Each wait
    for the next task to finish is bounded by the largest shard's deadline."""
    deadline = item_timeout * max(len(task.items) for task in tasks) + _SLACK
    total = sum(len(task.items) for task in tasks)
    done = {"items": 0, "bytes": 0}

    def finished(i, outcome):
        done["items"] += len(tasks[i].items)
        done["bytes"] += outcome.input_bytes if outcome else 0
        if progress is not None:
            progress(done["items"], total, done["bytes"])

    outcomes, failures = run_tasks(client, pack_shard, tasks, name="pack", deadline=deadline,
                                   on_done=finished, what="shard")
    return outcomes, [{"shard": file_name(tasks[i].shard.rec), "error": error}
                      for i, error in failures]


def run_tasks(client, function, tasks, *, name, deadline, on_done=None, retries=0,
              what="task"):
    """``function(task)`` for each of ``tasks`` as Dask tasks: the results in task order (None
    where a task raised) and the failures ``[(position, "Type: message")]``. Each wait for the
    next task to finish is bounded by ``deadline`` seconds (TimeoutError, naming ``what``);
    ``on_done(position, result)`` is called here as each finishes (None when it failed), in
    task order among those finishing together. Any error here (``on_done`` raising, Ctrl-C)
    cancels the tasks not finished. ``retries``: times Dask runs a task again after it raised
    (only for tasks that may run twice)."""
    distributed = require("distributed", "dask")
    token = uuid.uuid4().hex[:8]
    futures = [client.submit(function, task, key=f"recpipe-{name}-{token}-{i:05d}",
                             retries=retries)
               for i, task in enumerate(tasks)]
    position = {future.key: i for i, future in enumerate(futures)}
    results, failures = [None] * len(tasks), []
    pending = set(futures)
    try:
        while pending:
            try:
                finished, pending = distributed.wait(pending, timeout=deadline,
                                                     return_when="FIRST_COMPLETED")
            except distributed.TimeoutError:  # asyncio's before Python 3.11
                raise TimeoutError(
                    f"no {what} finished within {deadline:.0f}s ({len(pending)} still queued or "
                    f"running): is a worker stuck or gone?") from None
            for future in sorted(finished, key=lambda f: position[f.key]):
                i = position[future.key]
                results[i], error = _collect(future, deadline)
                if error:
                    log.error("%s %d: task failed: %s", what, i, error)
                    failures.append((i, error))
                if on_done is not None:
                    on_done(i, results[i])
    except BaseException:
        client.cancel(list(pending))
        raise
    return results, failures


def _collect(future, deadline):
    """``(result, None)`` of a finished task, or ``(None, "Type: message")`` when it raised."""
    try:
        return future.result(timeout=deadline), None
    except (Exception, asyncio.CancelledError) as e:  # noqa: BLE001 - reported per task
        return None, f"{type(e).__name__}: {e}"
