"""What this machine gives this process: usable cores, and its share of them among the ranks of
one node.

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
from typing import NamedTuple

__all__ = ["LOCAL_ENV_PAIRS", "LocalRanks", "cgroup_cpu_quota", "cgroup_v2_files", "local_ranks",
           "node_share", "usable_cores"]

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


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except (OSError, ValueError):
        return ""


def cgroup_v2_files(name):
    for line in _read("/proc/self/cgroup").splitlines():
        if line.startswith("0::"):
            yield os.path.join("/sys/fs/cgroup", line[3:].lstrip("/"), name)
    yield os.path.join("/sys/fs/cgroup", name)


def cgroup_cpu_quota():
    """CPUs allowed by the cgroup quota (v2 ``cpu.max`` or v1 ``cfs_quota_us``), None if none."""
    for path in cgroup_v2_files("cpu.max"):
        fields = _read(path).split()
        if len(fields) == 2 and fields[0] != "max":
            return int(fields[0]) / int(fields[1])
    for folder in ("/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"):
        quota = _read(os.path.join(folder, "cpu.cfs_quota_us")).strip()
        period = _read(os.path.join(folder, "cpu.cfs_period_us")).strip()
        if quota and period and int(quota) > 0:
            return int(quota) / int(period)
    return None


def usable_cores():
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


def local_ranks(environ=None):
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


def node_share(cores=None, ranks=None):
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
