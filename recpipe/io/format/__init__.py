"""The RecordIO format, as bytes: record framing (``framing``: the magic, record heads,
padding, records split in parts), the image record header (``header``), finding the records of
a file by their heads (``scan``), telling what a file holds (``sniff``) and InsightFace's layout
of a face ``.rec`` (``layout``). These work on bytes and byte sources; nothing here opens a
file by its name.

``recpipe.io.format`` was the framing module before this wing: its names are here too."""

from .framing import (
    HEAD_SIZE, MAGIC, MAGIC_BYTES, MAX_RECORD_SIZE, check_size, decode_head, frame, padded)

__all__ = [
    "HEAD_SIZE", "MAGIC", "MAGIC_BYTES", "MAX_RECORD_SIZE", "check_size", "decode_head", "frame",
    "padded"]
