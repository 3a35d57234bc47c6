"""Capacity planning: how many cores (and threads per rank) keep the GPUs fed.

``measure_workload(url, recipe)`` decodes a short sample of the user's own file with the user's
recipe on one thread and measures, per image: CPU seconds (``cpu``, worker thread time, which
other processes' load does not inflate), the part of it that holds the GIL (``gil``: worker time
outside the C calls that release it, plus the consumer thread's time) and the bytes read; and the
storage's read rate over a sample of records.

The model (``predict``) is Amdahl-style, per node of ``cores`` cores shared by ``ranks``
processes: each rank's decode is parallel work spread over its ``cores / ranks`` cores, but its
GIL-held part is serial within the process; the node is further capped by storage::

    rank rate = min((cores / ranks) / cpu, 1 / gil)
    node rate = min(ranks * rank rate, storage bytes/s / bytes per image)

``make_plan`` compares the node rate against ``gpus * gpu_rate`` and says how many cores are
needed, the threads per rank, and whether the GIL or the storage caps the node below the demand.
"""

import logging
import math
import time
from dataclasses import asdict, dataclass
from typing import Optional

import numpy as np

__all__ = ["Workload", "CorePrediction", "predict", "make_plan", "measure_workload",
           "CORE_COUNTS"]

log = logging.getLogger(__name__)

CORE_COUNTS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256)


@dataclass(frozen=True)
class Workload:
    """Measured costs per image: CPU seconds, GIL-held seconds (<= cpu), bytes read; and the
    storage read rate in bytes/s (None: not a limit)."""

    cpu_seconds: float
    gil_seconds: float
    bytes_per_image: float
    storage_bytes_per_s: Optional[float] = None

    def __post_init__(self):
        if not self.cpu_seconds > 0 or self.gil_seconds < 0 or self.bytes_per_image < 0:
            raise ValueError(f"a workload needs cpu_seconds > 0 and gil_seconds, "
                             f"bytes_per_image >= 0: {self}")
        if self.storage_bytes_per_s is not None and not self.storage_bytes_per_s > 0:
            raise ValueError(f"storage_bytes_per_s={self.storage_bytes_per_s} must be > 0")

    @property
    def gil_cap(self):
        """Images/s one process can reach, whatever its cores (inf when nothing holds the GIL)."""
        return 1.0 / self.gil_seconds if self.gil_seconds > 0 else math.inf

    @property
    def storage_cap(self):
        """Images/s the storage can feed (inf when unknown or no bytes are read)."""
        if self.storage_bytes_per_s is None or self.bytes_per_image == 0:
            return math.inf
        return self.storage_bytes_per_s / self.bytes_per_image


@dataclass(frozen=True)
class CorePrediction:
    """The predicted node rate at ``cores`` cores and ``ranks`` ranks, and what limits it:
    'cpu', 'gil' or 'storage'."""

    cores: float
    ranks: int
    threads_per_rank: int
    images_per_s: float
    limit: str


def predict(workload: Workload, cores: float, ranks: int = 1) -> CorePrediction:
    """The node's images/s with ``cores`` cores shared by ``ranks`` processes (module docstring)."""
    if cores <= 0 or ranks < 1:
        raise ValueError(f"cores={cores} must be > 0 and ranks={ranks} >= 1")
    per_rank_cores = cores / ranks
    cpu_rate = per_rank_cores / workload.cpu_seconds
    rank_rate, limit = (cpu_rate, "cpu") if cpu_rate <= workload.gil_cap else \
        (workload.gil_cap, "gil")
    node_rate = ranks * rank_rate
    if workload.storage_cap < node_rate:
        node_rate, limit = workload.storage_cap, "storage"
    return CorePrediction(cores, ranks, max(1, math.ceil(per_rank_cores)), node_rate, limit)


def _cores_needed(workload, demand, ranks):
    """The fewest whole cores whose predicted rate meets ``demand``, or None if no count does."""
    if min(ranks * workload.gil_cap, workload.storage_cap) < demand:
        return None
    return max(1, math.ceil(demand * workload.cpu_seconds - 1e-9))


def make_plan(workload: Workload, gpus: int, gpu_rate: float, ranks: Optional[int] = None,
              core_counts=CORE_COUNTS) -> dict:
    """The plan for ``gpus`` GPUs per node each consuming ``gpu_rate`` images/s, with ``ranks``
    processes per node (default: one per GPU): a JSON-able dict with the demand, the predicted
    rate per core count, the cores and threads per rank that meet the demand (None when the GIL
    or the storage caps the node below it), the caps, and ``advice`` sentences."""
    if gpus < 1 or not gpu_rate > 0:
        raise ValueError(f"gpus={gpus} must be >= 1 and gpu_rate={gpu_rate} > 0")
    ranks = gpus if ranks is None else ranks
    if ranks < 1:
        raise ValueError(f"ranks={ranks} must be >= 1")
    demand = gpus * gpu_rate
    table = [asdict(predict(workload, cores, ranks)) for cores in core_counts]
    needed = _cores_needed(workload, demand, ranks)
    caps = {"gil_per_rank": _finite(workload.gil_cap),
            "gil_node": _finite(ranks * workload.gil_cap),
            "storage": _finite(workload.storage_cap)}
    plan = {"workload": asdict(workload), "gpus": gpus, "gpu_rate": gpu_rate, "ranks": ranks,
            "demand_images_per_s": demand, "cores_needed": needed,
            "threads_per_rank": None if needed is None else max(1, math.ceil(needed / ranks)),
            "caps_images_per_s": caps, "table": table}
    plan["by_ranks"] = [_ranks_row(workload, demand, r) for r in sorted({1, 2, 4, gpus, 2 * gpus})]
    plan["advice"] = _advice(workload, plan)
    return plan


def _ranks_row(workload, demand, ranks):
    """Cores and threads per rank that meet ``demand`` with ``ranks`` processes, and the most
    images/s those ranks can reach (GIL and storage caps)."""
    needed = _cores_needed(workload, demand, ranks)
    return {"ranks": ranks, "cores_needed": needed,
            "threads_per_rank": None if needed is None else max(1, math.ceil(needed / ranks)),
            "max_images_per_s": _finite(min(ranks * workload.gil_cap, workload.storage_cap))}


def _finite(value):
    return None if math.isinf(value) else value


def _advice(workload, plan):
    demand, ranks, needed = plan["demand_images_per_s"], plan["ranks"], plan["cores_needed"]
    advice = []
    if needed is not None:
        advice.append(f"{needed} cores keep {plan['gpus']} GPUs at {plan['gpu_rate']:g} img/s "
                      f"fed ({demand:g} img/s): {ranks} rank(s) of {plan['threads_per_rank']} "
                      f"decode thread(s) (at {workload.cpu_seconds * 1e3:.2f} ms CPU per image)")
    if ranks * workload.gil_cap < demand:
        least = math.ceil(demand * workload.gil_seconds)
        advice.append(f"the GIL caps each rank at {workload.gil_cap:.0f} img/s "
                      f"({workload.gil_seconds * 1e6:.0f} us GIL-held per image): {ranks} "
                      f"rank(s) reach {ranks * workload.gil_cap:.0f} img/s at most; run at "
                      f"least {least} ranks (processes) per node")
    if workload.storage_cap < demand:
        advice.append(f"storage caps the node at {workload.storage_cap:.0f} img/s "
                      f"({workload.storage_bytes_per_s / 1e6:.0f} MB/s, "
                      f"{workload.bytes_per_image / 1e3:.0f} kB per image): no core count "
                      "meets the demand; use faster storage or smaller records")
    return advice


# -- measuring a sample of the user's file ----------------------------------------------------

def _storage_rate(url, storage_options, *, total=64 << 20, block=4 << 20, seed=0):
    """Bytes/s of one stream reading ``total`` bytes of ``url`` in ``block``-byte reads at
    random offsets (a cached local file reads far faster than a cold or remote one)."""
    from .io.sources import url_to_fs

    fs, path = url_to_fs(url, storage_options)
    size = int(fs.size(path))
    rng = np.random.default_rng(seed)
    count = max(1, min(total, size) // block)
    offsets = rng.integers(0, max(1, size - block), count) if size > block else [0]
    local = "file" in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,))
    rates = []
    for _ in range(3 if local else 1):  # local: the best of 3 (page faults, other jobs)
        start = time.perf_counter()
        nbytes = 0
        with fs.open(path, "rb") as f:
            for offset in offsets:
                f.seek(int(offset))
                nbytes += len(f.read(block))
        elapsed = time.perf_counter() - start
        if elapsed > 0 and nbytes:
            rates.append(nbytes / elapsed)
    return max(rates) if rates else None


def measure_workload(url: str, recipe: dict, *, images: int = 256, batch_size: int = 32,
                     dtype: str = "uint8", storage_options: Optional[dict] = None,
                     seed: int = 0) -> Workload:
    """Decode about ``images`` shuffled images of ``url`` with ``recipe`` (keywords of
    ``ImageLoader``, ``data_shape`` included, e.g. ``recpipe.decode.bench.TRAIN``) on one
    thread, and time reading up to 64 MiB of it in 4 MiB blocks: the ``Workload``."""
    from .decode.loader import ImageLoader

    settings = dict(recipe)
    data_shape = settings.pop("data_shape")
    with ImageLoader(url, batch_size, data_shape, storage_options=storage_options, threads=1,
                     dtype=dtype, shuffle=True, seed=seed, lookahead=False,
                     last_batch="partial", **settings) as loader:
        stream = iter(loader)
        next(stream)  # warm-up: caches, first-use imports
        before = loader.stats()
        consumer_start = time.thread_time()
        count = 0
        for batch in stream:
            count += len(batch[0])
            if count >= images:
                break
        consumer = time.thread_time() - consumer_start
        after = loader.stats()
        bytes_per_image = loader.reader.size / max(1, len(loader.reader))
    samples = after["samples"] - before["samples"]
    if samples < 1:
        raise ValueError(f"{url}: too few images to measure (use a file of more than "
                         f"{batch_size} images)")
    cpu = (after["cpu_seconds"] - before["cpu_seconds"]) / samples
    gil = (after["gil_seconds"] - before["gil_seconds"] + consumer) / samples
    storage = _storage_rate(url, storage_options, seed=seed)
    log.info("measured %d images of %s: %.2f ms CPU, %.0f us GIL-held, %.0f bytes per image",
             samples, url, cpu * 1e3, gil * 1e6, bytes_per_image)
    return Workload(cpu + consumer / samples, min(gil, cpu + consumer / samples),
                    bytes_per_image, storage)

