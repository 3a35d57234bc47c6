"""Which records of a ``.rec`` are images: InsightFace's face-dataset layout.

InsightFace's datasets (MS1MV2, Glint360K, WebFace42M...) keep a header record under key 0:
flag > 0 and ``label = [first identity key, end of identity keys]``, with no image. Keys
``1 .. label[0]-1`` are the images (label = identity); keys ``label[0] .. label[1]-1`` are one
record per identity (label = its range of image keys), also without an image. arcface_torch
serves ``range(1, label[0])``; so does recpipe (``image_positions``).
"""

import logging
from typing import NamedTuple, Optional

import numpy as np

from ...errors import RecordFormatError, StaleSumsError
from .header import unpack_header

__all__ = ["FaceLayout", "detect_face_layout", "face_layout_of", "image_positions",
           "positions_of_keys"]

log = logging.getLogger(__name__)


class FaceLayout(NamedTuple):
    """InsightFace layout: image keys ``[1, first_identity)``, identities
    ``[first_identity, end_identity)``."""

    first_identity: int
    end_identity: int

    @property
    def images(self):
        return self.first_identity - 1

    @property
    def identities(self):
        return self.end_identity - self.first_identity


def _integral(value):
    return float(value).is_integer()


def detect_face_layout(reader) -> Optional[FaceLayout]:
    """The InsightFace layout of ``reader``'s file, or None.

    It is recognised only when key 0 exists (in an index with integer keys), its record has
    flag >= 2 with whole-number labels ``1 <= label[0] <= label[1]`` and, to tell it from an
    ordinary multi-label image, either no image bytes or exactly ``label[1]`` records in the file.

    A record 0 that announces the layout decides which records are served: it is checked
    against the ``.sums`` sidecar (when the reader checks sums), and a mismatch raises
    RecordFormatError naming the file and the record, whatever ``on_error`` (one flipped bit
    would silently serve other records). A record 0 that does not announce it is left for
    the loader to read as a sample (a damaged one is reported then, under ``on_error``).
    """
    if reader.index_url is None or len(reader) == 0:
        return None
    try:
        position = reader.position_of_key(0)
        payload = reader.read(position, checked=False)
    except (KeyError, TypeError, RecordFormatError):
        return None
    layout = face_layout_of(payload, len(reader))
    if layout is not None:
        _check_header(reader, payload, position)
    return layout


def _check_header(reader, payload, position):
    """Raise unless the header record ``payload`` (record ``position``) matches its sum."""
    offset = int(reader.offsets[position])
    try:
        reader.check_sum(payload, offset, position)
    except StaleSumsError:
        raise
    except RecordFormatError as exc:
        raise RecordFormatError(
            f"InsightFace's header record (key 0: the ranges of image and identity keys) "
            f"fails its check: {exc.reason}. The records it says are images cannot be "
            f"trusted: restore the file, or choose the records with keys= "
            f"(`recpipe verify {reader.url}` lists what else is damaged)",
            path=reader.url, offset=offset, record=position, fault=exc.fault,
            detector=exc.detector) from exc


def face_layout_of(payload, num_records) -> Optional[FaceLayout]:
    """The layout announced by ``payload`` when it is the record stored under key 0 of a file
    of ``num_records`` records (see ``detect_face_layout``), or None."""
    try:
        header, start = unpack_header(payload)
    except RecordFormatError:
        return None
    if header.flag < 2:
        return None
    first, end = float(header.label[0]), float(header.label[1])
    if not (_integral(first) and _integral(end) and 1 <= first <= end):
        return None
    if len(payload) > start and end != num_records:
        return None
    return FaceLayout(int(first), int(end))


def positions_of_keys(reader, keys):
    """Record positions of ``keys`` (a sequence of index keys), as an int64 array."""
    if reader.table.identity and isinstance(keys, range):  # the common case, without a loop
        if len(keys) and (min(keys) < 0 or max(keys) >= len(reader)):
            bad = keys[0] if not 0 <= keys[0] < len(reader) else keys[-1]
            raise KeyError(f"key {bad!r} not in {reader.index_url or reader.url} (choosing "
                           "records with keys=)")
        return np.arange(keys.start, keys.stop, keys.step, dtype=np.int64)
    try:
        return np.fromiter((reader.position_of_key(key) for key in keys), dtype=np.int64)
    except KeyError as exc:
        raise KeyError(f"{exc.args[0]} (choosing records with keys=)") from None


def image_positions(reader, keys=None):
    """Positions of the records to serve as images: ``keys`` when given, the image keys of an
    InsightFace layout, else None (every record)."""
    if keys is not None:
        return positions_of_keys(reader, keys)
    layout = detect_face_layout(reader)
    if layout is None:
        return None
    log.info("%s: InsightFace layout (header record, %d images, %d identities): serving the "
             "images only", reader.url, layout.images, layout.identities)
    return positions_of_keys(reader, range(1, layout.first_identity))
