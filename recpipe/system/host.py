"""What this machine gives this process: usable cores and its share of them among the ranks of
one node, available memory and CPU pressure (the probes the autotuner and doctor use).

``usable_cores()`` counts the CPUs of the affinity mask, capped by a cgroup CPU quota (v2
``cpu.max`` or v1 ``cfs_quota_us``), as containers and Kubernetes set them. ``local_ranks()``
finds how many training ranks share this node and which one this process is, from the
launcher's environment: torchrun (``LOCAL_RANK``/``LOCAL_WORLD_SIZE``), Open MPI
(``OMPI_COMM_WORLD_LOCAL_RANK``/``_SIZE``), MPICH and Intel MPI (``MPI_LOCALRANKID``/
``MPI_LOCALNRANKS``), Horovod (``HOROVOD_LOCAL_RANK``/``HOROVOD_LOCAL_SIZE``) and Slurm
(``SLURM_LOCALID``/``SLURM_NTASKS_PER_NODE``). ``node_share()`` is this rank's part of the usable
cores: with 8 ranks on a 64-core node each decodes with 8 threads at most, instead of 8
autotuners each growing towards 64.
"""

import logging
import math
import os
from typing import Mapping, NamedTuple, Optional, Tuple

__all__ = ["LOCAL_ENV_PAIRS", "LocalRanks", "available_memory", "cgroup_cpu_quota",
           "cgroup_v2_files", "cpu_pressure", "local_ranks", "node_share", "read_text",
           "usable_cores"]

log = logging.getLogger(__name__)

# (local rank variable, local size variable, launcher), in order of precedence
LOCAL_ENV_PAIRS = (
    ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "torchrun"),
    ("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "openmpi"),
    ("MPI_LOCALRANKID", "MPI_LOCALNRANKS", "mpich"),
    ("HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE", "horovod"),
    ("SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "slurm"),
)


class LocalRanks(NamedTuple):
    """This process is rank ``rank`` of ``size`` ranks on this node (``source``: the launcher)."""

    rank: int
    size: int
    source: str


def read_text(path):
    """The text of a /proc or /sys file, or "" when it cannot be read."""
    try:
        with open(path) as f:
            return f.read()
    except (OSError, ValueError):
        return ""


def cgroup_v2_files(name):
    for line in read_text("/proc/self/cgroup").splitlines():
        if line.startswith("0::"):
            yield os.path.join("/sys/fs/cgroup", line[3:].lstrip("/"), name)
    yield os.path.join("/sys/fs/cgroup", name)


def cgroup_cpu_quota():
    """CPUs allowed by the cgroup quota (v2 ``cpu.max`` or v1 ``cfs_quota_us``), None if none."""
    for path in cgroup_v2_files("cpu.max"):
        fields = read_text(path).split()
        if len(fields) == 2 and fields[0] != "max":
            return int(fields[0]) / int(fields[1])
    for folder in ("/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"):
        quota = read_text(os.path.join(folder, "cpu.cfs_quota_us")).strip()
        period = read_text(os.path.join(folder, "cpu.cfs_period_us")).strip()
        if quota and period and int(quota) > 0:
            return int(quota) / int(period)
    return None


def usable_cores() -> Tuple[int, str]:
    """``(cores, source)``: CPUs this process may use, from affinity capped by a cgroup quota."""
    try:
        cores, source = len(os.sched_getaffinity(0)), "affinity"
    except AttributeError:
        cores, source = os.cpu_count() or 1, "cpu_count"
    quota = cgroup_cpu_quota()
    if quota is not None and quota < cores:
        cores, source = quota, "cgroup"
    return max(1, math.floor(cores + 1e-9) if cores >= 1 else 1), source


def _slurm_tasks(text):
    """``SLURM_NTASKS_PER_NODE`` as Slurm writes it (``8``, or ``8(x2),4`` across nodes)."""
    return int(text.split(",")[0].split("(")[0])


def local_ranks(environ: Optional[Mapping[str, str]] = None) -> LocalRanks:
    """This process's ``LocalRanks`` from the launcher's environment (rank 0 of 1 without one).
    A malformed value raises ValueError naming the variable."""
    environ = os.environ if environ is None else environ
    for rank_name, size_name, launcher in LOCAL_ENV_PAIRS:
        if rank_name not in environ or size_name not in environ:
            continue
        try:
            rank = int(environ[rank_name])
            size = (_slurm_tasks(environ[size_name]) if launcher == "slurm"
                    else int(environ[size_name]))
        except ValueError:
            raise ValueError(f"environment variables {rank_name}={environ[rank_name]!r}, "
                             f"{size_name}={environ[size_name]!r} are not integers") from None
        if size < 1 or not 0 <= rank < size:
            raise ValueError(f"{rank_name}={rank}, {size_name}={size}: need 0 <= rank < size")
        return LocalRanks(rank, size, launcher)
    return LocalRanks(0, 1, "none")


def node_share(cores: Optional[int] = None,
               ranks: Optional[LocalRanks] = None) -> Tuple[int, str]:
    """``(cores, source)``: this rank's share of the usable cores, at least 1. The cores are
    split evenly among the node's ranks; lower local ranks take the remainder."""
    if cores is None:
        cores, source = usable_cores()
    else:
        source = "given"
    ranks = local_ranks() if ranks is None else ranks
    if ranks.size == 1:
        return cores, source
    share = cores // ranks.size + (1 if ranks.rank < cores % ranks.size else 0)
    return max(1, share), f"{source}, 1/{ranks.size} for local rank {ranks.rank} ({ranks.source})"


def available_memory() -> float:
    """Bytes this process could still allocate: MemAvailable, capped by a cgroup limit."""
    available = None
    for line in read_text("/proc/meminfo").splitlines():
        if line.startswith("MemAvailable:"):
            available = int(line.split()[1]) * 1024
    if available is None:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return math.inf
    for limit_path, usage_path in _cgroup_memory_files():
        limit, usage = read_text(limit_path).strip(), read_text(usage_path).strip()
        if limit.isdigit() and usage.isdigit() and int(limit) < 2 ** 60:
            available = min(available, max(0, int(limit) - int(usage)))
    return available


def _cgroup_memory_files():
    for path in cgroup_v2_files("memory.max"):
        yield path, os.path.join(os.path.dirname(path), "memory.current")
    for line in read_text("/proc/self/cgroup").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and "memory" in parts[1].split(","):
            folder = os.path.join("/sys/fs/cgroup/memory", parts[2].lstrip("/"))
            yield (os.path.join(folder, "memory.limit_in_bytes"),
                   os.path.join(folder, "memory.usage_in_bytes"))


def cpu_pressure():
    """PSI ``/proc/pressure/cpu`` "some avg10" (percent of time some task waited for a CPU)."""
    for line in read_text("/proc/pressure/cpu").splitlines():
        if line.startswith("some"):
            for field in line.split():
                if field.startswith("avg10="):
                    return float(field[6:])
    return None
