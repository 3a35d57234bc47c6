"""Pipeline statistics: per-stage time from the workers, consumer wait time, delivered images.

Each worker thread owns a ``StageClock`` and only adds to it, so the hot path takes no lock;
``PipelineStats.snapshot()`` sums them. Optional tracing records every stage span for a Chrome
trace (chrome://tracing or https://ui.perfetto.dev).
"""

import atexit
import json
import logging
import threading
import time

from ..system.env import trace_path

__all__ = ["MAX_TRACE_SPANS", "STAGES", "StageClock", "PipelineStats", "traced",
           "write_chrome_trace"]

log = logging.getLogger(__name__)

STAGES = ("read", "decode", "augment", "batch")


MAX_TRACE_SPANS = 1_000_000  # per loader: a trace of a whole run stays bounded


class StageClock:
    """Seconds spent per stage by one thread (and optional trace spans)."""

    def __init__(self, name, trace=None):
        self.name = name
        self.seconds = dict.fromkeys(STAGES, 0.0)
        self.samples = 0
        self.cpu_seconds = 0.0  # thread CPU time spent in tasks (set by WorkerPool)
        self.released_cpu_seconds = 0.0  # of which in C calls that release the GIL
        self.trace = trace

    def released(self, cpu_start, cpu_end):
        """Thread CPU time (``time.thread_time``) spent in a C call that releases the GIL."""
        self.released_cpu_seconds += cpu_end - cpu_start

    def add(self, stage, start, end):
        self.seconds[stage] += end - start
        if self.trace is not None and len(self.trace) < MAX_TRACE_SPANS:  # bounded memory
            self.trace.append((self.name, stage, start, end))


class PipelineStats:
    """Counters of one loader; read with ``snapshot()``."""

    def __init__(self, trace=False):
        self._lock = threading.Lock()
        self._clocks = []
        self.trace = [] if trace else None
        self.started = time.perf_counter()
        self.images = 0
        self.batches = 0
        self.wait_seconds = 0.0
        self.errors = 0
        self.replaced = 0
        self.skipped = 0
        self.consumer = self.clock("consumer")

    def clock(self, name):
        """A new per-thread clock registered with these stats."""
        clock = StageClock(name, self.trace)
        with self._lock:
            self._clocks.append(clock)
        return clock

    def delivered(self, images, waited):
        self.images += images
        self.batches += 1
        self.wait_seconds += waited

    def snapshot(self):
        """A dict: images, batches, elapsed, images_per_s, wait_seconds, wait_fraction,
        stage_seconds (summed over threads), samples decoded, cpu_seconds (worker thread CPU
        time in tasks), gil_seconds (the part of it outside C calls that release the GIL: the
        serial work no thread count spreads), and the errors raised, samples skipped and samples
        replaced in delivered batches."""
        elapsed = time.perf_counter() - self.started
        with self._lock:
            clocks = list(self._clocks)
        stage_seconds = {stage: sum(c.seconds[stage] for c in clocks) for stage in STAGES}
        return {
            "images": self.images,
            "batches": self.batches,
            "elapsed": elapsed,
            "images_per_s": self.images / elapsed if elapsed > 0 else 0.0,
            "wait_seconds": self.wait_seconds,
            "wait_fraction": self.wait_seconds / elapsed if elapsed > 0 else 0.0,
            "stage_seconds": stage_seconds,
            "samples": sum(c.samples for c in clocks),
            "cpu_seconds": sum(c.cpu_seconds for c in clocks),
            "gil_seconds": sum(max(0.0, c.cpu_seconds - c.released_cpu_seconds)
                               for c in clocks),
            "errors": self.errors,
            "skipped": self.skipped,
            "replaced": self.replaced,
        }


def write_chrome_trace(spans, path):
    """Write ``(thread, stage, start, end)`` spans as a Chrome trace-event JSON file."""
    if not spans:
        origin = 0.0
    else:
        origin = min(span[2] for span in spans)
    threads = {}
    events = []
    for thread, stage, start, end in spans:
        tid = threads.setdefault(thread, len(threads) + 1)
        events.append({"name": stage, "cat": "recpipe", "ph": "X", "pid": 1, "tid": tid,
                       "ts": (start - origin) * 1e6, "dur": (end - start) * 1e6})
    for thread, tid in threads.items():
        events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
                       "args": {"name": thread}})
    with open(path, "w") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)


class _Traces:
    """The span lists of every traced loader of the process, written together at exit as one
    Chrome trace to ``$RECPIPE_TRACE`` (``recpipe.system.env.trace_path``)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.lists = []
        self.registered = False

    def add(self, spans):
        with self.lock:
            self.lists.append(spans)
            if not self.registered:
                atexit.register(self.write)
                self.registered = True

    def write(self):
        path = trace_path()
        if not path:
            return
        with self.lock:
            spans = [(f"loader{i + 1}/{thread}", stage, start, end)
                     for i, spans in enumerate(self.lists) for thread, stage, start, end in spans]
        try:
            write_chrome_trace(spans, path)
        except OSError as e:
            log.error("could not write RECPIPE_TRACE=%s: %s", path, e)
            return
        log.info("wrote %d trace spans of %d loader(s) to %s", len(spans), len(self.lists), path)


_TRACES = _Traces()


def traced(spans):
    """Register a loader's span list (``PipelineStats.trace``) for ``$RECPIPE_TRACE``."""
    if spans is not None and trace_path():
        _TRACES.add(spans)
