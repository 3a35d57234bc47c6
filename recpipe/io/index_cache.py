"""A binary sidecar of a parsed ``.idx``, memory-mapped read-only.

Parsing a 17M-line ``.idx`` takes about a second even with numpy; the cache makes every later
open a few milliseconds, and because its arrays are a read-only ``mmap`` of one file, every
DataLoader worker and every rank on a node shares the same pages (no copy per process).

The cache lives beside the ``.idx`` (``.NAME.idx.recpipe-cache``) when that folder is writable,
else under ``$RECPIPE_CACHE_DIR`` or ``$XDG_CACHE_HOME/recpipe`` (``~/.cache/recpipe``). It
records the ``.idx``'s size, modification time and a hash of its first and last MiB, and is
used only when all three still match; a stale, truncated or corrupt cache is ignored (logged)
and rebuilt, written atomically (temporary file + rename). ``RECPIPE_INDEX_CACHE=0`` turns it
off; indexes under ``RECPIPE_INDEX_CACHE_MIN_BYTES`` (4 MiB) are not cached.

Layout (little-endian): a 64-byte header ``b"RPIDX\\x00\\x01\\x00"``, record count, flags (bit 0:
keys present), ``.idx`` size, ``.idx`` mtime in ns, 16-byte blake2b of the ``.idx``'s head and
tail, 8 reserved bytes; then the int64 offsets, then the int64 keys when present.
"""

import hashlib
import logging
import os
import struct

import numpy as np

from ..errors import RecordFormatError
from .index import parse_index, read_index, read_index_bytes
from .index_table import IndexTable, local_chunks, memory_chunks, parse_index_chunks
from .sources import local_path

__all__ = ["cache_path", "enabled", "load_cached", "load_index_table", "min_cached_bytes",
           "store_cached"]

log = logging.getLogger(__name__)

_MAGIC = b"RPIDX\x00\x01\x00"
_HEADER = struct.Struct("<8sQQQQ16s8x")
_HASH_SPAN = 1 << 20


def enabled():
    return os.environ.get("RECPIPE_INDEX_CACHE", "1").strip().lower() not in ("0", "false", "no",
                                                                             "off")


def min_cached_bytes():
    """Smaller ``.idx`` files are not cached (they parse in milliseconds):
    ``$RECPIPE_INDEX_CACHE_MIN_BYTES``, default 4 MiB (about 250,000 records)."""
    return int(os.environ.get("RECPIPE_INDEX_CACHE_MIN_BYTES", 4 << 20))


def _user_cache_dir():
    base = os.environ.get("RECPIPE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "recpipe")
    return os.path.join(base, "index")


def _beside(idx_path):
    folder, name = os.path.split(os.path.abspath(idx_path))
    return os.path.join(folder, f".{name}.recpipe-cache")


def _in_user_cache(idx_path):
    digest = hashlib.blake2b(os.path.abspath(idx_path).encode(), digest_size=12).hexdigest()
    return os.path.join(_user_cache_dir(), f"{digest}.recpipe-cache")


def cache_path(idx_path):
    """Where the cache of ``idx_path`` is (the existing one first), or would be written."""
    beside = _beside(idx_path)
    if os.path.exists(beside) or os.access(os.path.dirname(beside), os.W_OK):
        return beside
    return _in_user_cache(idx_path)


def _fingerprint(idx_path):
    """``(size, mtime_ns, hash of the first and last MiB)`` of the ``.idx``."""
    info = os.stat(idx_path)
    digest = hashlib.blake2b(digest_size=16)
    with open(idx_path, "rb") as f:
        digest.update(f.read(_HASH_SPAN))
        if info.st_size > _HASH_SPAN:
            f.seek(max(_HASH_SPAN, info.st_size - _HASH_SPAN))
            digest.update(f.read(_HASH_SPAN))
    return info.st_size, info.st_mtime_ns, digest.digest()


def load_cached(idx_path):
    """The cached ``IndexTable`` of ``idx_path`` (arrays mapped read-only), or None."""
    if not enabled():
        return None
    for path in (_beside(idx_path), _in_user_cache(idx_path)):
        if os.path.exists(path):
            table = _load(path, idx_path)
            if table is not None:
                return table
    return None


def _load(path, idx_path):
    try:
        with open(path, "rb") as f:
            header = f.read(_HEADER.size)
        file_size = os.path.getsize(path)
    except OSError as e:
        log.warning("index cache %s unreadable (%s): parsing %s", path, e, idx_path)
        return None
    if len(header) != _HEADER.size:
        log.warning("index cache %s is truncated: rebuilding it", path)
        return None
    magic, count, flags, size, mtime_ns, digest = _HEADER.unpack(header)
    if magic != _MAGIC:
        log.warning("index cache %s is not a recpipe index cache: rebuilding it", path)
        return None
    if (size, mtime_ns, digest) != _fingerprint(idx_path):
        log.info("index cache %s is stale (%s changed): rebuilding it", path, idx_path)
        return None
    has_keys = bool(flags & 1)
    if file_size != _HEADER.size + 8 * count * (2 if has_keys else 1):
        log.warning("index cache %s has %d bytes, not what its header says: rebuilding it", path,
                    file_size)
        return None
    if count == 0:
        return IndexTable(np.zeros(0, np.int64))
    offsets = np.memmap(path, dtype="<i8", mode="r", offset=_HEADER.size, shape=(count,))
    keys = None
    if has_keys:
        keys = np.memmap(path, dtype="<i8", mode="r", offset=_HEADER.size + 8 * count,
                         shape=(count,))
    table = IndexTable(offsets, keys)
    if count and (int(offsets.min()) < 0):
        log.warning("index cache %s holds negative offsets: rebuilding it", path)
        return None
    return table


def store_cached(idx_path, table):
    """Write the cache of ``table`` for ``idx_path`` atomically; failures only log."""
    if not enabled() or isinstance(table.keys, list):
        return None
    path = cache_path(idx_path)
    temp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        size, mtime_ns, digest = _fingerprint(idx_path)
        keys = None if table.identity else np.asarray(table.keys, dtype="<i8")
        with open(temp, "wb") as f:
            f.write(_HEADER.pack(_MAGIC, len(table), 0 if keys is None else 1, size, mtime_ns,
                                 digest))
            np.ascontiguousarray(table.offsets, dtype="<i8").tofile(f)
            if keys is not None:
                keys.tofile(f)
        os.replace(temp, path)
    except OSError as e:
        log.info("could not write the index cache %s (%s): later opens parse %s again", path, e,
                 idx_path)
        try:
            os.unlink(temp)
        except OSError:
            pass
        return None
    log.debug("wrote index cache %s", path)
    return path


def load_index_table(url, storage_options=None, *, key_type=int, cache=True):
    """The ``IndexTable`` of the ``.idx`` at ``url``: from the memory-mapped cache beside it
    when valid (local files, integer keys), else parsed (and cached)."""
    path = local_path(url, storage_options)
    if key_type is int and path is not None:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no such file: {url}")
        cache = cache and os.path.getsize(path) >= min_cached_bytes()
        if cache:
            table = load_cached(path)
            if table is not None:
                return table
        table = parse_index_chunks(local_chunks(path), path=str(url))
        if table is None:
            table = _text_table(url, storage_options, key_type)
        if cache:
            store_cached(path, table)
        return table
    data = read_index_bytes(url, storage_options)
    table = parse_index_chunks(memory_chunks(data), path=str(url)) if key_type is int else None
    if table is None:
        keys, offsets = parse_index(_decode(data, url), path=str(url), key_type=key_type)
        table = IndexTable.from_lists(keys, offsets)
    return table


def _text_table(url, storage_options, key_type):
    keys, offsets = read_index(url, storage_options, key_type=key_type)
    return IndexTable.from_lists(keys, offsets)


def _decode(data, url):
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        raise RecordFormatError(f"not a text file ({e.reason})", path=str(url), offset=e.start) from e

