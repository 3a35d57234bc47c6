"""``mx.kvstore.create`` without MXNet, for what data code asks of it: ``rank`` and
``num_workers`` (to pass to ``ImageRecordIter(part_index=kv.rank, num_parts=kv.num_workers)``).

``local`` and ``device`` stores are one worker (rank 0 of 1), as MXNet's; ``dist_*``,
``horovod`` and ``byteps`` take this process's rank and world size from the environment
(``recpipe.system.distributed.detect_rank``: torch.distributed, ``RANK``/``WORLD_SIZE``, Horovod or
MPI variables), where MXNet would ask its parameter server or Horovod. Pushing and pulling
values is training, MXNet's own: those methods raise saying so. With MXNet installed,
``mx.kvstore`` is MXNet's. (Named ``kvstores`` so that ``mx.kvstore`` can be either.)
"""

from ..system.distributed import detect_rank
from .coverage import not_covered

__all__ = ["KVStore", "create"]

_LOCAL = ("local", "device", "nccl", "local_update_cpu", "local_allreduce_cpu",
          "local_allreduce_device")
_DISTRIBUTED = ("dist_sync", "dist_async", "dist_sync_device", "dist_async_device", "dist",
                "dist_device_sync", "horovod", "byteps", "p3")


class KVStore:
    """The rank and worker count of a key-value store (``type``, ``rank``, ``num_workers``)."""

    def __init__(self, name, rank, num_workers):
        self.type = name
        self.rank = rank
        self.num_workers = num_workers

    def __repr__(self):
        return f"KVStore({self.type!r}, rank={self.rank}, num_workers={self.num_workers})"

    def __getattr__(self, name):
        raise not_covered("mx.kvstore.KVStore", name)


def create(name="local"):
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, not {type(name).__name__}")
    if name in _LOCAL:
        return KVStore(name, 0, 1)
    if name in _DISTRIBUTED or name.startswith("dist"):
        info = detect_rank()
        return KVStore(name, info.rank, info.world_size)
    raise ValueError(f"unknown kvstore type {name!r}: expected one of {_LOCAL + _DISTRIBUTED}")


def __getattr__(name):
    raise not_covered("mx.kvstore", name)
