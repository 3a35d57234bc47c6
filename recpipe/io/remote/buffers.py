"""Request buffers of remote reads, reused across requests (one pool per process)."""

import sys
import threading
import time

from ...system.fork import after_fork_in_child

__all__ = ["RequestBufferPool", "SHARED_POOL_BYTES", "shared_pool"]


class RequestBufferPool:
    """Request buffers kept for reuse: a body read into a buffer that was used before lands in
    pages already mapped, where a new ``bytearray`` of several MiB costs a fresh mapping, page
    faults and zero-filling on every request (glibc hands such sizes back to the kernel when freed).

    ``get(n)`` returns ``(view, reused)``: a writable memoryview of ``n`` bytes and whether its
    buffer was used before. A buffer is free again once nothing refers to it: every holder of a
    slice holds a memoryview, which holds the buffer, so this is read from the buffer's reference
    count. At most ``keep_bytes`` are kept (past that, buffers are plain new ones), and buffers
    left unused for ``idle_s`` seconds are dropped at the next ``get``.
    """

    STEP = 1 << 20

    def __init__(self, keep_bytes, idle_s=60.0):
        self.keep_bytes = keep_bytes
        self.idle_s = idle_s
        self._buffers = []
        self._used = []  # time.monotonic() of each buffer's last get
        self._lock = threading.Lock()
        self.reused = 0
        self.allocated = 0
        probe = [bytearray(1)]
        self._idle_refs = self._refs(probe, 0)

    @staticmethod
    def _refs(buffers, i):
        return sys.getrefcount(buffers[i])

    def _idle(self, i):
        return self._refs(self._buffers, i) == self._idle_refs

    def _forget(self, i):
        self._used.pop(i)
        return len(self._buffers.pop(i))

    def get(self, n):
        now = time.monotonic()
        with self._lock:
            for i in reversed(range(len(self._buffers))):
                if now - self._used[i] > self.idle_s and self._idle(i):
                    self._forget(i)
            best = None
            for i in range(len(self._buffers)):
                size = len(self._buffers[i])
                smaller = best is None or size < len(self._buffers[best])
                if size >= n and smaller and self._idle(i):
                    best = i
            if best is not None:
                self.reused += 1
                self._used[best] = now
                return memoryview(self._buffers[best])[:n], True
            self.allocated += 1
            size = -(-n // self.STEP) * self.STEP
            held = sum(len(b) for b in self._buffers)
            for i in reversed(range(len(self._buffers))):  # make room: forget idle buffers
                if held + size <= self.keep_bytes:
                    break
                if self._idle(i):
                    held -= self._forget(i)
            if held + size > self.keep_bytes:
                return memoryview(bytearray(n)), False
            buffer = bytearray(size)
            self._buffers.append(buffer)
            self._used.append(now)
            return memoryview(buffer)[:n], False

    def held_bytes(self):
        with self._lock:
            return sum(len(b) for b in self._buffers)

    def clear(self):
        with self._lock:
            self._buffers = []
            self._used = []


_SHARED_POOL = None
_SHARED_POOL_LOCK = threading.Lock()
SHARED_POOL_BYTES = 256 << 20


def shared_pool():
    """The process's ``RequestBufferPool`` for S3 request bodies (all sources share it, so idle
    buffers stay under ``SHARED_POOL_BYTES`` however many files are open)."""
    global _SHARED_POOL
    with _SHARED_POOL_LOCK:
        if _SHARED_POOL is None:
            _SHARED_POOL = RequestBufferPool(SHARED_POOL_BYTES)
            after_fork_in_child(_SHARED_POOL, _forget_shared_pool)  # a child makes its own
        return _SHARED_POOL


def _forget_shared_pool(pool):
    global _SHARED_POOL, _SHARED_POOL_LOCK
    _SHARED_POOL_LOCK = threading.Lock()
    if _SHARED_POOL is pool:
        _SHARED_POOL = None
