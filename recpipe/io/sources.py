"""Byte sources behind the readers: thread-safe positional reads from a local file or any fsspec
URL.

A source knows its size and answers ``read(offset, length)`` without shared seek state, so many
threads may read at once. Local files use ``os.pread`` (which releases the GIL); every other
filesystem gets a ``RemoteSource`` (``recpipe.io.remote``: range requests with retries,
streaming read-ahead, coalesced prefetching and an optional block cache). Sources re-open
themselves in a forked child.

``storage_options`` are fsspec's (``endpoint_url``, ``key``/``secret``, ``anon``, ``profile``,
``client_kwargs``, ``config_kwargs``...) plus an optional ``"recpipe"`` dict of recpipe's own remote
settings (``recpipe.io.remote.options``), removed before fsspec sees them.
"""

import errno
import logging
import os
import stat
import threading
from typing import Optional

import fsspec
from fsspec.implementations.local import LocalFileSystem

from ..system.fork import after_fork_in_child
from .source import Source

__all__ = ["BytesSource", "FsspecSource", "LocalSource", "S3_CLIENT_DEFAULTS", "Source", "exists",
           "local_path", "open_present", "open_regular", "open_source", "read_small_file",
           "source_identity", "url_to_fs"]

log = logging.getLogger(__name__)

# botocore settings for S3 unless the caller gives their own: enough pooled connections for
# concurrent range requests (botocore's default is 10), bounded waits, and botocore's "standard"
# retries for HTTP statuses; recpipe retries what botocore cannot see (bodies cut short).
S3_CLIENT_DEFAULTS = {
    "max_pool_connections": 64,
    "connect_timeout": 5,
    "read_timeout": 15,
    "retries": {"mode": "standard", "max_attempts": 3},
}


def _protocol(url):
    url = str(url)
    return url.split("://", 1)[0].lower() if "://" in url else "file"


def _with_s3_defaults(fs_options):
    options = dict(fs_options)
    config = dict(S3_CLIENT_DEFAULTS)
    config.update(options.get("config_kwargs") or {})
    options["config_kwargs"] = config
    return options


def url_to_fs(url, storage_options=None):
    """Return ``(filesystem, path)`` for an fsspec URL or local path.

    ``hdfs://`` uses the client chosen by ``recpipe.io.remote.hdfs.hdfs_impl`` (never whichever
    package last registered fsspec's ``hdfs`` protocol); ``s3://`` gets ``S3_CLIENT_DEFAULTS``.
    """
    from .remote.options import split_storage_options

    options, fs_options = split_storage_options(storage_options)
    protocol = _protocol(url)
    if protocol in ("hdfs", "viewfs"):
        from .remote.hdfs import hdfs_impl, hdfs_url_to_fs

        return hdfs_url_to_fs(str(url), hdfs_impl(options), fs_options)
    if protocol in ("s3", "s3a"):
        fs_options = _with_s3_defaults(fs_options)
    if protocol in ("gs", "gcs") and "::" not in str(url):
        from .remote.gcs import gcs_url_to_fs  # gcsfs without its 60 s gRPC bucket probe

        return gcs_url_to_fs(str(url), fs_options)
    return fsspec.core.url_to_fs(str(url), **fs_options)


def local_path(url, storage_options=None):
    """The local filesystem path of ``url``, or None when it is not on the local filesystem."""
    fs, path = url_to_fs(url, storage_options)
    return path if isinstance(fs, LocalFileSystem) else None


def exists(url, storage_options=None):
    fs, path = url_to_fs(url, storage_options)
    return fs.exists(path)


class BytesSource(Source):
    """An in-memory buffer as a source."""

    def __init__(self, data, url="<bytes>"):
        self.data = memoryview(data)
        self.url = url
        self.size = len(self.data)

    def _read(self, offset, length):
        return self.data[offset:offset + length]


def open_regular(path, url=None):
    """A read-only descriptor on the regular file at ``path``: the one guard of every local
    file recpipe reads (records, ``.idx``, ``.sums``, lists). ``O_NONBLOCK``: opening a FIFO
    does not wait for a writer; then a FIFO, a device (a link to /dev/zero would be read
    until memory runs out), a socket or a folder is refused with OSError naming ``url``."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "not a file but a folder", url or path)
        raise OSError(errno.EINVAL, "not a regular file (a device, FIFO or socket)", url or path)
    return fd


class LocalSource(Source):
    def __init__(self, path, url=None):
        self.path = os.fspath(path)
        self.url = url or self.path
        self._lock = threading.Lock()
        self._fd: Optional[int] = None
        self._inherited = False  # the descriptor is the parent's (set in a forked child)
        self.size = os.fstat(self._open()).st_size
        after_fork_in_child(self, LocalSource._forget_parent)

    def _forget_parent(self):
        self._lock = threading.Lock()
        self._inherited = self._fd is not None

    def _open(self):
        fd = open_regular(self.path, self.url)
        self._fd = fd
        self._inherited = False
        return fd

    def descriptor(self):
        """The open descriptor (re-opened in a forked child); ValueError once closed."""
        return self._descriptor()

    @property
    def identity(self):
        """The file's real path, size, modification time and inode."""
        st = os.fstat(self._descriptor())
        return f"file:{os.path.realpath(self.path)}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}"

    def _descriptor(self):
        if self._fd is None:
            raise ValueError(f"read from a closed source: {self.url}")
        if self._inherited:  # forked child: do not share the parent's descriptor
            with self._lock:
                if self._inherited:
                    self._open()
        return self._fd

    def _read(self, offset, length):
        fd = self._descriptor()
        data = os.pread(fd, length, offset)
        if len(data) == length:
            return data
        chunks = [data]
        got = len(data)
        while got < length:
            more = os.pread(fd, length - got, offset + got)
            if not more:
                break
            chunks.append(more)
            got += len(more)
        return b"".join(chunks)

    def close(self):
        fd, self._fd = self._fd, None
        if fd is not None and not self._inherited:
            os.close(fd)

    def __getstate__(self):
        return {"path": self.path, "url": self.url}

    def __setstate__(self, state):
        LocalSource.__init__(self, state["path"], state["url"])


class FsspecSource(Source):
    """Plain ``fs.cat_file`` per read, without retries or prefetching (``RemoteSource`` has
    both)."""

    def __init__(self, fs, path, url=None):
        self.fs = fs
        self.path = path
        self.url = url or path
        self.size = fs.size(path)

    def _read(self, offset, length):
        return self.fs.cat_file(self.path, start=offset, end=offset + length)


def _identity(url, info):
    version = info.get("ETag") or info.get("VersionId") or info.get("mtime") or \
        info.get("LastModified") or info.get("modification_time") or info.get("created")
    return f"{url}|{info.get('size')}|{version}"


def source_identity(source):
    """A string that names one version of an open source's file (``Source.identity``): for a
    local file its real path, size, modification time and inode; for a remote one its URL and
    size. A rewritten file gets another identity."""
    return source.identity


def _status(exc):
    """The HTTP status a store client's exception carries (azure-core, gcsfs, aiohttp)."""
    for name in ("status_code", "status", "code"):
        value = getattr(exc, name, None)
        if isinstance(value, int):
            return value
    return None


def open_source(url, storage_options=None):
    """Open ``url`` for positional reads; raise FileNotFoundError naming it when missing."""
    from .remote.ranges import open_ranges
    from .remote.source import RemoteSource
    from .remote.options import split_storage_options

    fs, path = url_to_fs(url, storage_options)
    if isinstance(fs, LocalFileSystem):
        try:
            return LocalSource(path, url=str(url))
        except FileNotFoundError:
            raise FileNotFoundError(f"no such file: {url}") from None
        except PermissionError:
            raise PermissionError(f"permission denied: {url}") from None
    options, _ = split_storage_options(storage_options)
    if _protocol(url) in ("s3", "s3a") and hasattr(fs, "retries"):
        fs.retries = 1  # recpipe's retry layer (and botocore's) own retries: they must not multiply
    try:
        info = fs.info(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"no such file: {url}") from None
    except Exception as exc:
        if isinstance(exc, PermissionError) or _status(exc) in (401, 403):
            raise PermissionError(f"access denied: {url}: {exc}") from exc
        raise
    if info.get("type") == "directory":
        raise IsADirectoryError(f"not a file: {url}")
    return RemoteSource(open_ranges(fs, path, _protocol(url), options, info), str(url),
                        int(info["size"]),
                        options, identity=_identity(url, info), storage_options=storage_options,
                        reopen=open_source)


def open_present(urls, storage_options=None):
    """A source (``open_source``) for each of ``urls`` that names a file, None for one that
    does not (or for a None in ``urls``); the sources are the caller's to close."""
    opened = []
    try:
        for url in urls:
            try:
                opened.append(None if url is None else open_source(url, storage_options))
            except FileNotFoundError:
                opened.append(None)
    except BaseException:
        for source in opened:
            if source is not None:
                source.close()
        raise
    return opened


def read_small_file(url, storage_options=None, *, limit=64 << 20):
    """The whole of a small file (a sidecar: JSON, a label map), through ``open_source``: a
    FIFO or device in its place raises OSError instead of blocking, one over ``limit`` bytes
    raises ValueError, a missing one FileNotFoundError."""
    with open_source(url, storage_options) as source:
        if source.size > limit:
            raise ValueError(f"{url}: {source.size} bytes, more than the {limit} expected of it")
        data = bytes(source.read(0, source.size))
    if len(data) != source.size:
        raise OSError(f"{url}: read {len(data)} of {source.size} bytes")
    return data
