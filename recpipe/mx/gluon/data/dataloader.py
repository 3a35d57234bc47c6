"""``mx.gluon.data.DataLoader`` without MXNet: batches of a dataset (``ImageRecordDataset``, or
anything with ``__getitem__`` and ``__len__``), made by worker threads.

The keywords are gluon's: ``batch_size``, ``shuffle``, ``sampler``, ``last_batch`` ('keep', the
default; 'discard'; 'rollover': the rest starts the next epoch), ``batch_sampler``,
``batchify_fn``, ``num_workers``, ``pin_memory``, ``pin_device_id``, ``prefetch``,
``thread_pool`` and ``timeout``. Differences, each because the arrays are numpy arrays in this
process: ``num_workers`` are threads, not processes (decoding releases the GIL; ``thread_pool``
is accepted and always true), ``pin_memory`` changes nothing, and a shuffled epoch's order comes
from ``mx.random.seed``'s seed and the epoch's number when a seed was given (so runs repeat),
else from fresh entropy. Batches keep the dataset's order within the sampler's; the default
``batchify_fn`` stacks images into one ``NDArray`` (numpy, with ``.asnumpy()``) and labels into
another. The worker threads belong to one iteration: they stop when it ends, is closed, or is
dropped, and a batch that takes longer than ``timeout`` seconds raises TimeoutError.
"""

import collections
import concurrent.futures
import itertools
import math
from typing import Deque

import numpy as np

from ...arrays import NDArray
from ...random import current_seed

__all__ = ["DataLoader", "default_batchify_fn"]

_LAST_BATCH = ("keep", "discard", "rollover")


def default_batchify_fn(data):
    """gluon's: arrays stacked, tuples batched element by element, numbers into an array."""
    first = data[0]
    if isinstance(first, np.ndarray):
        return np.stack(data).view(NDArray)
    if isinstance(first, (tuple, list)):
        return [default_batchify_fn(list(column)) for column in zip(*data)]
    return np.asarray(data).view(NDArray)


class DataLoader:
    """Batches of ``dataset`` (gluon's keywords; module docstring)."""

    def __init__(self, dataset, batch_size=None, shuffle=False, sampler=None, last_batch=None,
                 batch_sampler=None, batchify_fn=None, num_workers=0, pin_memory=False,
                 pin_device_id=0, prefetch=None, thread_pool=False, timeout=120,
                 try_nopython=None):
        if batch_sampler is not None:
            if batch_size is not None or shuffle or sampler is not None \
                    or last_batch is not None:
                raise ValueError("batch_size, shuffle, sampler and last_batch must not be "
                                 "given with batch_sampler")
        else:
            if batch_size is None or int(batch_size) < 1:
                raise ValueError(f"batch_size={batch_size!r}: give a number >= 1 (or a "
                                 "batch_sampler)")
            if shuffle and sampler is not None:
                raise ValueError("shuffle must not be given with a sampler")
            if (last_batch or "keep") not in _LAST_BATCH:
                raise ValueError(f"last_batch={last_batch!r}: expected one of {_LAST_BATCH}")
        if int(num_workers) < 0:
            raise ValueError(f"num_workers={num_workers!r} must be >= 0")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout={timeout!r} must be positive (seconds)")
        self._dataset = dataset
        self._batch_size = 0 if batch_size is None else int(batch_size)  # 0: batch_sampler
        self._shuffle = bool(shuffle)
        self._sampler = sampler
        self._last_batch = last_batch or "keep"
        self._batch_sampler = batch_sampler
        self._batchify_fn = batchify_fn or default_batchify_fn
        self._num_workers = int(num_workers)
        self._prefetch = max(1, int(prefetch) if prefetch is not None
                             else 2 * max(1, self._num_workers))
        self._timeout = timeout
        self._epoch = 0
        self._carried = []  # 'rollover': the samples left from the last epoch

    def _order(self):
        if self._sampler is not None:
            return list(self._sampler)
        count = len(self._dataset)
        if not self._shuffle:
            return list(range(count))
        seed = current_seed()
        rng = np.random.default_rng(None if seed is None else (seed, self._epoch))
        return rng.permutation(count).tolist()

    def _batches(self):
        if self._batch_sampler is not None:
            return [list(batch) for batch in self._batch_sampler]
        order = self._carried + self._order()
        size = self._batch_size
        whole = len(order) // size * size
        batches = [order[i:i + size] for i in range(0, whole, size)]
        rest = order[whole:]
        self._carried = rest if self._last_batch == "rollover" else []
        if rest and self._last_batch == "keep":
            batches.append(rest)
        return batches

    def __len__(self):
        if self._batch_sampler is not None:
            return len(self._batch_sampler)
        count = len(self._carried) + (len(self._sampler) if self._sampler is not None
                                      else len(self._dataset))
        if self._last_batch == "keep":
            return math.ceil(count / self._batch_size)
        return count // self._batch_size

    def _make(self, indices):
        return self._batchify_fn([self._dataset[index] for index in indices])

    def __iter__(self):
        batches = self._batches()
        self._epoch += 1
        if self._num_workers == 0:
            return (self._make(indices) for indices in batches)
        return self._threaded(batches)

    def _threaded(self, batches):
        pool = concurrent.futures.ThreadPoolExecutor(self._num_workers,
                                                     thread_name_prefix="recpipe-mx-loader")
        pending: Deque[concurrent.futures.Future] = collections.deque()
        queued = iter(batches)
        try:
            for indices in itertools.islice(queued, self._prefetch):
                pending.append(pool.submit(self._make, indices))
            while pending:
                try:
                    batch = pending.popleft().result(timeout=self._timeout)
                except concurrent.futures.TimeoutError:
                    raise TimeoutError(f"DataLoader: a batch took more than {self._timeout} s "
                                       "(timeout=)") from None
                for indices in itertools.islice(queued, 1):
                    pending.append(pool.submit(self._make, indices))
                yield batch
        finally:
            # stopped early (an error, close(), the iteration dropped): queued batches are
            # cancelled and the running ones waited for, up to the timeout (a batch cannot be
            # interrupted); the threads are joined unless one is still running then
            for future in pending:
                future.cancel()
            _, running = concurrent.futures.wait(pending, timeout=self._timeout)
            pool.shutdown(wait=not running)
