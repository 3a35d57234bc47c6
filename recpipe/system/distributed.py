"""Which rank this process is and how many ranks read the data: explicit, or found in the
environment.

``detect_rank()`` looks, in order, at: explicit ``rank``/``world_size`` arguments, an initialised
``torch.distributed`` process group (only when torch is already imported), ``RANK``/``WORLD_SIZE``
(torchrun, accelerate), ``HOROVOD_RANK``/``HOROVOD_SIZE``, ``OMPI_COMM_WORLD_RANK``/
``OMPI_COMM_WORLD_SIZE`` (Open MPI) and ``PMI_RANK``/``PMI_SIZE`` (MPICH, Intel MPI); with none
of them the process is rank 0 of 1. A half-set pair or a malformed value raises ValueError naming
the variable instead of silently reading the whole dataset on every rank.

Loaders turn the result into ``part_index``/``num_parts``: every rank then walks the same
per-epoch permutation (same seed and epoch) and takes an equal-length part of it, so every rank
gets the same number of batches (see ``recpipe.decode.order``).

>>> detect_rank(rank=1, world_size=4)
RankInfo(rank=1, world_size=4, source='explicit')
"""

import logging
import os
import sys
from typing import NamedTuple

__all__ = ["RankInfo", "detect_rank", "ENV_PAIRS"]

log = logging.getLogger(__name__)

# (rank variable, world size variable, name of the launcher), in order of precedence
ENV_PAIRS = (
    ("RANK", "WORLD_SIZE", "torchrun"),
    ("HOROVOD_RANK", "HOROVOD_SIZE", "horovod"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "openmpi"),
    ("PMI_RANK", "PMI_SIZE", "pmi"),
)


class RankInfo(NamedTuple):
    """``rank`` in ``[0, world_size)`` and where it came from (``source``)."""

    rank: int
    world_size: int
    source: str


def _checked(rank, world_size, source):
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"{source}: rank={rank}, world_size={world_size}: need "
                         "world_size >= 1 and 0 <= rank < world_size")
    return RankInfo(rank, world_size, source)


def _from_torch():
    torch = sys.modules.get("torch")  # never import torch just to look
    if torch is None:
        return None
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return _checked(dist.get_rank(), dist.get_world_size(), "torch.distributed")


def _env_int(environ, name):
    text = environ[name].strip()
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"environment variable {name}={environ[name]!r} is not an "
                         "integer") from None


def _from_env(environ):
    for rank_name, size_name, launcher in ENV_PAIRS:
        has_rank, has_size = rank_name in environ, size_name in environ
        if not has_rank and not has_size:
            continue
        if has_rank != has_size:
            present, missing = (rank_name, size_name) if has_rank else (size_name, rank_name)
            raise ValueError(f"environment variable {present} is set but {missing} is not "
                             f"({launcher}): set both or neither")
        source = f"{rank_name}/{size_name}"
        return _checked(_env_int(environ, rank_name), _env_int(environ, size_name), source)
    return None


def detect_rank(rank=None, world_size=None, *, environ=None):
    """This process's ``RankInfo``: explicit values, else torch.distributed, else the
    environment (``environ`` defaults to ``os.environ``), else rank 0 of 1."""
    if (rank is None) != (world_size is None):
        raise ValueError(f"give both rank and world_size or neither (got rank={rank}, "
                         f"world_size={world_size})")
    if rank is not None:
        return _checked(int(rank), int(world_size), "explicit")
    found = _from_torch() or _from_env(os.environ if environ is None else environ)
    if found is None:
        found = RankInfo(0, 1, "default")
    log.debug("rank %d of %d (%s)", found.rank, found.world_size, found.source)
    return found
