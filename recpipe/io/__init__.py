"""RecordIO reading and writing through fsspec, byte-compatible with MXNet.

Health checks live in ``recpipe.io.health.verify`` (``verify``), ``recpipe.io.sidecars.rebuild``
(``rebuild_index``) and ``recpipe.io.health.contents`` (``inspect``); they are not re-exported here
so that the function ``verify`` does not shadow its module.
"""

from .format.framing import MAGIC, MAX_RECORD_SIZE, frame
from .format.header import HEADER_SIZE, IRHeader, pack, pack_img, unpack, unpack_header, unpack_img
from .sidecars.index import ListEntry, format_list_line, index_url_for, read_index, read_list
from .reader import RecordReader
from .sources import open_source
from .writer import RecordWriter

__all__ = [
    "HEADER_SIZE",
    "IRHeader",
    "ListEntry",
    "MAGIC",
    "MAX_RECORD_SIZE",
    "RecordReader",
    "RecordWriter",
    "format_list_line",
    "frame",
    "index_url_for",
    "open_source",
    "pack",
    "pack_img",
    "read_index",
    "read_list",
    "unpack",
    "unpack_header",
    "unpack_img",
]
