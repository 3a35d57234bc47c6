"""Configuration without code changes: the environment variables recpipe reads.

As MXNet's ``MXNET_*`` variables did, these change a run without touching the program:

- ``RECPIPE_THREADS``: decode threads of every loader (a number, or ``auto``), whatever the
  program passes as ``threads``.
- ``RECPIPE_TRACE=path.json``: every loader of the process records a trace of its stages
  (read, decode, augment, per thread; at most a million spans each), written at exit as
  one Chrome trace (open it in chrome://tracing or https://ui.perfetto.dev).
- ``RECPIPE_LOG_LEVEL``: ``DEBUG``, ``INFO``, ``WARNING``...: recpipe's log messages at that level
  and above go to stderr (without it recpipe only logs to the handlers the program configures).
  Importing recpipe configures nothing: the level is applied when the ``recpipe`` command starts
  and when a loader reads these variables (``threads_override``), from then on.

``VARIABLES`` lists every variable recpipe reads, these and those of other modules (README table,
``recpipe doctor``).
"""

import logging
import os
import sys

__all__ = ["VARIABLES", "configure_logging", "threads_override", "trace_path"]

log = logging.getLogger(__name__)

# name -> (default, what it does)
VARIABLES = {
    "RECPIPE_THREADS": ("unset", "decode threads of every loader (a number or 'auto'), "
                                 "overriding the program's threads="),
    "RECPIPE_TRACE": ("unset", "write a Chrome trace of every loader to this path at exit"),
    "RECPIPE_LOG_LEVEL": ("unset", "print recpipe's log messages at this level to stderr"),
    "RECPIPE_INDEX_CACHE": ("1", "0 turns off the memory-mapped .idx cache"),
    "RECPIPE_INDEX_CACHE_MIN_BYTES": ("4194304", "smaller .idx files are not cached (units: 4M, "
                                                  "4MiB)"),
    "RECPIPE_CACHE_DIR": ("$XDG_CACHE_HOME/recpipe", "index caches (in index-UID, private to "
                                                        "the user)"),
    "RECPIPE_QUARANTINE_DIR": ("$XDG_CACHE_HOME/recpipe/quarantine",
                               "where loaders remember records found bad (see \"Integrity\")"),
    "RECPIPE_TURBOJPEG_LIB": ("found automatically", "path of libturbojpeg for the 'turbojpeg' "
                                                     "decoder"),
    "RECPIPE_HDFS_IMPL": ("arrow", "HDFS client: 'arrow' (pyarrow) or 'native' (hdfs-native)"),
    "OPENCV_IO_MAX_IMAGE_PIXELS": ("89478485 (set by recpipe if unset)",
                                   "OpenCV's pixel limit for formats other than JPEG/PNG"),
    "LOCAL_RANK / LOCAL_WORLD_SIZE (and MPI, Horovod, Slurm equivalents)":
        ("unset", "ranks on this node: each takes its share of the cores (recpipe.system.host)"),
    "RANK / WORLD_SIZE (and Horovod, MPI equivalents)":
        ("unset", "this rank's part of the data (recpipe.system.distributed)"),
}


def threads_override(threads):
    """``threads``, or ``$RECPIPE_THREADS`` when set (a number >= 1 or 'auto'). A loader's first
    look at recpipe's environment: ``$RECPIPE_LOG_LEVEL`` is applied here too."""
    configure_logging()
    text = os.environ.get("RECPIPE_THREADS", "").strip()
    if not text:
        return threads
    if text.lower() == "auto":
        return "auto"
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"RECPIPE_THREADS={text!r}: expected a number >= 1 or 'auto'")
    return value


def trace_path():
    """``$RECPIPE_TRACE`` or None."""
    return os.environ.get("RECPIPE_TRACE", "").strip() or None


def configure_logging():
    """With ``$RECPIPE_LOG_LEVEL`` set, send recpipe's messages at that level to stderr."""
    level = os.environ.get("RECPIPE_LOG_LEVEL", "").strip().upper()
    if not level:
        return
    logger = logging.getLogger("recpipe")
    try:
        logger.setLevel(level)
    except ValueError:
        sys.stderr.write(f"recpipe: RECPIPE_LOG_LEVEL={level!r} is not a logging level\n")
        return
    if not any(isinstance(h, logging.StreamHandler) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
