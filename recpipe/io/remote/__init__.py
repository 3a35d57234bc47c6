"""Reading a file over the network: ``RemoteSource`` (``source``: range requests with retries,
streaming read-ahead, coalesced prefetching of announced records, an optional block cache) over
the range readers of each store (``ranges``), with its settings (``options``), the retry policy
(``retry``), the prefetcher (``prefetch``, ``coalesce``), the sequential read-ahead
(``readahead``), the local block cache (``cache``), the request buffers (``buffers``) and the
filesystems opened without fsspec's defaults (``hdfs``, ``gcs``).

``recpipe.io.remote`` was the module of ``RemoteSource`` before this wing: its names are here
too."""

from .source import ReadStats, RemoteSource

__all__ = [
    "ReadStats", "RemoteSource"]
