"""recpipe: pack, read and decode MXNet RecordIO image datasets fast, without MXNet."""

import logging

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
    "RecordFormatError",
    "RecordReader",
    "RecordTooLargeError",
    "RecordWriter",
    "pack",
    "pack_img",
    "read_index",
    "read_list",
    "unpack",
    "unpack_img",
]

logging.getLogger(__name__).addHandler(logging.NullHandler())


def __getattr__(name):
    # imported on first use: the decode stack is not needed to pack or read records, and
    # importing it costs every command-line start (see BENCHMARKS.md, pack)
    if name == "ImageLoader":
        from .decode import ImageLoader

        return ImageLoader
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
