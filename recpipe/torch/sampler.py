"""``ShardSampler``: this rank's record positions of each epoch, for
``DataLoader(sampler=...)``."""

from ..decode.order import epoch_order
from ..system.distributed import detect_rank

__all__ = ["ShardSampler"]


class ShardSampler:
    """Record positions of this rank for each epoch, for ``DataLoader(sampler=...)``.

    The same permutation on every rank for a given ``seed`` and epoch (``set_epoch``), cut into
    equal parts (wrapping around), so every rank gets the same number of samples. ``shuffle``:
    False, True/'full' or 'block' (runs of consecutive records: sequential reads).
    """

    def __init__(self, num_records, *, shuffle=False, seed=0, rank=None, world_size=None):
        info = detect_rank(rank, world_size)
        self.num_records = int(num_records)
        self.shuffle = {False: "none", None: "none", True: "full"}.get(shuffle, shuffle)
        self.seed = int(seed)
        self.rank, self.world_size = info.rank, info.world_size
        self.epoch = 0
        self._order(0)  # validate now

    def set_epoch(self, epoch):
        """Make the next ``iter`` yield epoch ``epoch``'s order (call it before each epoch)."""
        self.epoch = int(epoch)

    def _order(self, epoch):
        return epoch_order(self.num_records, shuffle=self.shuffle, seed=self.seed, epoch=epoch,
                           part_index=self.rank, num_parts=self.world_size)

    def __iter__(self):
        return iter(self._order(self.epoch).tolist())

    def __len__(self):
        return len(self._order(0))
