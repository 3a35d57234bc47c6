"""The capacity model (``recpipe plan``): how many cores (and threads per rank) keep the GPUs
fed.

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

``advise_cores`` compares the node rate against ``gpus * gpu_rate`` and says how many cores are
needed, the threads per rank, and whether the GIL or the storage caps the node below the demand.
"""

import logging
import math
import os
import time
from dataclasses import asdict, dataclass
from typing import Optional

import numpy as np

__all__ = ["STORAGE_SOURCES", "Workload", "CorePrediction", "predict", "advise_cores",
           "measure_workload", "CORE_COUNTS"]

log = logging.getLogger(__name__)

CORE_COUNTS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256)


@dataclass(frozen=True)
class Workload:
    """Measured costs per image: CPU seconds, GIL-held seconds (<= cpu), bytes read; and the
    storage read rate in bytes/s (None: not a limit) with where those reads came from
    (``storage_source``, ``STORAGE_SOURCES``; None: not said)."""

    cpu_seconds: float
    gil_seconds: float
    bytes_per_image: float
    storage_bytes_per_s: Optional[float] = None
    storage_source: Optional[str] = None

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


def advise_cores(workload: Workload, gpus: int, gpu_rate: float, ranks: Optional[int] = None,
                 core_counts=CORE_COUNTS) -> dict:
    """The advice for ``gpus`` GPUs per node each consuming ``gpu_rate`` images/s, with ``ranks``
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
    report = {"workload": asdict(workload), "gpus": gpus, "gpu_rate": gpu_rate, "ranks": ranks,
              "demand_images_per_s": demand, "cores_needed": needed,
              "threads_per_rank": None if needed is None else max(1, math.ceil(needed / ranks)),
              "caps_images_per_s": caps, "table": table}
    report["by_ranks"] = [_ranks_row(workload, demand, r)
                          for r in sorted({1, 2, 4, gpus, 2 * gpus})]
    report["advice"] = _advice(workload, report)
    return report


# its name before this module was recpipe.capacity (recpipe.plan, an old path of this module)
make_plan = advise_cores


def _ranks_row(workload, demand, ranks):
    """Cores and threads per rank that meet ``demand`` with ``ranks`` processes, and the most
    images/s those ranks can reach (GIL and storage caps)."""
    needed = _cores_needed(workload, demand, ranks)
    return {"ranks": ranks, "cores_needed": needed,
            "threads_per_rank": None if needed is None else max(1, math.ceil(needed / ranks)),
            "max_images_per_s": _finite(min(ranks * workload.gil_cap, workload.storage_cap))}


def _finite(value):
    return None if math.isinf(value) else value


def _advice(workload, report):
    demand, ranks, needed = report["demand_images_per_s"], report["ranks"], report["cores_needed"]
    advice = []
    if needed is not None:
        advice.append(f"{needed} cores keep {report['gpus']} GPUs at {report['gpu_rate']:g} img/s "
                      f"fed ({demand:g} img/s): {ranks} rank(s) of {report['threads_per_rank']} "
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
    if workload.storage_source == "page cache":
        advice.append("the storage rate was read from the page cache (the file is in this "
                      "machine's memory now), not from the disk or the network the training "
                      "nodes will read: give the storage's own rate with --storage-mbps "
                      "(storage_bytes_per_s=) for advice that holds when it is not cached")
    elif workload.storage_source == "local, cache unknown":
        advice.append("the storage rate is one read of a local file whose cached share could "
                      "not be told (no mincore here): if it was in memory the rate is the "
                      "page cache's; give --storage-mbps for the storage's own")
    return advice


# -- measuring a sample of the user's file ----------------------------------------------------

# where a measured storage rate's bytes came from
STORAGE_SOURCES = ("page cache", "disk", "disk and page cache", "local, cache unknown", "remote",
                   "given")


def _libc():
    try:
        import ctypes
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long)
        libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)
        libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
        return ctypes, libc
    except (OSError, AttributeError):
        return None, None


def _cached_share(path, offsets, block):
    """The share of the ``block``-byte ranges at ``offsets`` of local file ``path`` that are in
    the page cache now, from ``mincore`` over a mapping of each range (which reads nothing and
    starts no readahead), or None where it cannot be told."""
    ctypes, libc = _libc()
    if libc is None or not hasattr(os, "sysconf"):
        return None
    page = os.sysconf("SC_PAGE_SIZE")
    resident = total = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        for offset in offsets:
            start = int(offset) // page * page
            length = min(int(offset) + block, size) - start
            if length <= 0:
                continue
            address = libc.mmap(None, length, 0x1, 0x01, fd, start)  # PROT_READ, MAP_SHARED
            if address in (None, ctypes.c_void_p(-1).value):
                return None
            try:
                pages = (length + page - 1) // page
                vector = ctypes.create_string_buffer(pages)
                if libc.mincore(address, length, vector) != 0:
                    return None
                resident += sum(byte & 1 for byte in vector.raw[:pages])
                total += pages
            finally:
                libc.munmap(address, length)
    finally:
        os.close(fd)
    return resident / total if total else None


def _storage_rate(url, storage_options, *, total=64 << 20, block=4 << 20, seed=0):
    """``(bytes/s, source)``: one stream reading ``total`` bytes of ``url`` in ``block``-byte
    reads at random offsets, and where they came from (``STORAGE_SOURCES``). A local file's
    ranges are first checked for the page cache: all of them cached, the rate is the cache's
    (the best of 3 passes); otherwise only the first pass counts (the later ones would read
    what it cached)."""
    from .io.sources import local_path, url_to_fs

    fs, path = url_to_fs(url, storage_options)
    size = int(fs.size(path))
    rng = np.random.default_rng(seed)
    count = max(1, min(total, size) // block)
    offsets = rng.integers(0, max(1, size - block), count) if size > block else [0]
    local = local_path(url, storage_options)
    block = min(block, size) or block
    share = _cached_share(local, offsets, block) if local else None
    if local is None:
        source = "remote"
    elif share is None:
        source = "local, cache unknown"
    else:
        source = ("page cache" if share >= 0.9 else "disk" if share <= 0.1
                  else "disk and page cache")
    rates = []
    for _ in range(3 if source == "page cache" else 1):
        start = time.perf_counter()
        nbytes = 0
        with fs.open(path, "rb") as f:
            for offset in offsets:
                f.seek(int(offset))
                nbytes += len(f.read(block))
        elapsed = time.perf_counter() - start
        if elapsed > 0 and nbytes:
            rates.append(nbytes / elapsed)
    return (max(rates) if rates else None), source


def measure_workload(url: str, recipe: dict, *, images: int = 256, batch_size: int = 32,
                     dtype: str = "uint8", storage_options: Optional[dict] = None,
                     seed: int = 0) -> Workload:
    """Decode about ``images`` shuffled images of ``url`` with ``recipe`` (keywords of
    ``ImageLoader``, ``data_shape`` included, e.g. ``recpipe.decode.bench.TRAIN``) on one
    thread, and time reading up to 64 MiB of it in 4 MiB blocks (first, before the decoding
    caches it; ``storage_source`` says whether the page cache served it): the ``Workload``.
    The first batch warms up and is not measured, so the file needs more than ``batch_size``
    images (ValueError saying how many it has otherwise)."""
    from .decode.loader import ImageLoader

    # storage first: the decoding below reads the file into the page cache
    storage, source = _storage_rate(url, storage_options, seed=seed)
    settings = dict(recipe)
    data_shape = settings.pop("data_shape")
    # prefetch 1: no batch is decoded ahead, so the measured batches are decoded after the
    # warm-up's snapshot and the ones handed out (with prefetch 2 the second batch was decoded
    # during the warm-up, and a file of two batches measured nothing)
    with ImageLoader(url, batch_size, data_shape, storage_options=storage_options, threads=1,
                     prefetch=1, dtype=dtype, shuffle=True, seed=seed, lookahead=False,
                     last_batch="partial", **settings) as loader:
        served = loader.num_samples
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
        raise ValueError(f"{url}: too few images to measure: it has {served}, and the first "
                         f"batch of {batch_size} only warms up (use a file of more than "
                         f"{batch_size} images, or a smaller batch size, --batch-size)")
    cpu = (after["cpu_seconds"] - before["cpu_seconds"]) / samples
    gil = (after["gil_seconds"] - before["gil_seconds"] + consumer) / samples
    log.info("measured %d images of %s: %.2f ms CPU, %.0f us GIL-held, %.0f bytes per image",
             samples, url, cpu * 1e3, gil * 1e6, bytes_per_image)
    return Workload(cpu + consumer / samples, min(gil, cpu + consumer / samples),
                    bytes_per_image, storage, source if storage is not None else None)

