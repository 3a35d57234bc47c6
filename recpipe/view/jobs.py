"""Whole-file jobs (the ``inspect`` summary, ``verify``) in a child process the server owns.

A summary or a verify reads every byte of the file: on a 17M-record file that is minutes, and
``inspect`` keeps a few arrays per record. Run in a child process (``multiprocessing``'s spawn
context: a fresh interpreter, nothing inherited but the arguments) they cost the server neither
memory nor the GIL, they can be stopped at any moment (``terminate``, then ``kill``), and their
arguments (storage options with credentials among them) travel through a pipe, not the command
line. The child reports bytes read through a shared counter and its result (any picklable
value) or its error through the pipe. ``Job.close`` stops and reaps the child: no process
outlives the server.
"""

import logging
import multiprocessing
import threading
import time
from typing import Any, Callable, Optional

__all__ = ["Job", "verify_job"]

log = logging.getLogger(__name__)

_POLL = 0.2


def _child(target, kwargs, counter, sender):
    """Runs in the child: ``target(progress=..., **kwargs)``; result or error to the pipe."""
    def progress(bytes_read):
        with counter.get_lock():
            counter.value += int(bytes_read)

    try:
        result = ("ok", target(progress=progress, **kwargs))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which shows it
        result = ("error", f"{type(exc).__name__}: {exc}")
    try:
        sender.send(result)
    finally:
        sender.close()


def verify_job(url, storage_options, decode, progress):
    """``recpipe verify`` of ``url`` (``decode``: every image too, with the loaders' strict
    default decoder) as a JSON-able dict (``VerifyReport.to_dict``)."""
    from ..decode.decoders import get_decoder
    from ..io.health.verify import verify

    decoder = get_decoder("auto") if decode else None
    return verify(url, None, decoder=decoder, storage_options=storage_options,
                  progress=progress).to_dict()


class Job:
    """One run of ``target(progress=..., **kwargs)`` in a child process, started by ``start``;
    ``state()`` for the page, ``result`` once done, ``close`` stops it."""

    def __init__(self, name: str, target: Callable[..., Any], kwargs: dict,
                 total_bytes: Optional[int] = None):
        self.name = name
        self.target = target
        self.kwargs = kwargs
        self.total_bytes = total_bytes
        self._lock = threading.Lock()
        self._context = multiprocessing.get_context("spawn")
        self._process = None
        self._receiver = None
        self._counter = None
        self._started = None
        self._ended = None
        self.result: Any = None
        self.error: Optional[str] = None

    def start(self, **changes):
        """Start the child (again, after an earlier run ended), with ``changes`` to the
        keyword arguments; nothing when it is running."""
        with self._lock:
            if self._process is not None and self._ended is None:
                return False
            self._reap()
            self.kwargs = {**self.kwargs, **changes}
            receiver, sender = self._context.Pipe(duplex=False)
            counter = self._context.Value("q", 0)
            process = self._context.Process(target=_child, name=f"recpipe-view-{self.name}",
                                            args=(self.target, self.kwargs, counter, sender),
                                            daemon=True)
            process.start()
            sender.close()
            self._process, self._receiver, self._counter = process, receiver, counter
            self._started, self._ended = time.monotonic(), None
            self.result = self.error = None
            return True

    def _poll(self):
        """Collect the child's result when it has one (under the lock)."""
        process = self._process
        if process is None or self._ended is not None:
            return
        if self._receiver.poll():
            try:
                status, value = self._receiver.recv()
            except (EOFError, OSError):
                status, value = "error", "the job ended without a result"
            if status == "ok":
                self.result = value
            else:
                self.error = value
            self._ended = time.monotonic()
            self._reap()
        elif not process.is_alive():
            self.error = f"the job's process ended with exit code {process.exitcode}"
            self._ended = time.monotonic()
            self._reap()

    def state(self) -> dict:
        with self._lock:
            self._poll()
            if self._started is None:
                return {"state": "idle", "total_bytes": self.total_bytes}
            end = self._ended if self._ended is not None else time.monotonic()
            out = {"seconds": round(end - self._started, 1), "total_bytes": self.total_bytes,
                   "bytes_read": self._counter.value if self._counter is not None else None,
                   "options": {k: v for k, v in self.kwargs.items()
                               if k not in ("url", "storage_options")}}
            if self._ended is None:
                return {"state": "running", **out}
            if self.error is not None:
                return {"state": "failed", "error": self.error, **out}
            return {"state": "done", "result": self.result, **out}

    def _reap(self):
        process, self._process = self._process, None
        if process is None:
            return
        if process.is_alive():
            process.terminate()
            process.join(5)
            if process.is_alive():
                process.kill()
        process.join(5)
        if self._receiver is not None:
            self._receiver.close()
            self._receiver = None

    def close(self):
        with self._lock:
            if self._process is not None and self._ended is None:
                self.error = "stopped: the server closed"
                self._ended = time.monotonic()
            self._reap()
