"""recpipe: pack, read and decode MXNet RecordIO image datasets fast, without MXNet."""

import importlib
import logging

from . import moved
from .errors import DecodeError, RecordFormatError, RecordTooLargeError
from .io import (
    IRHeader,
    ListEntry,
    RecordReader,
    RecordWriter,
    pack,
    pack_img,
    read_index,
    read_list,
    unpack,
    unpack_img,
)

__version__ = "0.1.0"

__all__ = [
    "DecodeError",
    "IRHeader",
    "ImageLoader",
    "ListEntry",
    "LoaderOptions",
    "RecordFormatError",
    "RecordReader",
    "RecordTooLargeError",
    "RecordWriter",
    "pack",
    "pack_img",
    "read_index",
    "read_list",
    "replay",
    "unpack",
    "unpack_img",
]

# a library configures no logging on import: $RECPIPE_LOG_LEVEL is applied by the CLI at its start
# and by a loader when it reads recpipe's environment (recpipe.system.env.configure_logging)
logging.getLogger(__name__).addHandler(logging.NullHandler())
moved.install()  # old import paths of moved modules (recpipe.moved)


def __getattr__(name):
    # imported on first use: the decode stack is not needed to pack or read records, and
    # importing it costs every command-line start (see BENCHMARKS.md, pack)
    if name in ("ImageLoader", "LoaderOptions"):
        from . import decode

        return getattr(decode, name)
    if name == "replay":
        from .decode.replay import replay

        return replay
    # ``import recpipe as mx`` serves programs written for ``mx.recordio`` / ``mx.image``
    # (``mx.img``): the very modules ``recpipe.mx`` serves, and for MXNet's other names it
    # points at ``recpipe.mx``
    if name == "recordio":
        from .mx import recordio

        return recordio
    if name in ("image", "img"):
        return importlib.import_module(f"{__name__}.image")  # ("from . import" would recurse)
    from .mx.coverage import MXNET_NAMES, use_recpipe_mx

    if name in MXNET_NAMES:
        raise use_recpipe_mx(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
