"""A binary sidecar of a parsed ``.idx``, memory-mapped read-only.

Parsing a 17M-line ``.idx`` takes about a second even with numpy; the cache makes every later
open a few milliseconds, and because its arrays are a read-only ``mmap`` of one file, every
DataLoader worker and every rank of one user on a node shares the same pages (no copy per
process).

Datasets often sit in folders other users can write (``/scratch``, ``/tmp``, a team share), so
the cache never lives there: it is kept in a folder of the user's own,
``$RECPIPE_CACHE_DIR/index-UID`` or ``$XDG_CACHE_HOME/recpipe/index-UID``
(``~/.cache/recpipe/index-UID``), created mode 0700. A cache is trusted only when that folder
and the file are owned by the current user and writable by nobody else, the file is a regular
file (opened without following links and without blocking: a FIFO or a link at the cache name
is ignored), and it describes the very ``.idx`` and ``.rec`` being opened: their device, inode,
size, modification and change times (the change time cannot be set by anyone), and a hash of
the first and last MiB of the ``.idx``. The identity of the ``.idx`` is taken from the open
file that was parsed, before and after the parse: an index replaced during the parse is parsed
again, and never cached under the new file's identity. A cache is written to a unique
temporary file (``mkstemp``: exclusive, no links followed) and renamed into place, so
concurrent builders, even with the same pid in different containers, never share a temporary
and readers never see a partial cache; caches are only ever replaced, never truncated, so a
mapping stays valid. ``RECPIPE_INDEX_CACHE=0`` turns it off; indexes under
``RECPIPE_INDEX_CACHE_MIN_BYTES`` (4 MiB; units like ``4M``, ``4MiB``) are not cached.

Layout (little-endian): a 128-byte header ``b"RPIDX\\x00\\x02\\x00"``, record count, flags
(bit 0: keys present), the ``.idx`` identity (device, inode, size, mtime ns, ctime ns, 16-byte
blake2b of its head and tail), the ``.rec`` identity (device, inode, size, mtime ns, ctime ns;
zeros when not bound), 8 reserved bytes; then the int64 offsets, then the int64 keys when present.
"""

import hashlib
import logging
import mmap
import os
import re
import stat
import struct
import tempfile

import numpy as np

from .index_table import IndexTable

__all__ = ["cache_path", "cached_arrays", "enabled", "load_cached", "min_cached_bytes",
           "parse_byte_size", "store_cached"]

log = logging.getLogger(__name__)

_MAGIC = b"RPIDX\x00\x02\x00"
_HEADER = struct.Struct("<8sQQ" "QQQqq16s" "QQQqq" "8x")
_HASH_SPAN = 1 << 20
_PARSE_ATTEMPTS = 3
_NO_REC = (0, 0, 0, 0, 0)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
               | getattr(os, "O_CLOEXEC", 0))


def enabled():
    return os.environ.get("RECPIPE_INDEX_CACHE", "1").strip().lower() not in ("0", "false", "no",
                                                                             "off")


def parse_byte_size(text, *, name="size"):
    """``"4M"``, ``"4MiB"``, ``"4MB"``, ``"4194304"`` -> 4194304 (binary units K, M, G, T;
    ``B``/``iB`` optional). ValueError naming ``name`` otherwise."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([KMGT]?)(?:I?B)?\s*", str(text), re.IGNORECASE)
    if not match:
        raise ValueError(f"{name}={text!r} is not a byte size (use e.g. 4194304, 4M or 4MiB)")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def min_cached_bytes():
    """Smaller ``.idx`` files are not cached (they parse in milliseconds):
    ``$RECPIPE_INDEX_CACHE_MIN_BYTES``, default 4 MiB (about 250,000 records)."""
    text = os.environ.get("RECPIPE_INDEX_CACHE_MIN_BYTES")
    if text is None or not text.strip():
        return 4 << 20
    return parse_byte_size(text, name="RECPIPE_INDEX_CACHE_MIN_BYTES")


def _user_cache_dir():
    base = os.environ.get("RECPIPE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "recpipe")
    return os.path.join(base, f"index-{os.geteuid()}")


def cache_path(idx_path):
    """Where the cache of ``idx_path`` is, or would be written (in the user's own folder)."""
    digest = hashlib.blake2b(os.path.abspath(idx_path).encode(), digest_size=12).hexdigest()
    return os.path.join(_user_cache_dir(), f"{digest}.recpipe-cache")


def _private(info):
    """True when ``info`` (an ``os.stat_result``) is owned by us and writable by nobody else."""
    return info.st_uid == os.geteuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _private_folder(folder, create):
    """True when ``folder`` is a real folder of ours that only we can write (made when asked)."""
    if create:
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
        except OSError as e:
            log.info("cannot create the index cache folder %s (%s)", folder, e)
            return False
    try:
        info = os.lstat(folder)
    except OSError:
        return False
    if stat.S_ISDIR(info.st_mode) and _private(info):
        return True
    log.warning("index cache folder %s is not a folder only this user can write: "
                "the index cache is not used", folder)
    return False


def _identity(info):
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


def _edge_hash(fd, size):
    """blake2b of the first and last MiB of the open file ``fd``."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(os.pread(fd, min(_HASH_SPAN, size), 0))  # no 1 MiB buffer for a small file
    if size > _HASH_SPAN:
        start = max(_HASH_SPAN, size - _HASH_SPAN)
        digest.update(os.pread(fd, size - start, start))
    return digest.digest()


def _idx_fingerprint(idx_path):
    """``(dev, ino, size, mtime_ns, ctime_ns, edge hash)`` of the file now at ``idx_path``."""
    fd = os.open(idx_path, _OPEN_FLAGS)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{idx_path} is not a regular file")
        return _identity(info) + (_edge_hash(fd, info.st_size),)
    finally:
        os.close(fd)


def _rec_identity(rec_path):
    return _NO_REC if rec_path is None else _identity(os.stat(rec_path))


def load_cached(idx_path, rec_path=None):
    """The cached ``IndexTable`` of ``idx_path`` (arrays mapped read-only), or None when there
    is no cache this user can trust for this ``.idx`` (and ``.rec``, when given)."""
    arrays = _load_arrays(idx_path, rec_path)
    return None if arrays is None else IndexTable(*arrays)


def _load_arrays(idx_path, rec_path):
    """``(offsets, keys)`` of the trusted cache of ``idx_path``, or None (``load_cached``)."""
    if not enabled() or not _private_folder(_user_cache_dir(), create=False):
        return None
    path = cache_path(idx_path)
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as e:  # a link at the cache name (ELOOP), no permission...
        log.warning("index cache %s not opened (%s): parsing %s", path, e, idx_path)
        return None
    try:
        return _load(fd, path, idx_path, rec_path)
    except OSError as e:
        log.warning("index cache %s unreadable (%s): parsing %s", path, e, idx_path)
        return None
    finally:
        os.close(fd)


def _load(fd, path, idx_path, rec_path):
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or not _private(info):
        log.warning("index cache %s is not a regular file that only this user can write: "
                    "ignored", path)
        return None
    header = os.pread(fd, _HEADER.size, 0)
    if len(header) != _HEADER.size:
        log.warning("index cache %s is truncated: rebuilding it", path)
        return None
    magic, count, flags, *fields = _HEADER.unpack(header)
    if magic != _MAGIC:
        log.warning("index cache %s is not a recpipe index cache: rebuilding it", path)
        return None
    if tuple(fields[:6]) != _idx_fingerprint(idx_path) or (
            rec_path is not None and tuple(fields[6:]) != _rec_identity(rec_path)):
        log.info("index cache %s is stale (%s or its .rec changed): rebuilding it", path, idx_path)
        return None
    has_keys = bool(flags & 1)
    if info.st_size != _HEADER.size + 8 * count * (2 if has_keys else 1):
        log.warning("index cache %s has %d bytes, not what its header says: rebuilding it", path,
                    info.st_size)
        return None
    if count == 0:
        return np.zeros(0, np.int64), None
    mapping = mmap.mmap(fd, info.st_size, access=mmap.ACCESS_READ)  # ours: never truncated
    offsets = np.frombuffer(mapping, dtype="<i8", count=count, offset=_HEADER.size)
    keys = None
    if has_keys:
        keys = np.frombuffer(mapping, dtype="<i8", count=count, offset=_HEADER.size + 8 * count)
    if int(offsets.min()) < 0:
        log.warning("index cache %s holds negative offsets: rebuilding it", path)
        return None
    return offsets, keys


def store_cached(idx_path, table, *, fingerprint=None, rec_identity=_NO_REC):
    """Write the cache of ``table`` for ``idx_path`` atomically; failures only log.
    ``fingerprint`` is the identity of the ``.idx`` file that was parsed into ``table``."""
    keys = None if table.identity else table.keys
    return _store(idx_path, table.offsets, keys, fingerprint, rec_identity)


def _store(idx_path, offsets, keys, fingerprint, rec_identity):
    if not enabled() or isinstance(keys, list):
        return None
    folder = _user_cache_dir()
    if not _private_folder(folder, create=True):
        return None
    path = cache_path(idx_path)
    temp = None
    try:
        fingerprint = fingerprint or _idx_fingerprint(idx_path)
        keys = None if keys is None else np.asarray(keys, dtype="<i8")
        fd, temp = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")  # O_EXCL, mode 0600
        with os.fdopen(fd, "wb") as f:
            f.write(_HEADER.pack(_MAGIC, len(offsets), 0 if keys is None else 1, *fingerprint,
                                 *rec_identity))
            np.ascontiguousarray(offsets, dtype="<i8").tofile(f)
            if keys is not None:
                keys.tofile(f)
        os.replace(temp, path)  # replaces whatever is at the name (a link is not followed)
    except OSError as e:
        log.info("could not write the index cache %s (%s): later opens parse %s again", path, e,
                 idx_path)
        if temp is not None:
            try:
                os.unlink(temp)
            except OSError:
                pass
        return None
    log.debug("wrote index cache %s", path)
    return path


def cached_arrays(idx_source, rec_source, build):
    """``(offsets, keys)`` of the local ``.idx`` open as ``idx_source`` (a ``LocalSource``):
    from its cache when that is valid (bound to ``rec_source``'s file when it is a local one),
    else ``build(idx_source)`` (its parse), cached when it is large enough and neither file
    changed while it was parsed. The cache knows nothing of the ``.idx`` text: the parse is
    ``build``'s (``index.parse_idx``)."""
    if not enabled() or idx_source.size < min_cached_bytes():
        return build(idx_source)
    path = idx_source.path
    rec_path = rec_source.path if getattr(rec_source, "descriptor", None) is not None else None
    arrays = _load_arrays(path, rec_path)
    if arrays is None:
        rec_before = _rec_identity(rec_path)
        arrays, fingerprint = _built(idx_source, build)
        if fingerprint is not None and rec_before == _rec_identity(rec_path):
            offsets, keys = arrays
            _store(path, offsets, keys, fingerprint, rec_before)
    return arrays


def _built(source, build):
    """``(arrays, fingerprint)``: ``build(source)`` and the identity of the file it read, equal
    before and after the build (parsed again when the file changed meanwhile; None when it kept
    changing: not cached)."""
    fd = source.descriptor()
    for _ in range(_PARSE_ATTEMPTS):
        before = os.fstat(fd)
        arrays = build(source)
        after = os.fstat(fd)
        if _identity(before)[:4] == _identity(after)[:4]:  # ctime moves on unlink too
            return arrays, _identity(after) + (_edge_hash(fd, after.st_size),)
        log.warning("%s changed while it was parsed: parsing it again", source.url)
    log.warning("%s kept changing while it was parsed: not caching it", source.url)
    return arrays, None
