"""Range readers: the objects that fetch ``[start, end)`` of one remote file
(``fetch(start, end, timeout) -> bytes-like``, ``close()``), under ``RemoteSource``'s retries,
prefetching and caching.

``open_ranges(fs, path, url, options)`` picks one from ``RANGE_READERS``, a protocol -> factory
table (as fsspec's ``known_implementations``): ``s3``/``s3a`` -> ``s3.s3_ranges`` (recpipe's own
ranged GETs, or s3fs's), ``gs``/``gcs`` -> ``gcs.gcs_ranges`` (recpipe's own, or gcsfs's),
``az``/``abfs``/``abfss`` -> ``azure.azure_ranges`` (recpipe's own, or the azure-storage-blob
client's), ``hdfs``/``viewfs`` -> ``hdfs.hdfs_ranges`` (the client chosen by
``recpipe.io.remote.hdfs``), ``http(s)``/``webhdfs`` -> ``ThreadLocalRanges`` (their sessions are
not thread-safe), anything else -> ``FsspecRanges``. ``register_ranges`` adds a protocol.
"""

from ..hdfs import hdfs_impl
from .azure import azure_ranges
from .fsspec import FsspecRanges, ObjectChangedError, ThreadLocalRanges
from .gcs import gcs_ranges
from .hdfs import hdfs_ranges
from .s3 import s3_ranges

__all__ = ["ObjectChangedError", "RANGE_READERS", "open_ranges", "register_ranges"]


def _s3(fs, path, options):
    return s3_ranges(fs, path, options.s3_ranges or options.ranges)


def _gcs(fs, path, options):
    return gcs_ranges(fs, path, options.ranges)


def _azure(fs, path, options):
    return azure_ranges(fs, path, options.ranges)


def _hdfs(fs, path, options):
    return hdfs_ranges(fs, path, hdfs_impl(options))


def _thread_local(fs, path, options):
    return ThreadLocalRanges(fs, path)


def _fsspec(fs, path, options):
    return FsspecRanges(fs, path)


RANGE_READERS = {
    "s3": _s3, "s3a": _s3,
    "gs": _gcs, "gcs": _gcs,
    "az": _azure, "abfs": _azure, "abfss": _azure,
    "hdfs": _hdfs, "viewfs": _hdfs,
    "http": _thread_local, "https": _thread_local, "webhdfs": _thread_local,
    "swebhdfs": _thread_local,
}


def register_ranges(protocol, factory):
    """Serve ``protocol`` with ``factory(fs, path, options) -> range reader``."""
    RANGE_READERS[protocol] = factory


def open_ranges(fs, path, protocol, options, info=None):
    """The range reader of ``path`` on ``fs`` for URL ``protocol`` (``RemoteOptions`` options),
    pinned to the object version ``info`` (``fs.info(path)`` at open) describes, where the
    reader can (``pin``: S3's and Azure's ETag with If-Match, GCS's generation with
    ifGenerationMatch; a version id on version-aware filesystems)."""
    ranges = RANGE_READERS.get(protocol, _fsspec)(fs, path, options)
    for reader in (ranges, getattr(ranges, "fallback", None)):
        if reader is None:
            continue
        if hasattr(reader, "scheme"):
            reader.scheme = protocol  # errors name the URL as the user wrote it
        elif hasattr(reader, "url"):
            reader.url = f"{protocol}://{path}"
    if info is not None and hasattr(ranges, "pin"):
        ranges.pin(info)
    return ranges
