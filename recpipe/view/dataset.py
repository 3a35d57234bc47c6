"""The one file a viewer serves: its reader, its layout, and what each record holds.

``Dataset(url)`` opens the ``.rec`` (with the ``.idx`` and ``.sums`` beside it, as every reader
does) once; every request reads through it, so the server cannot be made to read another file.
Records are read with ``integrity="strict"``: a record whose checksum, framing or header is
wrong raises its ``RecordFormatError`` (path, offset, record) instead of giving bytes. Nothing is
held per record: a page reads the records it shows, by position, through the ``IndexTable``.
"""

import hashlib
import operator
from typing import Optional

import numpy as np

from ..errors import RecordFormatError
from ..image.info import sniff
from ..io.format.header import unpack_header
from ..io.format.layout import detect_face_layout
from ..io.reader import RecordReader
from ..io.format.sniff import check_recordio_head
from ..io.sources import open_source

__all__ = ["Dataset", "NotAnImage", "record_error"]

_LABELS_SHOWN = 16  # packed labels listed per record; the count says how many there are


class NotAnImage(ValueError):
    """A record that holds no image (InsightFace's header and identity records, an empty or
    unrecognised payload): ``reason`` says what it is instead."""

    def __init__(self, reason, *, record=None):
        super().__init__(reason)
        self.reason = reason
        self.record = record


def record_error(exc):
    """A JSON-able description of a record's error: ``kind`` ('format', 'sum', 'decode',
    'not-image'), ``error`` (the message), and ``path``/``offset``/``record`` when known."""
    from ..io.sidecars.quarantine import error_kind

    kind = "not-image" if isinstance(exc, NotAnImage) else (error_kind(exc) or "error")
    out = {"kind": kind, "error": str(exc), "reason": getattr(exc, "reason", str(exc))}
    for name in ("path", "offset", "record"):
        value = getattr(exc, name, None)
        if value is not None:
            out[name] = value
    return out


class Dataset:
    """A ``RecordReader`` on ``url`` (strict integrity) with its InsightFace layout, if any.

    Raises FileNotFoundError for a missing file and ValueError (``RecordFormatError``) for one
    that is not RecordIO, before anything is served."""

    def __init__(self, url: str, storage_options: Optional[dict] = None) -> None:
        self.url = str(url)
        self.storage_options = storage_options
        with open_source(self.url, storage_options) as source:
            check_recordio_head(source)  # an image, .idx or .lst: say so, do not serve it
        self.reader = RecordReader(self.url, None, storage_options, integrity="strict")
        try:
            self.layout = detect_face_layout(self.reader)
            self.identity = self.reader.identity
        except BaseException:
            self.reader.close()
            raise
        # names this version of the file in URLs, so a browser's cache never mixes two versions
        self.token = hashlib.blake2b(self.identity.encode("utf-8", "replace"),
                                     digest_size=6).hexdigest()

    def __len__(self):
        return len(self.reader)

    def close(self):
        self.reader.close()

    # -- positions and keys ---------------------------------------------------------------

    def check_position(self, position) -> int:
        """``position`` as an int in ``0..N-1``, else KeyError naming the range."""
        try:
            position = operator.index(position)
        except TypeError:
            raise KeyError(f"record position {position!r} is not a whole number") from None
        if not 0 <= position < len(self):
            raise KeyError(f"no record at position {position}: {self.url} has {len(self)} "
                           f"records (positions 0..{len(self) - 1})")
        return position

    def key_of(self, position):
        key = self.reader.keys[position]
        return int(key) if isinstance(key, (int, np.integer)) else key

    def position_of_key(self, text) -> int:
        """The position of the record whose index key is ``text`` (a number, or a string key
        in an index with string keys); KeyError naming the key when there is none."""
        key = text
        if not self.reader.table.has_string_keys:
            try:
                key = int(str(text).strip())
            except ValueError:
                raise KeyError(f"key {text!r} is not a whole number (the keys of "
                               f"{self.reader.index_url or self.url} are)") from None
        try:
            return self.reader.position_of_key(key)
        except KeyError:
            raise KeyError(f"no record with key {key!r} in "
                           f"{self.reader.index_url or self.url}") from None

    # -- what a record is -----------------------------------------------------------------

    def role(self, position) -> str:
        """'image', or in InsightFace's layout 'header' (key 0) / 'identity'."""
        if self.layout is None:
            return "image"
        key = self.key_of(position)
        if key == 0:
            return "header"
        if isinstance(key, int) and key >= self.layout.first_identity:
            return "identity"
        return "image"

    def read(self, position):
        """``(header, start, payload)`` of the record at ``position``: its ``IRHeader`` and
        where its image starts. Raises the reader's RecordFormatError (framing, checksum,
        a payload too short for its header), naming the file, offset and record."""
        payload = self.reader.read(position)
        header, start = unpack_header(payload, path=self.url, record=position)
        return header, start, payload

    def image_bytes(self, position):
        """The image bytes of the record at ``position`` (a memoryview), or NotAnImage."""
        role = self.role(position)
        if role != "image":
            raise NotAnImage(self._role_text(role, position), record=position)
        header, start, payload = self.read(position)
        if start >= len(payload):
            raise NotAnImage(f"record {position} holds no image bytes (header only)",
                             record=position)
        image = memoryview(payload)[start:]
        if sniff(image).format == "unknown":
            raise _not_recognised(position, len(image))
        return header, image

    def _role_text(self, role, position):
        layout = self.layout
        if role == "header":
            return (f"record {position} is InsightFace's header record (key 0): images are keys "
                    f"1..{layout.first_identity - 1}, identities {layout.first_identity}.."
                    f"{layout.end_identity - 1}")
        return f"record {position} is an InsightFace identity record (no image)"

    def facts(self, position) -> dict:
        """What a page shows of one record: key, offset, bytes, header labels, image format and
        size from its header bytes (no decode), and ``error`` when it cannot be read."""
        start, end = self.reader.span(position)
        out = {"position": position, "key": self.key_of(position), "offset": start,
               "bytes": end - start, "role": self.role(position)}
        try:
            header, image_start, payload = self.read(position)
        except RecordFormatError as exc:
            out["error"] = record_error(exc)
            return out
        out["bytes"] = len(payload)
        out["header"] = {"flag": header.flag, "id": header.id, "id2": header.id2}
        out["label"] = _labels(header)
        if out["role"] == "image":
            info = sniff(memoryview(payload)[image_start:])
            out["image"] = {"format": info.format, "width": info.width, "height": info.height,
                            "channels": info.channels, "progressive": info.progressive,
                            "cmyk": info.cmyk, "grayscale": info.grayscale,
                            "exif_orientation": info.exif_orientation,
                            "bytes": len(payload) - image_start}
            if info.format == "unknown":
                out["error"] = record_error(_not_recognised(position, len(payload) - image_start))
        return out


def _not_recognised(position, size):
    return NotAnImage(f"record {position}: its {size} image bytes are not a recognised image "
                      "(JPEG, PNG, GIF, BMP, WebP)", record=position)


def _labels(header):
    """The label(s) of a header as JSON: a number for flag 0, else the first values of the
    packed labels (``label_count`` says how many)."""
    if header.flag == 0:
        return [float(header.label)]
    return [float(v) for v in np.asarray(header.label)[:_LABELS_SHOWN]]
