"""Byte sources behind the readers: thread-safe positional reads from a local file or any fsspec URL.

A source knows its size and answers ``read(offset, length)`` without shared seek state, so many
threads may read at once. Local files use ``os.pread`` (which releases the GIL); other filesystems
use ``fs.cat_file`` with a byte range. Sources re-open themselves in a forked child.
"""

import os
import threading

import fsspec
from fsspec.implementations.local import LocalFileSystem

__all__ = ["Source", "BytesSource", "LocalSource", "FsspecSource", "open_source", "url_to_fs", "exists"]


def url_to_fs(url, storage_options=None):
    """Return ``(filesystem, path)`` for an fsspec URL or local path."""
    return fsspec.core.url_to_fs(str(url), **(storage_options or {}))


def exists(url, storage_options=None):
    fs, path = url_to_fs(url, storage_options)
    return fs.exists(path)


class Source:
    """Random-access bytes of one file. Subclasses implement ``_read``."""

    url = None
    size = 0

    def read(self, offset, length):
        """Return up to ``length`` bytes at ``offset`` (fewer only at the end of the file)."""
        if length <= 0 or offset >= self.size:
            return b""
        return self._read(offset, min(length, self.size - offset))

    def _read(self, offset, length):
        raise NotImplementedError

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class BytesSource(Source):
    """An in-memory buffer as a source."""

    def __init__(self, data, url="<bytes>"):
        self.data = memoryview(data)
        self.url = url
        self.size = len(self.data)

    def _read(self, offset, length):
        return self.data[offset:offset + length]


class LocalSource(Source):
    def __init__(self, path, url=None):
        self.path = os.fspath(path)
        self.url = url or self.path
        self._lock = threading.Lock()
        self._fd = None
        self._pid = None
        self._open()
        self.size = os.fstat(self._fd).st_size

    def _open(self):
        self._fd = os.open(self.path, os.O_RDONLY)
        self._pid = os.getpid()

    def _descriptor(self):
        if self._fd is None:
            raise ValueError(f"read from a closed source: {self.url}")
        if self._pid != os.getpid():  # forked child: do not share the parent's descriptor
            with self._lock:
                if self._pid != os.getpid():
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
        if fd is not None and self._pid == os.getpid():
            os.close(fd)

    def __getstate__(self):
        return {"path": self.path, "url": self.url}

    def __setstate__(self, state):
        self.__init__(state["path"], state["url"])


class FsspecSource(Source):
    def __init__(self, fs, path, url=None):
        self.fs = fs
        self.path = path
        self.url = url or path
        self.size = fs.size(path)

    def _read(self, offset, length):
        return self.fs.cat_file(self.path, start=offset, end=offset + length)


def open_source(url, storage_options=None):
    """Open ``url`` for positional reads; raise FileNotFoundError naming it when missing."""
    fs, path = url_to_fs(url, storage_options)
    if isinstance(fs, LocalFileSystem):
        try:
            return LocalSource(path, url=str(url))
        except FileNotFoundError:
            raise FileNotFoundError(f"no such file: {url}") from None
    if not fs.exists(path):
        raise FileNotFoundError(f"no such file: {url}")
    return FsspecSource(fs, path, url=str(url))
