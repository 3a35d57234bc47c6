"""Sequential streaming from a remote file: large chunks fetched ahead in the background.

``ReadAhead`` keeps ``depth`` chunks of ``chunk`` bytes in flight beyond the last read, drops the
chunks behind it, and serves reads (which may straddle chunks) from them. A read outside the
stream returns None: the caller restarts the stream there or reads directly. A read within one
chunk is a memoryview of it; one that straddles chunks is joined into new bytes.
"""

import threading
from collections import deque
from concurrent.futures import Future
from typing import Deque, Tuple

__all__ = ["ReadAhead"]


class ReadAhead:
    """Chunks ``[start, end)`` as futures from ``submit(start, end)``, ahead of a moving reader."""

    def __init__(self, submit, size, *, chunk, depth, timeout):
        self.submit = submit
        self.size = size
        self.chunk = chunk
        self.depth = depth
        self.timeout = timeout
        self._lock = threading.Lock()
        self._chunks: Deque[Tuple[int, int, Future]] = deque()  # (start, end, future), contiguous
        self._next = None

    def restart(self, offset):
        """Drop the stream and start a new one at ``offset``."""
        with self._lock:
            self._cancel()
            self._next = offset

    def _cancel(self):
        for _, _, future in self._chunks:
            future.cancel()
        self._chunks.clear()

    def _plan_until(self, pos):
        while self._next is not None and self._next < min(pos, self.size):
            end = min(self._next + self.chunk, self.size)
            self._chunks.append((self._next, end, self.submit(self._next, end)))
            self._next = end

    def read(self, offset, length):
        """Bytes ``[offset, offset+length)`` when the stream covers ``offset``; else None."""
        with self._lock:
            first = self._chunks[0][0] if self._chunks else self._next
            if first is None or not first <= offset <= (self._next or 0):
                return None
            while self._chunks and self._chunks[0][1] <= offset:
                self._chunks.popleft()
            self._plan_until(offset + length + self.depth * self.chunk)
            wanted = [c for c in self._chunks if c[0] < offset + length and c[1] > offset]
        parts = []
        for start, end, future in wanted:
            data = memoryview(future.result(self.timeout))
            parts.append(data[max(0, offset - start):min(end, offset + length) - start])
        if len(parts) == 1:
            return parts[0]  # within one chunk: a view of it, no copy
        return b"".join(parts)

    def close(self):
        with self._lock:
            self._cancel()
            self._next = None
