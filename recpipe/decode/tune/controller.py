"""The decode-thread autotuner's controller: measured windows in, the next setting out.

``Controller`` is pure: it is fed one ``WindowMetrics`` per measurement window (consumer wait
fraction, delivered throughput and its standard error, consumer demand, worker CPU seconds per
batch, worker busy fraction, process CPU use) and returns a ``Decision`` (threads, prefetch
depth, action, reason). It holds no threads, reads no clock and touches no loader; the adapter in
``tuner`` measures the windows and applies the decisions.

Control law (see docs/autotune.md, section 5):

- after the first window, one model-based jump to ``ceil(JUMP_HEADROOM * c * D)`` threads
  (CPU seconds per batch times demanded batches/s, capped at the usable cores);
- then +1 probes while the consumer is starved (wait fraction > ``wait_high``); a probe is kept
  only if throughput rose by at least ``max(min_gain, z * SE)``; an inconclusive positive gain
  extends the window (at most ``max_extensions`` times); otherwise it is rolled back and thread
  probes pause for an exponentially growing number of windows (``backoff_min`` to
  ``backoff_max``);
- -1 probes when the consumer never waits and the busy-time model says one thread fewer still
  keeps up (``down_util``, ``down_windows`` windows in a row); rolled back if waiting returns;
- prefetch depth doubles (up to ``max_prefetch`` and the RAM budget) when the consumer is starved,
  threads cannot help and the workers sit idle part of the time; it is judged like a thread probe;
- a workload change (demand or CPU cost per batch moving by more than ``drift`` while starved for
  ``drift_windows`` windows) ends any back-off and re-jumps.
"""

import collections
import dataclasses
import math
from dataclasses import dataclass
from typing import Optional

__all__ = ["REASONS", "Settings", "WindowMetrics", "Decision", "MemoryModel", "Controller"]

NOT_STARVED = "NOT_STARVED"
CPU_SATURATED = "CPU_SATURATED"
SERIAL_OR_IO_BOUND = "SERIAL_OR_IO_BOUND"
MAX_THREADS = "MAX_THREADS"
RAM_BUDGET = "RAM_BUDGET"
TUNING = "TUNING"
HISTORY = 1000
REASONS = (NOT_STARVED, CPU_SATURATED, SERIAL_OR_IO_BOUND, MAX_THREADS, RAM_BUDGET, TUNING)


@dataclass(frozen=True)
class Settings:
    """The controller's constants (docs/autotune.md, section 5)."""

    wait_high: float = 0.05        # starved above this consumer wait fraction
    wait_low: float = 0.01         # candidate for one thread fewer below it
    min_gain: float = 0.03         # a +1 must raise throughput by at least this...
    z: float = 2.0                 # ...and by z standard errors of the difference
    max_extensions: int = 2        # an inconclusive positive gain may extend the window
    backoff_min: int = 8           # windows without thread probes after a rejected one
    backoff_max: int = 128
    saturated_backoff: int = 32    # first back-off once CPU saturation is confirmed
    jump_headroom: float = 1.15
    down_util: float = 0.85
    down_windows: int = 4
    saturated_util: float = 0.8    # process CPU / usable cores that confirms saturation
    contended_runq: float = 0.2    # threads waiting this share of their runnable time for a CPU
    cpu_rise: float = 0.15         # CPU per batch rising this much with +1 = contention
    drift: float = 0.25            # demand or CPU per batch moving this much = new workload
    drift_windows: int = 3
    depth_idle: float = 0.9        # workers busy less than this while starved: depth-bound
    depth_shrink_windows: int = 32


@dataclass(frozen=True)
class WindowMetrics:
    """What one measurement window saw. Rates are per second of the window's wall time."""

    batches: int
    seconds: float
    wait_fraction: float           # consumer time blocked in next() / window time
    images_per_s: float            # delivered throughput
    rate_rse: float = 0.0          # relative standard error of images_per_s
    demand: float = math.inf       # batches/s the consumer could take (1 / its compute time)
    cpu_per_batch: float = 0.0     # worker CPU seconds per delivered batch
    busy_fraction: float = 1.0     # worker busy wall seconds / (threads * seconds)
    cpu_util: float = 0.0          # process CPU seconds / (usable cores * seconds)
    images_per_batch: float = 1.0
    gil_per_batch: float = 0.0     # of cpu_per_batch, seconds holding the GIL (serial)
    psi_some: Optional[float] = None         # /proc/pressure/cpu "some avg10", when available
    # share of this process's runnable time spent waiting for a CPU
    runq_share: Optional[float] = None

    @property
    def batches_per_s(self):
        return self.images_per_s / self.images_per_batch if self.images_per_batch else 0.0

    def merged(self, other):
        """This window and a following one as one longer window (for an extended probe)."""
        total = self.batches + other.batches
        seconds = self.seconds + other.seconds

        def avg(a, b, wa, wb):
            if math.isinf(a) or math.isinf(b):
                return math.inf if math.isinf(a) and math.isinf(b) else (b if math.isinf(a) else a)
            return (a * wa + b * wb) / (wa + wb) if wa + wb else a

        rse = math.hypot(self.rate_rse * self.batches, other.rate_rse * other.batches) / total
        return WindowMetrics(
            batches=total, seconds=seconds,
            wait_fraction=avg(self.wait_fraction, other.wait_fraction, self.seconds, other.seconds),
            images_per_s=avg(self.images_per_s, other.images_per_s, self.seconds, other.seconds),
            rate_rse=rse,
            demand=avg(self.demand, other.demand, self.batches, other.batches),
            cpu_per_batch=avg(self.cpu_per_batch, other.cpu_per_batch, self.batches, other.batches),
            busy_fraction=avg(self.busy_fraction, other.busy_fraction, self.seconds, other.seconds),
            cpu_util=avg(self.cpu_util, other.cpu_util, self.seconds, other.seconds),
            images_per_batch=avg(self.images_per_batch, other.images_per_batch,
                                 self.batches, other.batches),
            gil_per_batch=avg(self.gil_per_batch, other.gil_per_batch, self.batches, other.batches),
            psi_some=other.psi_some if other.psi_some is not None else self.psi_some,
            runq_share=other.runq_share if other.runq_share is not None else self.runq_share)


@dataclass(frozen=True)
class Decision:
    """The setting to run next and why. ``changed`` says whether threads or prefetch moved."""

    window: int
    threads: int
    prefetch: int
    action: str
    reason: str
    changed: bool
    wait_fraction: float
    images_per_s: float
    gain: Optional[float] = None
    se: Optional[float] = None
    note: str = ""

    def as_dict(self):
        return dataclasses.asdict(self)

    def describe(self):
        """One line for logs and the CLI."""
        text = (f"window {self.window}: {self.action} -> threads={self.threads} "
                f"prefetch={self.prefetch} (wait {self.wait_fraction:.1%}, "
                f"{self.images_per_s:.0f} img/s")
        if self.gain is not None:
            text += f", gain {self.gain:+.1%} +/- {self.se:.1%}"
        text += f"; {self.reason})"
        return text + (f" {self.note}" if self.note else "")


@dataclass(frozen=True)
class MemoryModel:
    """Little's-law memory estimate: prefetched batches plus per-thread decode buffers."""

    batch_bytes: int = 0
    thread_bytes: int = 0
    budget_bytes: float = math.inf

    def estimate(self, threads, prefetch):
        # +1: the batch the consumer holds while the next ``prefetch`` are filled
        return (prefetch + 1) * self.batch_bytes + threads * self.thread_bytes

    def fits(self, threads, prefetch):
        return self.estimate(threads, prefetch) <= self.budget_bytes


@dataclass
class _Probe:
    knob: str           # "threads", "prefetch" or "jump"
    direction: int
    old: int            # the setting to roll back to
    base: WindowMetrics
    extensions: int = 0
    pending: Optional[WindowMetrics] = None


class Controller:
    """Decide the next (threads, prefetch) from measured windows. Pure and single-threaded.

    ``cores``: usable cores (affinity and cgroup quota). ``threads``: the setting the first window
    runs with (default ``min(2, cores)``). ``max_threads`` defaults to ``2 * cores`` (at least
    ``cores + 1``): saturation is shown by a rejected probe, not assumed, and threads beyond the
    cores are kept only when they measurably help (storage waits, CPU shared with others).
    The model jump never goes past ``cores``.
    """

    def __init__(self, cores, *, threads=None, prefetch=2, min_threads=1, max_threads=None,
                 min_prefetch=None, max_prefetch=16, memory=None, settings=None):
        self.cores = max(1, int(cores))
        self.settings = settings or Settings()
        self.min_threads = max(1, min_threads)
        self.max_threads = max(self.min_threads, max_threads or max(2 * self.cores,
                                                                    self.cores + 1))
        self.min_prefetch = min_prefetch or prefetch
        self.max_prefetch = max(self.min_prefetch, max_prefetch)
        self.memory = memory or MemoryModel()
        self.threads = self._clip(threads or min(2, self.cores))
        self.prefetch = min(max(prefetch, self.min_prefetch), self.max_prefetch)
        self.start = (self.threads, self.prefetch)  # the setting of the first window
        self.reason = TUNING
        self.history = collections.deque(maxlen=HISTORY)  # the latest decisions
        self.windows = 0
        self.settled_window = 0     # the window whose decision set the kept thread count
        self.first = None
        self.last = None
        self._probe = None
        self._jumped = False
        self._hold_up = 0           # windows left without +1 probes
        self._hold_down = 0         # windows left without -1 probes
        self._depth_hold = 0
        self._backoff = self.settings.backoff_min
        self._reference = None
        self._drifting = 0
        self._calm = 0
        self._low_busy = 0

    # -- public --------------------------------------------------------------------------

    def update(self, metrics):
        """Feed one window measured at the current setting; returns the ``Decision``."""
        self.windows += 1
        self.first = self.first or metrics
        self.last = metrics
        if self._probe is not None:
            decision = self._judge(metrics)
        elif not self._jumped:
            decision = self._jump(metrics)
        else:
            decision = self._steady(metrics)
        self.history.append(decision)
        return decision

    def x_max(self, metrics=None):
        """The CPU bound on images/s: usable cores / CPU seconds per image (None if unknown)."""
        m = metrics or self.last
        if m is None or m.cpu_per_batch <= 0 or not m.images_per_batch:
            return None
        return self.cores / (m.cpu_per_batch / m.images_per_batch)

    def report(self):
        """A dict: final setting, stop reason, wait before/after, bounds and the history."""
        first, last = self.first, self.last
        changes = [d.window for d in self.history if d.changed]
        report = {
            "threads": self.threads,
            "prefetch": self.prefetch,
            "start": {"threads": self.start[0], "prefetch": self.start[1]},
            "reason": self.reason,
            "windows": self.windows,
            "settled_window": self.settled_window,
            "changes": len(changes),
            "wait_fraction": {"before": first.wait_fraction if first else None,
                              "after": last.wait_fraction if last else None},
            "images_per_s": {"before": first.images_per_s if first else None,
                             "after": last.images_per_s if last else None},
            "cores": self.cores,
            "max_threads": self.max_threads,
            "demand_batches_per_s": _finite(last.demand) if last else None,
            "cpu_per_batch": last.cpu_per_batch if last else None,
            "cpu_per_image": (last.cpu_per_batch / last.images_per_batch
                              if last and last.images_per_batch else None),
            "cpu_util": last.cpu_util if last else None,
            "run_queue_share": last.runq_share if last else None,
            "cpu_pressure_some_avg10": last.psi_some if last else None,
            "x_max_images_per_s": self.x_max(),
            "memory_bytes": self.memory.estimate(self.threads, self.prefetch),
            "memory_budget_bytes": _finite(self.memory.budget_bytes),
            "warnings": self._warnings(),
            "history": [d.as_dict() for d in self.history],
        }
        return report

    # -- decisions -----------------------------------------------------------------------

    def _decide(self, metrics, action, *, reason=None, threads=None, prefetch=None, gain=None,
                se=None, note=""):
        old = (self.threads, self.prefetch)
        if threads is not None:
            self.threads = threads
        if prefetch is not None:
            self.prefetch = prefetch
        if reason is not None:
            self.reason = reason
        return Decision(window=self.windows, threads=self.threads, prefetch=self.prefetch,
                        action=action, reason=self.reason,
                        changed=(self.threads, self.prefetch) != old,
                        wait_fraction=metrics.wait_fraction, images_per_s=metrics.images_per_s,
                        gain=gain, se=se, note=note)

    def _jump(self, m):
        """One model-based step after the first window (utilisation law, as in Plumber): up
        only when the consumer waits, down only when it never does."""
        self._jumped = True
        self._reference = m
        target = self._model_threads(m)
        starved = m.wait_fraction > self.settings.wait_high
        wanted_up = target is not None and target > self.threads and starved
        wanted_down = (target is not None and target < self.threads
                       and m.wait_fraction < self.settings.wait_low)
        if not (wanted_up or wanted_down) or not self.memory.fits(target, self.prefetch):
            return self._steady(m)
        self._probe = _Probe("jump", 1 if wanted_up else -1, self.threads, m)
        demand = _finite(m.demand)
        return self._decide(m, "jump", threads=target, reason=TUNING,
                            note=f"model: {m.cpu_per_batch:.3f} CPU-s/batch x "
                                 f"{'unbounded' if demand is None else f'{demand:.1f}'} "
                                 f"batches/s demanded")

    def _model_threads(self, m):
        """Threads for the demand: CPU per batch times batches/s, within the cores and within
        what the GIL-held (serial) part lets threads overlap: with ``g`` of the ``c`` CPU
        seconds of a batch holding the GIL, more than ``c / g`` threads only wait for it."""
        if m.cpu_per_batch <= 0:
            return None
        useful = self.cores
        if m.gil_per_batch > 0:
            useful = min(useful, math.ceil(self.settings.jump_headroom * m.cpu_per_batch
                                           / m.gil_per_batch))
        if math.isinf(m.demand):
            return self._clip(useful)
        need = math.ceil(self.settings.jump_headroom * m.cpu_per_batch * m.demand)
        return self._clip(min(need, useful))

    def _judge(self, m):
        probe = self._probe
        if probe.pending is not None:
            m = probe.pending.merged(m)
        base = probe.base
        gain = m.images_per_s / base.images_per_s - 1 if base.images_per_s > 0 else 0.0
        se = math.hypot(m.rate_rse, base.rate_rse)
        need = max(self.settings.min_gain, self.settings.z * se)
        if probe.direction > 0:
            if gain >= need:
                return self._accept(m, gain, se)
            if gain > 0 and probe.extensions < self.settings.max_extensions:
                probe.extensions += 1
                probe.pending = m
                return self._decide(m, "extend", gain=gain, se=se,
                                    note=f"gain not yet significant (need {need:.1%})")
            return self._reject(m, gain, se)
        # a step down is kept while the consumer still does not wait and throughput holds
        if m.wait_fraction <= self.settings.wait_high and gain > -need:
            return self._accept(m, gain, se)
        return self._reject(m, gain, se)

    def _accept(self, m, gain, se):
        probe, self._probe = self._probe, None
        self._backoff = self.settings.backoff_min
        self._reference = m
        self._low_busy = 0
        if probe.knob != "prefetch":
            self.settled_window = self.windows
        reason = NOT_STARVED if m.wait_fraction <= self.settings.wait_high else TUNING
        return self._decide(m, f"keep {probe.knob}", reason=reason, gain=gain, se=se)

    def _reject(self, m, gain, se):
        probe, self._probe = self._probe, None
        base = probe.base
        self._reference = base
        self._low_busy = 0
        hold = self._backoff
        self._backoff = min(2 * self._backoff, self.settings.backoff_max)
        if probe.knob == "prefetch":
            self._depth_hold = hold
            return self._decide(m, "rollback prefetch", prefetch=probe.old, gain=gain, se=se)
        if probe.direction < 0:
            self._hold_down = hold
            reason = NOT_STARVED if base.wait_fraction <= self.settings.wait_high else TUNING
            return self._decide(m, f"rollback {probe.knob}", threads=probe.old, reason=reason,
                                gain=gain, se=se, note=f"no step down for {hold} windows")
        reason = self._classify(base, m)
        if m.wait_fraction <= self.settings.wait_high:
            reason = NOT_STARVED  # both settings keep up: the starved window was a blip
        if reason == CPU_SATURATED:
            hold = max(hold, self.settings.saturated_backoff)
            self._backoff = min(2 * hold, self.settings.backoff_max)
        self._hold_up = hold
        return self._decide(m, f"rollback {probe.knob}", threads=probe.old, reason=reason,
                            gain=gain, se=se, note=f"no thread probes for {hold} windows")

    def _classify(self, base, probe):
        """Why one more thread did not help: the CPU is full, or something serial is the limit."""
        s = self.settings
        cost_rose = (base.cpu_per_batch > 0
                     and probe.cpu_per_batch > (1 + s.cpu_rise) * base.cpu_per_batch)
        if self._saturated(base) or self._saturated(probe) or cost_rose:
            return CPU_SATURATED
        return SERIAL_OR_IO_BOUND

    def _saturated(self, m):
        """This process uses most of its cores, or its threads queue for a CPU (other
        processes hold the cores, or there are more threads than cores)."""
        s = self.settings
        return m.cpu_util >= s.saturated_util or (m.runq_share or 0.0) >= s.contended_runq

    def _steady(self, m):
        s = self.settings
        starved = m.wait_fraction > s.wait_high
        self._hold_up = max(0, self._hold_up - 1)
        self._hold_down = max(0, self._hold_down - 1)
        if self._drifted(m, starved):
            self._hold_up = self._hold_down = self._depth_hold = 0
            self._backoff = s.backoff_min
            if (self._model_threads(m) or 0) > self.threads:
                return self._jump(m)
            return self._grow(m, note="workload changed")
        if m.wait_fraction >= s.wait_low:
            self._calm = 0
        if starved:
            self._low_busy = 0
            if self._hold_up > 0:
                return self._grow_depth(m) or self._decide(m, "hold")
            return self._grow(m)
        if m.wait_fraction < s.wait_low and self._hold_down == 0:
            return self._maybe_shrink(m)
        self._low_busy = 0
        return self._decide(m, "stay", reason=NOT_STARVED)

    def _drifted(self, m, starved):
        """The workload changed: starved for a while with demand or CPU cost well off the
        reference window the current setting was chosen on."""
        ref, s = self._reference, self.settings
        if ref is None or not starved or m.wait_fraction <= 3 * s.wait_high:
            self._drifting = 0
            return False
        moved = _moved(m.demand, ref.demand, s.drift) or \
            _moved(m.cpu_per_batch, ref.cpu_per_batch, s.drift)
        self._drifting = self._drifting + 1 if moved else 0
        if self._drifting >= s.drift_windows:
            self._drifting = 0
            return True
        return False

    def _grow(self, m, note=""):
        n = self.threads + 1
        if n > self.max_threads:
            reason = CPU_SATURATED if self._saturated(m) else MAX_THREADS
            return self._grow_depth(m) or self._decide(m, "stay", reason=reason, note=note)
        if not self.memory.fits(n, self.prefetch):
            return self._decide(m, "stay", reason=RAM_BUDGET, note=note)
        self._probe = _Probe("threads", 1, self.threads, m)
        return self._decide(m, "probe +1", threads=n, reason=TUNING, note=note)

    def _grow_depth(self, m):
        """Deeper prefetch when threads cannot help and the workers idle while the consumer
        waits (supply is bursty rather than short). None when that does not apply."""
        s = self.settings
        depth = min(2 * self.prefetch, self.max_prefetch)
        if self._depth_hold > 0:
            self._depth_hold -= 1
            return None
        if depth == self.prefetch or m.busy_fraction >= s.depth_idle \
                or self._saturated(m):
            return None
        if not self.memory.fits(self.threads, depth):
            return None
        self._probe = _Probe("prefetch", 1, self.prefetch, m)
        return self._decide(m, "probe prefetch", prefetch=depth, reason=TUNING)

    def _maybe_shrink(self, m):
        s = self.settings
        n = self.threads
        fewer_suffice = n > self.min_threads and m.busy_fraction * n / (n - 1) < s.down_util
        self._low_busy = self._low_busy + 1 if fewer_suffice else 0
        self._calm += 1
        if self._low_busy >= s.down_windows:
            self._low_busy = 0
            self._probe = _Probe("threads", -1, n, m)
            return self._decide(m, "probe -1", threads=n - 1, reason=NOT_STARVED)
        if self._calm >= s.depth_shrink_windows and self.prefetch > self.min_prefetch:
            self._calm = 0
            depth = max(self.min_prefetch, (self.prefetch * 3) // 4)
            self._probe = _Probe("prefetch", -1, self.prefetch, m)
            return self._decide(m, "probe prefetch", prefetch=depth, reason=NOT_STARVED)
        return self._decide(m, "stay", reason=NOT_STARVED)

    def _clip(self, n):
        return max(self.min_threads, min(self.max_threads, n))

    def _warnings(self):
        m = self.last
        if m is None or m.wait_fraction <= self.settings.wait_high:
            return []
        warnings = []
        if self.reason in (CPU_SATURATED, MAX_THREADS) and m.cpu_per_batch > 0 \
                and not math.isinf(m.demand):
            need = math.ceil(m.cpu_per_batch * m.demand)
            warnings.append(f"input-bound at {self.threads} threads on {self.cores} cores: decode "
                            f"needs ~{need} cores at this step time")
        if self.reason == SERIAL_OR_IO_BOUND:
            gil = ""
            if m.gil_per_batch > 0 and m.images_per_batch > 0:
                ceiling = m.images_per_batch / m.gil_per_batch
                gil = (f" (GIL-held Python: {m.gil_per_batch / m.images_per_batch * 1e6:.0f} us "
                       f"an image, at most ~{ceiling:.0f} images/s on any core count)")
            warnings.append(f"no gain past {self.threads} threads at {m.cpu_util:.0%} CPU: "
                            f"a serial stage (GIL-holding Python) or storage is the limit{gil}")
        if self.reason == RAM_BUDGET:
            warnings.append("the RAM budget stopped the tuner; raise it to allow more threads")
        return warnings


def _moved(value, reference, fraction):
    if math.isinf(value) or math.isinf(reference):
        return math.isinf(value) != math.isinf(reference)
    if reference <= 0:
        return value > 0
    return abs(value / reference - 1) > fraction


def _finite(value):
    return None if value is None or math.isinf(value) else value
