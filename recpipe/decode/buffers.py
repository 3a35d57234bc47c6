"""``BufferPool``: batch arrays whose memory is reused once nothing refers to them any more.

A fresh ``np.empty`` for every batch costs page faults and kernel zeroing on every batch (a
float32 batch of 128x3x224x224 is 77 MB, above glibc's mmap threshold, so it is mapped and
unmapped each time). The pool hands out arrays backed by a per-lease ctypes view of pooled
memory: every array, view or tensor derived from a batch keeps that lease alive, and the memory
returns to the pool only when the last of them is gone. Users never see a batch overwritten.
"""

import ctypes
import threading
import weakref

import numpy as np

__all__ = ["BufferPool"]

# batches start on a cache line (numpy's large arrays start 16 bytes into a page): a slot's rows
# are then aligned for the C writers' vector and streaming stores
_ALIGN = 64


def _aligned(address):
    return -(-address // _ALIGN) * _ALIGN


class BufferPool:
    """Hands out numpy arrays, recycling the memory of arrays nobody references any more."""

    def __init__(self, keep=4):
        self.keep = keep
        self._free = {}
        self._lock = threading.Lock()
        self.allocated = 0
        self.reused = 0

    def set_keep(self, keep):
        """Keep at most ``keep`` free arrays of each size from now on (extra ones are freed)."""
        with self._lock:
            self.keep = keep
            for free in self._free.values():
                del free[keep:]

    def array(self, shape, dtype):
        """An uninitialised array of ``shape`` and ``dtype``."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        if nbytes == 0:
            return np.empty(shape, dtype)
        with self._lock:
            free = self._free.get(nbytes)
            owner = free.pop() if free else None
        if owner is None:
            owner = np.empty(nbytes + _ALIGN, np.uint8)
            self.allocated += 1
        else:
            self.reused += 1
        lease = (ctypes.c_char * nbytes).from_address(_aligned(owner.ctypes.data))
        weakref.finalize(lease, self._release, owner)
        return np.frombuffer(lease, dtype).reshape(shape)

    def _release(self, owner):
        with self._lock:
            free = self._free.setdefault(owner.nbytes - _ALIGN, [])
            if len(free) < self.keep:
                free.append(owner)
