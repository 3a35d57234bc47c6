"""Range readers through fsspec: ``fs.cat_file`` per range (one ranged GET on object stores,
never an fsspec file object, whose read-ahead cache would fetch far more than a record);
``ThreadLocalRanges`` gives each thread its own filesystem instance (for ``requests``-based
clients such as webhdfs and http)."""

import threading

from fsspec.asyn import AsyncFileSystem

__all__ = ["FsspecRanges", "ObjectChangedError", "ThreadLocalRanges"]


class ObjectChangedError(ValueError):
    """A remote object was replaced while a reader had it open (its ETag or version changed):
    the rest of the reads would come from another version. Permanent (never retried)."""

    def __init__(self, message, *, url=None, offset=None):
        super().__init__(message)
        self.url = url
        self.offset = offset


class FsspecRanges:
    """Range reads through ``fs.cat_file`` (keywords: s3fs's third positional is version_id)."""

    def __init__(self, fs, path):
        self.fs = fs
        self.path = path
        self._timeout_kw = isinstance(fs, AsyncFileSystem)
        self._version = {}

    def pin(self, info):
        """Read the version ``info`` (``fs.info`` at open) names, when the filesystem takes a
        ``version_id`` (s3fs with ``version_aware=True``); otherwise reads are not pinned."""
        version = info.get("VersionId")
        if version and getattr(self.fs, "version_aware", False):
            self._version = {"version_id": version}

    def fetch(self, start, end, timeout):
        if self._timeout_kw:  # fsspec's sync() cancels the request after ``timeout`` seconds
            return self.fs.cat_file(self.path, start=start, end=end, timeout=timeout,
                                    **self._version)
        return self.fs.cat_file(self.path, start=start, end=end, **self._version)

    def close(self):
        pass


class ThreadLocalRanges(FsspecRanges):
    """One filesystem instance per thread, for clients whose sessions are not thread-safe."""

    def __init__(self, fs, path):
        super().__init__(fs, path)
        self._local = threading.local()

    def _fs(self):
        fs = getattr(self._local, "fs", None)
        if fs is None:
            fs = type(self.fs)(**self.fs.storage_options, skip_instance_cache=True)
            self._local.fs = fs
        return fs

    def fetch(self, start, end, timeout):
        return self._fs().cat_file(self.path, start=start, end=end)
