"""The autotuner's loader side: measure windows in the consumer thread, apply the decisions.

``AutoTuner`` registers itself as an ``ImageLoader`` observer, so all of its work runs in the
consumer thread right after a batch is handed out: no extra thread, no lock on the hot path.
Each delivered batch adds its interval, its wait and its image count to the open window; once a
window holds ``window_batches`` batches and ``window_seconds`` seconds, the worker CPU and busy
time, the process CPU time and CPU pressure are read once, a ``WindowMetrics`` goes to the
``Controller`` and its decision is applied with ``loader.set_threads`` and ``loader.prefetch``.

Defaults are sized for small datasets on small machines (an epoch of 8 batches of 128 images
decoded in about a second on 2 cores): windows of at least 8 batches (one such epoch) and 1.5 s,
4 warm-up batches and 1 s at the start, ``prefetch + 1`` batches and 0.25 s of settling after
every change. Long GPU jobs can use the documented 64 batches / 2 s (``window_batches=64,
window_seconds=2``): fewer, quieter decisions.

The tuner changes only its own loader's threads and prefetch depth: never process-wide settings
(OpenCV or BLAS thread counts, affinity, environment variables).
"""

import collections
import dataclasses
import logging
import math
import os
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Deque, List, Optional, Protocol

from ...spelling import did_you_mean
from ...system.host import available_memory, cpu_pressure, node_share, read_text
from .controller import HISTORY, Controller, MemoryModel, Settings, WindowMetrics

__all__ = ["AutoTuner", "Tunable", "TunerOptions", "initial_threads", "run_queue_seconds"]


log = logging.getLogger(__name__)

GAP_LIMIT = 10.0                  # a longer pause between batches (eval, checkpoint) is dropped
THREAD_BYTES = 16 * 2 ** 20       # per-thread decode scratch estimate (full-size image + resize)
RAM_SHARE = 0.5                   # default RAM budget: this share of the available memory
_QUIET_ACTIONS = ("stay", "hold")


def initial_threads(cores=None):
    """Threads the first window runs with: enough to measure, without oversubscribing."""
    return min(2, cores or node_share()[0])


def run_queue_seconds():
    """``(cpu, waiting)`` seconds summed over this process's live threads from
    ``/proc/self/task/*/schedstat``: time on a CPU and time runnable but waiting for one (a
    thread blocked on the GIL sleeps, so it does not count). None where unavailable."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    cpu = waiting = 0
    for task in tasks:
        fields = read_text(f"/proc/self/task/{task}/schedstat").split()
        if len(fields) >= 2:
            cpu += int(fields[0])
            waiting += int(fields[1])
    return cpu / 1e9, waiting / 1e9


def _process_cpu_seconds():
    times = os.times()
    return times.user + times.system


class _MeasurementWindow:
    """The batches delivered since the window opened, and the counters read when it opened."""

    def __init__(self, now, stats, threads):
        self.start = now
        self.threads = threads
        self.cpu = stats["cpu_seconds"]
        self.gil = stats["gil_seconds"]
        self.busy = _busy_seconds(stats)
        self.process_cpu = _process_cpu_seconds()
        self.run_queue = run_queue_seconds()
        self.batches = 0
        self.images = 0
        self.waited = 0.0
        self.intervals = []
        self.computes = []

    def add(self, images, waited, interval):
        self.batches += 1
        self.images += images
        self.waited += waited
        self.intervals.append(interval)
        self.computes.append(max(0.0, interval - waited))

    def metrics(self, now, stats, cores):
        seconds = max(now - self.start, 1e-9)
        mean = statistics.fmean(self.intervals)
        spread = statistics.stdev(self.intervals) if len(self.intervals) > 1 else 0.0
        compute = statistics.median(self.computes)
        return WindowMetrics(
            batches=self.batches, seconds=seconds,
            wait_fraction=self.waited / seconds,
            images_per_s=self.images / seconds,
            rate_rse=spread / mean / math.sqrt(self.batches) if mean > 0 else 0.0,
            demand=1.0 / compute if compute > 1e-4 else math.inf,
            cpu_per_batch=(stats["cpu_seconds"] - self.cpu) / self.batches,
            busy_fraction=(_busy_seconds(stats) - self.busy) / (self.threads * seconds),
            cpu_util=(_process_cpu_seconds() - self.process_cpu) / (cores * seconds),
            images_per_batch=self.images / self.batches,
            gil_per_batch=(stats["gil_seconds"] - self.gil) / self.batches,
            psi_some=cpu_pressure(),
            runq_share=self._runq_share())

    def _runq_share(self):
        now = run_queue_seconds()
        if now is None or self.run_queue is None:
            return None
        cpu, waiting = now[0] - self.run_queue[0], now[1] - self.run_queue[1]
        if cpu <= 0 or waiting < 0:  # threads retired in the window took their counters along
            return None
        return waiting / (waiting + cpu)


def _busy_seconds(stats):
    stages = stats["stage_seconds"]
    return stages["read"] + stages["decode"] + stages["augment"]


class Tunable(Protocol):
    """What the autotuner drives: ``ImageLoader`` is one.

    ``threads`` and ``set_threads(n)``: decode threads; ``prefetch``: batches decoded ahead
    (settable; the tunable keeps enough batch memory for it); ``batch_bytes``: the memory of
    one batch; ``stats()``: ``PipelineStats.snapshot()``; ``add_observer(fn)``: ``fn(images,
    waited)`` after each delivered batch."""

    threads: int
    prefetch: int
    batch_bytes: int

    def set_threads(self, threads: int) -> None: ...

    def stats(self) -> dict: ...

    def add_observer(self, observer: Callable[[int, float], None]) -> None: ...


@dataclass(frozen=True)
class TunerOptions:
    """How an ``AutoTuner`` measures and what it may choose, validated when made.

    Windows close after ``window_batches`` batches and ``window_seconds`` seconds; the first
    opens after ``warmup_batches`` batches and ``warmup_seconds``, and after each change the
    tuner waits ``prefetch + 1`` batches and ``settle_seconds``. ``threads``: the start
    (default ``initial_threads()``); ``min_threads``/``max_threads`` (default 1 and twice the
    usable cores); ``max_prefetch``; ``ram_budget`` in bytes (default half the available
    memory); ``settings`` (``controller.Settings``); ``cores`` (default: this rank's share of the
    cores from affinity and cgroup quota, ``recpipe.system.host.node_share``)."""

    window_batches: int = 8
    window_seconds: float = 1.5
    warmup_batches: int = 4
    warmup_seconds: float = 1.0
    settle_seconds: float = 0.25
    threads: Optional[int] = None
    min_threads: int = 1
    max_threads: Optional[int] = None
    max_prefetch: int = 16
    ram_budget: Optional[float] = None
    settings: Optional[Settings] = None
    cores: Optional[int] = None

    def __post_init__(self):
        _validate_tuner(self)

    @classmethod
    def of(cls, options: Optional["TunerOptions"] = None, keywords=None) -> "TunerOptions":
        """``options`` with ``keywords`` (its field names) replacing fields; a misspelt keyword
        raises TypeError with a "did you mean"."""
        keywords = dict(keywords or {})
        names = [f.name for f in dataclasses.fields(cls)]
        for key in keywords:
            if key not in names:
                raise TypeError(f"AutoTuner got an unknown option {key!r}"
                                f"{did_you_mean(key, names)}")
        return dataclasses.replace(options or cls(), **keywords)


def _validate_tuner(o):
    for name in ("window_batches", "warmup_batches"):
        _check_count(name, getattr(o, name), low=1 if name == "window_batches" else 0)
    for name in ("window_seconds", "warmup_seconds", "settle_seconds"):
        if not getattr(o, name) >= 0:
            raise ValueError(f"{name}={getattr(o, name)!r} must be >= 0 seconds")
    for name in ("threads", "max_threads", "cores"):
        if getattr(o, name) is not None:
            _check_count(name, getattr(o, name), low=1)
    _check_count("min_threads", o.min_threads, low=1)
    _check_count("max_prefetch", o.max_prefetch, low=1)
    if o.max_threads is not None and o.max_threads < o.min_threads:
        raise ValueError(f"max_threads={o.max_threads} is below min_threads={o.min_threads}")
    if o.ram_budget is not None and not o.ram_budget > 0:
        raise ValueError(f"ram_budget={o.ram_budget!r} must be a positive number of bytes")
    if o.settings is not None and not isinstance(o.settings, Settings):
        raise ValueError(f"settings={o.settings!r}: expected a "
                         "recpipe.decode.tune.controller.Settings")


def _check_count(name, value, low):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name}={value!r}: expected a whole number >= {low}")


class AutoTuner:
    """Drive a ``Tunable``'s threads (and prefetch depth) from windows measured in its consumer.

    ``ImageLoader(threads="auto")`` creates one; ``loader.autotuner`` is it. ``options``: a
    ``TunerOptions`` (window and warm-up sizes, thread and prefetch bounds, RAM budget, cores);
    ``controller``: the ``controller.Controller`` deciding (default: one built from the options).
    With ``min_threads == max_threads`` and ``max_prefetch == loader.prefetch`` it only measures.
    """

    def __init__(self, loader, options: Optional[TunerOptions] = None, *, controller=None):
        o = options or TunerOptions()
        self.loader = loader
        self.options = o
        detected, source = node_share()  # this rank's share of the node's cores
        self.cores = o.cores or detected
        self.cores_source = "given" if o.cores else source
        self.controller = controller or self._controller(o)
        self._listeners: List[Callable] = []
        self._started = time.perf_counter()
        # when each window closed, per decision, like the controller's history
        self._closed_at: Deque[float] = collections.deque(maxlen=HISTORY)
        self._last_time = None
        self._window = None
        self._skip_batches = o.warmup_batches
        self._skip_until = self._started + o.warmup_seconds
        self._apply(self.controller.threads, self.controller.prefetch)
        loader.add_observer(self.observe)

    def _controller(self, o):
        budget = RAM_SHARE * available_memory() if o.ram_budget is None else o.ram_budget
        memory = MemoryModel(batch_bytes=self.loader.batch_bytes, thread_bytes=THREAD_BYTES,
                             budget_bytes=budget)
        return Controller(
            self.cores, threads=o.threads or initial_threads(self.cores),
            prefetch=self.loader.prefetch, min_threads=o.min_threads, max_threads=o.max_threads,
            max_prefetch=o.max_prefetch, memory=memory, settings=o.settings or Settings())

    def add_listener(self, listener):
        """Call ``listener(decision)`` (a ``controller.Decision``) after every window."""
        self._listeners.append(listener)

    # -- the observer (consumer thread) -------------------------------------------------

    def observe(self, images, waited):
        """One batch was handed out: ``images`` real images, after ``waited`` seconds blocked."""
        now = time.perf_counter()
        previous, self._last_time = self._last_time, now
        if previous is None:
            return
        interval = now - previous
        if interval >= GAP_LIMIT:
            log.debug("dropping a %.1f s pause from the measurements", interval)
            self._window = None
            return
        if self._window is None:
            self._open_when_settled(now)
            return
        self._window.add(images, waited, interval)
        if self._window.batches >= self.options.window_batches and \
                now - self._window.start >= self.options.window_seconds:
            self._close_window(now)

    def _open_when_settled(self, now):
        self._skip_batches -= 1
        if self._skip_batches <= 0 and now >= self._skip_until:
            self._window = _MeasurementWindow(now, self.loader.stats(), self.loader.threads)

    def _close_window(self, now):
        stats = self.loader.stats()
        metrics = self._window.metrics(now, stats, self.cores)
        decision = self.controller.update(metrics)
        self._closed_at.append(now - self._started)
        if decision.changed:
            self._apply(decision.threads, decision.prefetch)
            self._window = None
            self._skip_batches = max(2, decision.prefetch + 1)
            self._skip_until = now + self.options.settle_seconds
        else:
            self._window = _MeasurementWindow(now, stats, self.loader.threads)
        level = logging.DEBUG if decision.action in _QUIET_ACTIONS else logging.INFO
        log.log(level, "autotune %s", decision.describe())
        for listener in self._listeners:
            listener(decision)

    def _apply(self, threads, prefetch):
        if threads != self.loader.threads:
            self.loader.set_threads(threads)
        self.loader.prefetch = prefetch

    # -- the report ---------------------------------------------------------------------

    def report(self):
        """The controller's report plus how it was measured (see ``Controller.report``)."""
        report = self.controller.report()
        history = report.get("history", [])
        times = list(self._closed_at)[-len(history):] if history else []
        for decision, seconds in zip(history[len(history) - len(times):], times):
            decision["seconds"] = seconds  # when its window closed, after tuning began
        report.update(
            cores_source=self.cores_source,
            window_batches=self.options.window_batches,
            window_seconds=self.options.window_seconds,
            elapsed=time.perf_counter() - self._started)
        return report
