"""A local disk cache of fixed-size blocks of remote files, with a size limit.

Blocks live at ``{directory}/{sha256(identity)[:32]}/{block number}``; ``identity`` names one
version of one file (URL plus ETag/mtime and size), so a changed object never serves stale bytes.
Blocks are written to a temporary name then renamed (safe across threads and processes). When the
cache grows past ``max_bytes`` the least recently used blocks (by modification time, refreshed on
every hit) are removed, across all files under ``directory``.
"""

import hashlib
import logging
import os
import threading
import uuid

__all__ = ["BlockCache"]

log = logging.getLogger(__name__)


class BlockCache:
    """Blocks of ``block_size`` bytes of one remote file version, cached under ``directory``."""

    def __init__(self, directory, identity, *, max_bytes, block_size):
        self.root = os.fspath(directory)
        self.folder = os.path.join(self.root, hashlib.sha256(identity.encode()).hexdigest()[:32])
        self.max_bytes = max_bytes
        self.block_size = block_size
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        os.makedirs(self.folder, exist_ok=True)

    def _path(self, block):
        return os.path.join(self.folder, f"{block:010d}")

    def get(self, block, size):
        """The cached bytes of ``block`` when present with the expected ``size``; else None."""
        path = self._path(block)
        try:
            with open(path, "rb") as f:
                data = f.read()
            os.utime(path)
        except FileNotFoundError:
            data = None
        if data is None or len(data) != size:
            with self._lock:
                self.misses += 1
            return None
        with self._lock:
            self.hits += 1
        return data

    def put(self, block, data):
        """Store ``block``; then trim the cache to its size limit."""
        if len(data) > self.max_bytes:
            return
        path = self._path(block)
        temp = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
        with open(temp, "wb") as f:
            f.write(data)
        os.replace(temp, path)
        self.trim()

    def _blocks(self):
        found = []
        for folder, _, names in os.walk(self.root):
            for name in names:
                if name.endswith(".tmp"):
                    continue
                path = os.path.join(folder, name)
                try:
                    st = os.stat(path)
                except FileNotFoundError:
                    continue
                found.append((st.st_mtime_ns, st.st_size, path))
        return found

    def size(self):
        """Bytes held by the whole cache directory."""
        return sum(size for _, size, _ in self._blocks())

    def trim(self):
        blocks = self._blocks()
        total = sum(size for _, size, _ in blocks)
        for _, size, path in sorted(blocks):
            if total <= self.max_bytes:
                break
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
            total -= size
            log.debug("cache evicted %s", path)
