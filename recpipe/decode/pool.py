"""``WorkerPool``: the one owner of the decode threads, resizable while it runs.

Threads take tasks from a queue and call ``work(task, clock)``. ``resize(n)`` starts threads at
once; surplus threads retire after their current task. ``close()`` stops and joins every thread
within a deadline, and returns then even when one is still inside a long task (a decode cannot be
interrupted): that thread ends after its task, and ``shut_down`` closes the file it reads only
then, from a helper thread. Threads are daemons only as a safety net for a loader that is never
closed (they would otherwise keep the interpreter alive); ``close()`` still joins them.
"""

import logging
import queue
import threading
import time
import weakref

from .stats import PipelineStats

__all__ = ["WorkerPool", "shut_down", "weak_method"]

log = logging.getLogger(__name__)
_POLL_SECONDS = 0.05


class WorkerPool:
    def __init__(self, work, threads, *, stats=None, name="recpipe-decode"):
        if threads < 1:
            raise ValueError(f"threads={threads} must be at least 1")
        self._work = work
        self._stats = stats or PipelineStats()
        self._name = name
        # queue.Queue, not SimpleQueue: a SimpleQueue.get(timeout=...) shared by several
        # threads was seen never to return (CPython 3.11), leaving a thread that close() cannot join
        self._tasks = queue.Queue()
        self._stop = threading.Event()
        self._lock = threading.RLock()  # a finalizer may close the pool from one of its threads
        self._target = 0
        self._live = []
        self._started = []
        self._serial = 0
        self.error = None
        try:
            self.resize(threads)
        except BaseException:  # e.g. the system refuses the 2000th thread: stop the others
            self.close()
            raise

    @property
    def threads(self):
        """The number of threads the pool is running towards."""
        return self._target

    @property
    def closed(self):
        """True once ``close()`` was called."""
        return self._stop.is_set()

    def submit(self, task):
        self._tasks.put(task)

    def resize(self, threads):
        """Run ``threads`` worker threads from now on."""
        if threads < 1:
            raise ValueError(f"threads={threads} must be at least 1")
        if self._stop.is_set():
            raise RuntimeError("the worker pool is closed")
        with self._lock:
            self._target = threads
            self._started = [t for t in self._started if t.is_alive()]
            while len(self._live) < threads:
                self._serial += 1
                thread_name = f"{self._name}-{self._serial}"
                thread = threading.Thread(target=self._run, name=thread_name,
                                          args=(self._stats.clock(thread_name),), daemon=True)
                thread.start()  # may fail (thread limit): then it is not ours to join
                self._live.append(thread)
                self._started.append(thread)
        log.debug("worker pool resized to %d threads", threads)

    def _should_retire(self):
        if len(self._live) <= self._target:
            return False
        with self._lock:
            if len(self._live) > self._target:
                self._live.remove(threading.current_thread())
                return True
        return False

    def _run(self, clock):
        while not self._stop.is_set() and not self._should_retire():
            try:
                task = self._tasks.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                continue
            cpu_start = time.thread_time()
            try:
                self._work(task, clock)
            except BaseException as exc:  # the work function reports its own errors; this is a bug
                log.exception("decode worker failed")
                self.error = exc
                return
            finally:
                clock.cpu_seconds += time.thread_time() - cpu_start

    def close(self, timeout=10.0):
        """Stop every thread and join it for at most ``timeout`` seconds; returns the threads
        still inside a task then (logged; each ends when its task returns)."""
        self._stop.set()
        with self._lock:
            threads = list(self._started)
            self._live.clear()
        stuck = []
        deadline = time.monotonic() + timeout
        for thread in threads:
            if thread is threading.current_thread():
                continue  # closed from one of its own threads: it ends when this task returns
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                stuck.append(thread)
        if stuck:
            log.warning("decode threads still busy %s s after close(): %s; they stop after "
                        "their current task", timeout, [t.name for t in stuck])
        return stuck


def weak_method(method):
    """A ``work`` function calling bound ``method`` through a weak reference to its object,
    so that the pool's threads do not keep that object alive. Calls after the object is gone
    do nothing."""
    ref = weakref.WeakMethod(method)

    def work(task, clock):
        bound = ref()
        if bound is not None:
            bound(task, clock)

    return work


def shut_down(pool, closable, timeout=10.0):
    """Close ``pool`` (when not None) then ``closable``, within ``timeout``: when a thread is
    still inside a task then, ``closable`` is closed by a helper thread once that task ends
    (the task may still be reading it)."""
    stuck = []
    try:
        if pool is not None:
            stuck = pool.close(timeout)
    finally:
        if not stuck:
            closable.close()
    if stuck:
        threading.Thread(target=_close_after, args=(stuck, closable), daemon=True,
                         name="recpipe-close-after").start()


def _close_after(threads, closable):
    for thread in threads:
        thread.join()
    closable.close()
