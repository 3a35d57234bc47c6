"""The rules every timing of recpipe follows, shared by ``recpipe bench`` and the benchmark
suites (``benchmarks/``), so that both measure alike and their figures agree:

- runs are interleaved in rotating order (``rotated``): round ``r`` starts with job ``r``, so
  the drift of a shared machine hits every job alike, and ratios pair runs of one round;
- a figure is the median of its runs with their spread (``median_spread``); a ratio is the
  median of the rounds' paired ratios (``paired_ratios``);
- every timed run records the CPU it got (``cpu_meter.CpuMeter``), and the runs of one
  measurement together say what the machine was like (``machine_record``: the usable cores,
  the load and CPU pressure seen, and ``busy`` when other processes took the cores).
"""

import platform
import statistics
from typing import Any, Dict, Iterable, List, Optional, Sequence

from .cpu_meter import CpuShare, busy_reason

__all__ = ["rotated", "median_spread", "paired_ratios", "machine_record", "cpu_model"]


def rotated(jobs: Sequence, round_index: int) -> list:
    """``jobs`` in the order of round ``round_index``: rotated to start at job ``round_index``."""
    jobs = list(jobs)
    if not jobs:
        return jobs
    start = round_index % len(jobs)
    return jobs[start:] + jobs[:start]


def median_spread(values: Iterable[Optional[float]]) -> Dict[str, Any]:
    """``{"median", "spread": [min, max], "runs"}`` of the values that are not None (median and
    spread None when none is)."""
    runs = [v for v in values if v is not None]
    if not runs:
        return {"median": None, "spread": None, "runs": []}
    return {"median": statistics.median(runs), "spread": [min(runs), max(runs)], "runs": runs}


def paired_ratios(numerators: Sequence[Optional[float]],
                  denominators: Sequence[Optional[float]]) -> List[float]:
    """Round by round ``numerator / denominator``, where both were measured (and the
    denominator is not zero)."""
    return [n / d for n, d in zip(numerators, denominators)
            if n is not None and d is not None and d != 0]


def machine_record(shares: List[CpuShare], threads: int, cores: int,
                   cores_source: str) -> Dict[str, Any]:
    """What the machine was like over the runs whose ``shares`` these are (runs of ``threads``
    threads on ``cores`` usable cores): the load and CPU pressure seen (``[min, max]``) and
    ``busy``, the reason the rates are low and noisy when other processes took the cores."""
    loads = [s.load_average for s in shares if s.load_average is not None]
    pressure = [s.cpu_pressure for s in shares if s.cpu_pressure is not None]
    return {"cores": cores, "cores_source": cores_source,
            "load_average": [min(loads), max(loads)] if loads else None,
            "cpu_pressure": [min(pressure), max(pressure)] if pressure else None,
            "busy": busy_reason(shares, threads)}


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"
