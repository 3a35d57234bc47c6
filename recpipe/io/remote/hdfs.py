"""HDFS through fsspec, with the client chosen explicitly (the range readers of each client are in
``recpipe.io.remote.ranges.hdfs``).

Two clients serve ``hdfs://`` (and ``viewfs://``) URLs:

- ``"arrow"``: pyarrow's libhdfs (JNI; needs ``JAVA_HOME``, ``libhdfs.so`` and the Hadoop
  ``CLASSPATH``) through ``fsspec.implementations.arrow.HadoopFileSystem``; ranges via
  ``read_at`` (a positional read, safe from many threads);
- ``"native"``: the JVM-free Rust client ``hdfs-native``; ranges via ``FileReader.read_range``
  (releases the GIL, one reader shared by threads).

Installing hdfs-native re-registers fsspec's ``hdfs`` protocol to itself, so recpipe never relies
on the registry: the choice comes from ``storage_options["recpipe"]["hdfs"]``, else
``$RECPIPE_HDFS_IMPL``, else ``"arrow"``. ``webhdfs://`` (the REST gateway, no native library)
goes through fsspec's own implementation with one session per thread.
"""

import os
from urllib.parse import urlsplit

from ..._optional import require

__all__ = ["HDFS_IMPLS", "HDFS_PROTOCOLS", "hdfs_impl", "hdfs_filesystem_class", "hdfs_url_to_fs"]

HDFS_IMPLS = ("arrow", "native")
HDFS_PROTOCOLS = ("hdfs", "viewfs")


def hdfs_impl(options):
    impl = options.hdfs or os.environ.get("RECPIPE_HDFS_IMPL") or "arrow"
    if impl not in HDFS_IMPLS:
        raise ValueError(f"HDFS client {impl!r}: expected one of {HDFS_IMPLS} "
                         "(storage_options['recpipe']['hdfs'] or $RECPIPE_HDFS_IMPL)")
    return impl


def hdfs_filesystem_class(impl):
    """The fsspec filesystem class of HDFS client ``impl`` (never the registry's ``hdfs``)."""
    if impl == "native":
        require("hdfs_native", "hdfs-native")
        return require("hdfs_native.fsspec", "hdfs-native").HdfsFileSystem
    require("pyarrow", "hdfs")
    return require("fsspec.implementations.arrow", "hdfs").HadoopFileSystem


def hdfs_url_to_fs(url, impl, fs_options):
    """``(filesystem, path)`` for an ``hdfs://`` or ``viewfs://`` URL with client ``impl``."""
    cls = hdfs_filesystem_class(impl)
    parts = urlsplit(url)
    kwargs = dict(cls._get_kwargs_from_urls(url))
    kwargs.update(fs_options)
    if impl == "native" and "host" not in kwargs:  # hdfs-native needs host[:port]
        kwargs["host"] = parts.hostname or ""
        kwargs.setdefault("port", parts.port)
    return cls(**kwargs), parts.path or "/"  # paths inside the cluster, without host:port
