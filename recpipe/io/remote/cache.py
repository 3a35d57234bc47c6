"""A local disk cache of fixed-size blocks of remote files, with a size limit.

Blocks live at ``{directory}/{sha256(identity)[:32]}/{block number}``; ``identity`` names one
version of one file (URL plus ETag/mtime and size), so a changed object never serves stale bytes.
Blocks are written to a temporary name (``*.tmp``) then renamed (safe across threads and
processes). When the cache grows past its limit the least recently used blocks (by modification
time, refreshed on every hit) are removed, across all files under ``directory``; temporary files
count towards the limit too, and those left behind by a crashed writer (older than
``STALE_TEMP_S``) are removed first.

The cache is best-effort: it never fails a read. A block that cannot be written (a full disk,
``ENOSPC``; a file size limit, ``EFBIG``; a read-only or vanished folder) is not cached, its
temporary file is removed, the bytes already fetched are served, one warning is logged per cache
folder and process, and writes pause for ``WRITE_PAUSE_S`` before the next try. A block that
cannot be read back is a miss.

The limit: ``max_bytes`` when given; by default (``None``) ``min(DEFAULT_MAX_BYTES, the cache's
own bytes plus the free space of its disk, times FREE_SHARE)``, taken again at every write, so the
cache never takes more than half of what is free beside it, and shrinks when the disk fills.
"""

import errno
import hashlib
import logging
import os
import shutil
import threading
import time
import uuid

__all__ = ["BlockCache", "DEFAULT_MAX_BYTES", "FREE_SHARE"]

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 10 << 30
FREE_SHARE = 0.5  # of (free space + the cache's own bytes) the default limit may take
STALE_TEMP_S = 600.0  # a temporary file this old is a crashed writer's
WRITE_PAUSE_S = 30.0  # after a failed write, no write for this long

_warned: "set[str]" = set()  # cache folders whose write failure was logged in this process
_warned_lock = threading.Lock()


def _warn_once(root, exc):
    with _warned_lock:
        if root in _warned:
            log.debug("block cache %s: write failed again: %s", root, exc)
            return
        _warned.add(root)
    log.warning("block cache %s: cannot write (%s: %s); reading on without caching (the cache "
                "is tried again later)", root, type(exc).__name__, exc)


class BlockCache:
    """Blocks of ``block_size`` bytes of one remote file version, cached under ``directory``."""

    def __init__(self, directory, identity, *, max_bytes=None, block_size):
        self.root = os.fspath(directory)
        self.folder = os.path.join(self.root, hashlib.sha256(identity.encode()).hexdigest()[:32])
        self.max_bytes = max_bytes  # None: bounded by free space (``limit``)
        self.block_size = block_size
        self.hits = 0
        self.misses = 0
        self.write_errors = 0
        self._paused_until = 0.0
        self._lock = threading.Lock()

    def _path(self, block):
        return os.path.join(self.folder, f"{block:010d}")

    def get(self, block, size):
        """The cached bytes of ``block`` when present with the expected ``size``; else None."""
        path = self._path(block)
        data = None
        try:
            with open(path, "rb") as f:
                data = f.read(size + 1)
            os.utime(path)
        except OSError:  # missing, unreadable, or the utime refused: a miss / still a hit
            pass
        if data is None or len(data) != size:
            with self._lock:
                self.misses += 1
            return None
        with self._lock:
            self.hits += 1
        return data

    def put(self, block, data):
        """Store ``block`` when the cache can take it, then trim the cache to its limit; never
        raises for the disk's sake (see the module docstring)."""
        if time.monotonic() < self._paused_until:
            return
        try:
            blocks = self._blocks()
            limit = self.limit(blocks)
            if len(data) > limit:
                return
            self._trim(blocks, limit - len(data))
            self._write(block, data)
        except OSError as exc:
            with self._lock:
                self.write_errors += 1
                self._paused_until = time.monotonic() + WRITE_PAUSE_S
            _warn_once(self.root, exc)

    def _write(self, block, data):
        path = self._path(block)
        os.makedirs(self.folder, exist_ok=True)
        temp = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            with open(temp, "wb") as f:
                f.write(data)
            os.replace(temp, path)
        except BaseException:
            try:
                os.remove(temp)
            except OSError:
                pass
            raise

    def _blocks(self):
        """``(mtime_ns, size, path, temporary)`` of every file under the cache folder."""
        found = []
        for folder, _, names in os.walk(self.root):
            for name in names:
                path = os.path.join(folder, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                found.append((st.st_mtime_ns, st.st_size, path, name.endswith(".tmp")))
        return found

    def limit(self, blocks=None):
        """The size limit now: ``max_bytes``, or the default bounded by free space."""
        if self.max_bytes is not None:
            return self.max_bytes
        held = sum(size for _, size, _, _ in (self._blocks() if blocks is None else blocks))
        try:
            free = shutil.disk_usage(self.root if os.path.isdir(self.root)
                                     else _existing_parent(self.root)).free
        except OSError:
            free = 0
        return min(DEFAULT_MAX_BYTES, int((free + held) * FREE_SHARE))

    def size(self):
        """Bytes held by the whole cache directory (temporary files included)."""
        return sum(size for _, size, _, _ in self._blocks())

    def trim(self):
        """Remove least recently used blocks until the cache holds at most its limit."""
        blocks = self._blocks()
        self._trim(blocks, self.limit(blocks))

    def _trim(self, blocks, keep):
        """Remove stale temporary files, then the oldest blocks until at most ``keep`` bytes
        remain (temporary files of live writers count but stay)."""
        total = sum(size for _, size, _, _ in blocks)
        stale = time.time_ns() - int(STALE_TEMP_S * 1e9)
        for mtime, size, path, temporary in sorted(blocks, key=lambda b: (not b[3], b[0])):
            if temporary and mtime >= stale:
                continue
            if not temporary and total <= keep:
                break
            if _remove(path):
                log.debug("cache removed %s", path)
            total -= size


def _remove(path):
    try:
        os.remove(path)
        return True
    except FileNotFoundError:
        return False
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.EISDIR):
            return False
        raise


def _existing_parent(path):
    path = os.path.abspath(path)
    while not os.path.isdir(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path
