"""What a file that is not RecordIO looks like, for error messages: a RecordIO file starts with
the magic word 0xced7230a; an image, an ``.idx`` or a ``.lst`` given in its place gets a message
that says "is not a RecordIO file" and names what it seems to be."""

import re

from ...errors import RecordFormatError
from .framing import MAGIC

__all__ = ["check_recordio_head", "looks_like", "not_recordio_error", "not_recordio_message"]

_SIGNATURES = (
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"GIF8", "a GIF image"),
    (b"BM", "a BMP image"),
    (b"PK\x03\x04", "a zip archive"),
    (b"\x1f\x8b", "a gzip file"),
)
_INDEX_LINE = re.compile(r"^\S+\t\d+$")  # key <TAB> byte offset
_LIST_LINE = re.compile(r"^-?\d+(\t-?[\d.eE+-]+)+\t.+$")  # index <TAB> labels... <TAB> path


def looks_like(head):
    """A phrase for what the first bytes ``head`` of a file seem to be, or None."""
    head = bytes(head)
    for signature, what in _SIGNATURES:
        if head.startswith(signature):
            return what
    if head[4:12] in (b"ftypavif", b"ftypheic", b"ftypmif1") or head[8:12] == b"WEBP":
        return "an image (AVIF/HEIC/WebP)"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        text = head[:head.rfind(b"\n")].decode("utf-8", "replace") if b"\n" in head else ""
    lines = [line.rstrip("\r") for line in text.split("\n")[:-1] if line.strip()]
    if lines and all(_INDEX_LINE.match(line) for line in lines):
        return "an .idx index (give the .rec beside it)"
    if lines and all(_LIST_LINE.match(line) for line in lines):
        return "a .lst image list (pack it with `recpipe pack LIST OUT` or `recpipe im2rec`)"
    return None


def not_recordio_message(url, head):
    """"URL is not a RecordIO file (...)" with what it looks like, from its first bytes."""
    found = int.from_bytes(bytes(head[:4]).ljust(4, b"\0"), "little")
    what = looks_like(head)
    seems = f": this looks like {what}" if what else ""
    return (f"{url} is not a RecordIO file (it starts with 0x{found:08x}, not the RecordIO "
            f"magic 0x{MAGIC:08x}){seems}")


def not_recordio_error(url, head):
    """A RecordFormatError saying ``url`` is not RecordIO (``path`` set, offset 0)."""
    error = RecordFormatError(not_recordio_message(url, head))
    error.path, error.offset = url, 0
    return error


def check_recordio_head(source):
    """Raise ``not_recordio_error`` when ``source`` (a ``Source``) does not start with the
    RecordIO magic and its first bytes look like something else (an image, an ``.idx``, a
    ``.lst``); a RecordIO file with a damaged first record is left to the scanners. One small
    read."""
    head = source.read(0, 512)
    found = int.from_bytes(bytes(head[:4]).ljust(4, b"\0"), "little")
    if head and found != MAGIC and looks_like(head):
        raise not_recordio_error(source.url, head)
