"""The CPU a measurement actually got, and whether other processes took the cores.

A rate measured on a shared machine says as much about the other processes as about the
pipeline: ``CpuMeter`` records, over one timed run, this process's CPU time against the wall
time (the cores it got), the share of their runnable time its threads spent waiting for a CPU
(``/proc/self/task/*/schedstat``, the autotuner's contention signal), the machine's load average
and CPU pressure. ``busy_reason`` says when that evidence shows a busy machine, and
``busy_evidence`` words it; ``recpipe bench`` warns with it and ``recpipe tune`` explains a
saturated CPU with the same words.
"""

import os
import time
from dataclasses import asdict, dataclass
from typing import List, Optional

from ..system.host import cpu_pressure
from .tune.controller import Settings
from .tune.tuner import run_queue_seconds

__all__ = ["CpuMeter", "CpuShare", "busy_evidence", "busy_reason", "BUSY_PRESSURE"]

# CPU pressure ("some avg10", percent) from which the machine counts as busy
BUSY_PRESSURE = 25.0


@dataclass(frozen=True)
class CpuShare:
    """What one timed run got: ``cpu_seconds`` of this process over ``wall_seconds``
    (``cores_used``), its threads' wait for a CPU (``run_queue_share``, None where
    unmeasurable), the 1-minute load average and CPU pressure at the end, the usable cores."""

    wall_seconds: float
    cpu_seconds: float
    run_queue_share: Optional[float]
    load_average: Optional[float]
    cpu_pressure: Optional[float]
    cores: int

    @property
    def cores_used(self) -> float:
        return self.cpu_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0

    def to_dict(self) -> dict:
        return {**asdict(self), "cores_used": self.cores_used}

    @classmethod
    def from_dict(cls, record: dict) -> "CpuShare":
        """The share a ``to_dict`` record describes (``cores_used`` is derived, not read)."""
        return cls(**{k: v for k, v in record.items() if k != "cores_used"})


def _process_cpu_seconds():
    times = os.times()
    return times.user + times.system


def _load_average():
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


class CpuMeter:
    """Started at construction; ``read()`` gives the ``CpuShare`` since then."""

    def __init__(self, cores: int):
        self.cores = max(1, int(cores))
        self._wall = time.perf_counter()
        self._cpu = _process_cpu_seconds()
        self._queue = run_queue_seconds()

    def read(self) -> CpuShare:
        wall = time.perf_counter() - self._wall
        cpu = _process_cpu_seconds() - self._cpu
        return CpuShare(wall_seconds=wall, cpu_seconds=cpu, run_queue_share=self._queue_share(),
                        load_average=_load_average(), cpu_pressure=cpu_pressure(),
                        cores=self.cores)

    def _queue_share(self):
        now = run_queue_seconds()
        if now is None or self._queue is None:
            return None
        cpu, waiting = now[0] - self._queue[0], now[1] - self._queue[1]
        if cpu <= 0 or waiting < 0:  # threads that ended took their counters along
            return None
        return waiting / (waiting + cpu)


def busy_evidence(run_queue_share: Optional[float], pressure: Optional[float],
                  load: Optional[float] = None, cores: Optional[int] = None) -> List[str]:
    """The measured signs of other processes on the cores, as phrases."""
    evidence = []
    if run_queue_share is not None:
        evidence.append(f"this process's threads waited for a CPU {run_queue_share:.0%} of "
                        "their runnable time")
    if pressure is not None:
        evidence.append(f"CPU pressure {pressure:.0f}%")
    if load is not None and cores:
        evidence.append(f"load average {load:.1f} on {cores} cores")
    return evidence


def busy_reason(shares: List[CpuShare], threads: int) -> Optional[str]:
    """Why the machine counts as busy over ``shares`` (runs of ``threads`` decode threads), or
    None: its threads waited for a CPU (the autotuner's contention threshold), CPU pressure is
    high, or more tasks were runnable than cores beyond this run's own threads."""
    if not shares:
        return None
    worst_queue = max((s.run_queue_share for s in shares if s.run_queue_share is not None),
                      default=None)
    pressure = max((s.cpu_pressure for s in shares if s.cpu_pressure is not None), default=None)
    load = max((s.load_average for s in shares if s.load_average is not None), default=None)
    cores = shares[0].cores
    busy = ((worst_queue is not None and worst_queue >= Settings().contended_runq)
            or (pressure is not None and pressure >= BUSY_PRESSURE)
            or (load is not None and load - min(threads, cores) >= cores))
    if not busy:
        return None
    used = min(s.cores_used for s in shares)
    wanted = min(threads, cores)
    evidence = busy_evidence(worst_queue, pressure, load, cores)
    return (f"the machine is busy: other processes took the cores ({'; '.join(evidence)}); "
            f"runs got as little as {used:.2f} of the {wanted} core(s) their threads could use, "
            "so these rates are low and noisy: compare them only as ratios within this run "
            "(CPU ms per image does not depend on the load), or rerun on an idle machine")
