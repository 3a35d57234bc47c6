"""recpipe: pack, read and decode MXNet RecordIO image datasets fast, without MXNet."""

import logging

from .decode import ImageLoader
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
