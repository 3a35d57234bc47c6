"""Google Cloud Storage through gcsfs, without the one-minute bucket probe.

gcsfs (2025.x on) replaces ``gcsfs.GCSFileSystem`` at import with ``ExtendedGcsFileSystem``
unless ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT`` is false: before its first operation on a bucket
it asks, over gRPC, whether the bucket is zonal or hierarchical. Against an endpoint without
that gRPC service (the emulators, GCS-compatible servers, a network that passes HTTPS but not
gRPC) the probe waits for its retry deadline, 60 s, on every new filesystem instance (each
process, each DataLoader worker). recpipe reads GCS through the JSON API
(``recpipe.io.remote.ranges. gcs``), which needs none of that, so ``gs://`` and ``gcs://`` URLs get
gcsfs's plain ``gcsfs.core.GCSFileSystem``. A user who wants gcsfs's zonal/HNS layer sets
``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=true`` explicitly (then it is gcsfs's extended class, probe
included).
"""

import os

from ..._optional import require

__all__ = ["GCS_PROTOCOLS", "gcs_filesystem_class", "gcs_url_to_fs"]

GCS_PROTOCOLS = ("gs", "gcs")
_ZB_HNS = "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"


def gcs_filesystem_class():
    """gcsfs's plain ``GCSFileSystem``, or its extended one when the user opted in."""
    require("gcsfs", "gcs")
    if os.environ.get(_ZB_HNS, "").strip().lower() in ("true", "1"):
        import gcsfs

        return gcsfs.GCSFileSystem
    from gcsfs.core import GCSFileSystem

    return GCSFileSystem


def gcs_url_to_fs(url, fs_options):
    """``(filesystem, path)`` of a ``gs://`` URL with fsspec ``fs_options``."""
    cls = gcs_filesystem_class()
    return cls(**fs_options), cls._strip_protocol(url)
