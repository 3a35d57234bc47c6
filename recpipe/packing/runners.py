"""How the items of a pack are turned into results: in this process, or in worker processes.

``item_results(processor, items, workers, chunksize, item_timeout)`` is the one interface of both
runners: a context manager giving an iterator of ``ItemResult`` in item order. ``workers=0``
runs ``processor`` here; otherwise chunks of items go to a process pool (``fork`` when it is
safe, else ``forkserver``/``spawn``), at most ``4 * workers`` chunks in flight (bounded memory),
each result waited for with a deadline; the workers are tied to this process
(``lifeline``) and stopped on any error. (A Dask pack, ``cluster``, runs whole shards as tasks
instead, on workers that write their own files.)
"""

import collections
import contextlib
import multiprocessing
import os
import sys
import threading

from .lifeline import init_worker

__all__ = ["item_results", "mp_context", "ordered_results", "stop_workers"]


_processor = None


def _init_worker(processor, parent_pid):
    global _processor
    init_worker(parent_pid, opencv_threads=not processor.options.pass_through)
    _processor = processor


def _work(chunk):
    return [_processor(item) for item in chunk]


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
    pending = collections.deque()
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


# --- writing ----------------------------------------------------------------------------------
