"""recpipe's own settings for remote reads, carried in ``storage_options["recpipe"]``.

Every reader and writer takes fsspec ``storage_options``; the ``"recpipe"`` key (a dict) is taken
out before they reach fsspec and tunes recpipe's remote layer:

- ``max_inflight`` (16): range requests in flight per file.
- ``chunk_bytes`` (8 MiB) and ``readahead_chunks`` (4): sequential streaming.
- ``max_gap`` (1 MiB), ``max_block`` (16 MiB), ``plan_window`` (256 records, or more while they
  hold under half the budget), ``budget_bytes`` (256 MiB): coalescing and read-ahead of indexed
  reads.
- ``attempts`` (5), ``backoff`` (0.1 s), ``max_backoff`` (2 s), ``request_timeout`` (30 s),
  ``deadline`` (120 s): retries.
- ``cache_dir`` (None: off), ``cache_bytes`` (None: ``min(10 GiB, half of the free space beside
  the cache plus what it holds)``, taken again at every write), ``cache_block`` (8 MiB): local
  block cache (best-effort: a full disk never fails a read, ``recpipe.io.remote.cache``).
- ``ranges`` ("auto"): how range requests to object stores are sent: "auto" recpipe's own range
  reader (``recpipe.io.remote.ranges.http.HttpRanges``: GETs on keep-alive connections of its own,
  bodies read straight into one buffer) unless the store's client configuration needs the client's
  own requests, then the client's (s3fs, gcsfs, azure-storage-blob); "http" always the former (an
  error when it cannot be used); "fsspec" always the client's. For ``gs://`` and ``az://``/
  ``abfs://``; ``s3://`` too unless ``s3_ranges`` is given.
- ``s3_ranges`` (None: as ``ranges``): how ``s3://`` range requests are sent. "auto": recpipe's
  own (``recpipe.io.remote.ranges.s3.S3HttpRanges``: presigned GETs) unless the client configuration
  needs s3fs (proxies, client certificates, requester-pays or other extra request arguments),
  then s3fs; "http": always the former; "fsspec": always s3fs's client (``get_object``). Every
  reader of every store pins the object's version at open (ETag with ``If-Match``, GCS's
  generation with ``ifGenerationMatch``, and each response's compared).
- ``hdfs`` ("arrow" or "native"; default ``$RECPIPE_HDFS_IMPL`` or "arrow"): which HDFS client
  serves ``hdfs://`` URLs.
"""

from typing import NamedTuple, Optional

from .retry import RetryPolicy

__all__ = ["RemoteOptions", "split_storage_options"]

_MIB = 1 << 20


class RemoteOptions(NamedTuple):
    max_inflight: int = 16
    chunk_bytes: int = 8 * _MIB
    readahead_chunks: int = 4
    max_gap: int = 1 * _MIB
    max_block: int = 16 * _MIB
    plan_window: int = 256
    budget_bytes: int = 256 * _MIB
    attempts: int = 5
    backoff: float = 0.1
    max_backoff: float = 2.0
    request_timeout: float = 30.0
    deadline: float = 120.0
    cache_dir: Optional[str] = None
    cache_bytes: Optional[int] = None
    cache_block: int = 8 * _MIB
    hdfs: Optional[str] = None
    ranges: str = "auto"
    s3_ranges: Optional[str] = None

    @classmethod
    def from_mapping(cls, mapping):
        mapping = dict(mapping or {})
        unknown = set(mapping) - set(cls._fields)
        if unknown:
            raise ValueError(f"unknown storage_options['recpipe'] keys {sorted(unknown)}; "
                             f"expected some of {list(cls._fields)}")
        return cls(**mapping)

    @property
    def retry(self):
        return RetryPolicy(self.attempts, self.backoff, self.max_backoff, self.request_timeout,
                           self.deadline)


def split_storage_options(storage_options):
    """``(RemoteOptions, fsspec storage options)`` from user ``storage_options``."""
    fs_options = dict(storage_options or {})
    return RemoteOptions.from_mapping(fs_options.pop("recpipe", None)), fs_options
