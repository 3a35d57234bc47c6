"""Runners: what writes the shards of a pack, behind one interface.

A ``ShardRunner`` turns the pack's ``ShardTask``s (``jobs``) into ``ShardOutcome``s; the pack
itself (``packer.pack_dataset``) plans, runs and publishes the same way whatever the runner:

- ``LocalRunner`` (here): this process writes every shard, the items computed in this process
  (``workers=0``) or in worker processes;
- ``cluster.DaskRunner``: one Dask task per shard, each writing its own files.

Item level: ``item_results(processor, items, workers, chunksize, item_timeout)`` is a context
manager giving an iterator of ``ItemResult`` in item order. ``workers=0`` runs ``processor``
here; otherwise chunks of items go to a process pool (``fork`` when it is safe, else
``forkserver``/``spawn``), at most ``4 * workers`` chunks in flight (bounded memory), each
result waited for with a deadline; the workers are tied to this process (``lifeline``) and
stopped on any error. A Dask shard task runs its items through it too, with ``workers=0``.
"""

import collections
import contextlib
import multiprocessing
import os
import sys
import threading
from typing import Deque, List, Optional, Protocol, Sequence, Tuple

from .jobs import ShardOutcome, ShardTask, finish_empty, open_job, write_shard
from .lifeline import init_worker
from .transform import ItemProcessor

__all__ = ["LocalRunner", "ShardRunner", "item_results", "mp_context", "ordered_results",
           "stop_workers"]


_processor: Optional[ItemProcessor] = None  # this worker process's, set by _init_worker


def _init_worker(processor, parent_pid):
    global _processor
    init_worker(parent_pid, opencv_threads=not processor.options.pass_through)
    _processor = processor


def _work(chunk):
    processor = _processor
    if processor is None:
        raise RuntimeError("pack worker used before its initializer ran")
    return [processor(item) for item in chunk]


def _chunks(items, size):
    chunk = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def mp_context(pass_through):
    """``fork`` (cheapest) when it is safe: no other thread in this process, and no OpenCV
    here that may have started its thread pool (a forked child using it deadlocks). Otherwise
    ``forkserver`` (a clean process forks the workers), or ``spawn`` where there is neither."""
    methods = multiprocessing.get_all_start_methods()
    if ("fork" in methods and threading.active_count() == 1
            and (pass_through or "cv2" not in sys.modules)):
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__])
        return context
    return multiprocessing.get_context("spawn")


def _chunk_results(future, seconds):
    import concurrent.futures.process

    try:
        return future.result(timeout=seconds)
    except concurrent.futures.TimeoutError:
        raise TimeoutError(f"no result from a worker process within {seconds:.0f}s "
                           f"(stuck on an image?)") from None
    except concurrent.futures.process.BrokenProcessPool as e:
        raise RuntimeError(f"a worker process died ({e}); if it ran out of memory, "
                           f"use fewer --workers") from e


def ordered_results(executor, work, chunks, window, seconds):
    """``work(chunk)`` results of ``chunks``, flattened in order, with at most ``window``
    chunks in flight (bounded memory) and each waited for at most ``seconds``."""
    pending: Deque[tuple] = collections.deque()
    for chunk in chunks:
        pending.append(executor.submit(work, chunk))
        if len(pending) >= window:
            yield from _chunk_results(pending.popleft(), seconds)
    while pending:
        yield from _chunk_results(pending.popleft(), seconds)


def stop_workers(executor):
    """Stop now: cancel queued chunks and terminate the workers (which may be stuck)."""
    # ProcessPoolExecutor has no public terminate before Python 3.14
    processes = list((getattr(executor, "_processes", None) or {}).values())
    executor.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=10)
    executor.shutdown(wait=True)


@contextlib.contextmanager
def item_results(processor, items, workers, chunksize, item_timeout):
    """Iterator of ``ItemResult`` in item order, computed in ``workers`` processes (0: here)."""
    if workers <= 0:
        yield map(processor, items)
        return
    import concurrent.futures  # only here: pass-through in this process does not need it

    executor = concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=mp_context(processor.options.pass_through),
        initializer=_init_worker, initargs=(processor, os.getpid()))
    try:
        yield ordered_results(executor, _work, _chunks(items, chunksize), 4 * workers,
                               item_timeout * chunksize)
    except BaseException:
        stop_workers(executor)
        raise
    executor.shutdown(wait=True)



# --- shard runners ----------------------------------------------------------------------------

class ShardRunner(Protocol):
    """Writes the shards of a pack. ``workers``: reported in ``PackSummary.workers``;
    ``cluster``: what ``PackSummary.cluster`` says of it (None: this machine);
    ``publishes_manifest``: whether the pack publishes ``OUT.manifest.json`` (the runner then
    hashes the shards it writes)."""

    workers: int
    cluster: Optional[dict]
    publishes_manifest: bool

    def default_shards(self, items: int, val_ratio: float) -> int:
        """Shards per split when the caller gives neither a count nor a size (0: one file)."""

    def locate(self, url: str) -> str:
        """``url`` as the runner's workers must name it."""

    def run(self, tasks: Sequence[ShardTask], progress) -> Tuple[List[Optional[ShardOutcome]],
                                                                 List[dict]]:
        """Outcomes in task order (None where a task failed) and the failures
        (``[{"shard", "error"}]``). ``progress(done_items, total_items, input_bytes)``."""


class _Progress:
    """Items done over all shards, for a ``progress(done, total, input_bytes)`` callback."""

    def __init__(self, callback, total):
        self.callback, self.total, self.done, self.input_bytes = callback, total, 0, 0

    def __call__(self, input_bytes):
        self.done += 1
        self.input_bytes += input_bytes
        self.callback(self.done, self.total, self.input_bytes)


class LocalRunner:
    """This process writes every shard, in plan order, from one stream of item results
    computed by ``workers`` processes (0: here). An item error with ``on_error="raise"``
    stops the pack at once. A shard all of whose items failed is published empty when the
    pack has records (every planned shard exists), else discarded."""

    cluster = None
    publishes_manifest = False

    def __init__(self, workers, chunksize=None, item_timeout=60.0):
        self.workers = workers
        self.chunksize = chunksize
        self.item_timeout = item_timeout

    def default_shards(self, items, val_ratio):
        return 0

    def locate(self, url):
        return str(url)

    def run(self, tasks, progress):
        opened = [open_job(task) for task in tasks]
        outcomes = [outcome for _, outcome in opened]
        live = [(task, job, outcome) for task, (job, outcome) in zip(tasks, opened) if job]
        todo = [item for _, job, _ in live for item in job.todo]
        self.workers = min(self.workers, len(todo))
        chunksize = self.chunksize or max(1, min(16, len(todo) // max(1, 4 * self.workers)))
        advance = _Progress(progress, len(todo)) if progress is not None else None
        jobs = [job for _, job, _ in live]
        if not live:
            return outcomes, []
        first = live[0][0]
        processor = ItemProcessor(first.root, first.image, first.storage_options, first.limits,
                                  digests=first.sources)
        try:
            with item_results(processor, iter(todo), self.workers, chunksize,
                              self.item_timeout) as results:
                for task, job, outcome in live:
                    write_shard(job, outcome, results, task, advance=advance,
                                defer_empty=True)
        except BaseException:
            finish_empty(jobs, publish=False)
            raise
        finish_empty(jobs, publish=any(o.written or o.resumed_records for o in outcomes))
        return outcomes, []
