"""Cheap facts about an image file from its header bytes: format, size, colour layout, orientation.

``sniff(data)`` parses JPEG markers (SOFn, APP1 Exif orientation, Adobe APP14), the PNG IHDR and
the GIF, BMP and WebP headers in pure Python without decoding pixels. It never raises on garbage:
unrecognised or truncated bytes give ``format='unknown'`` (or unknown sizes as ``None``).
``unusual_reasons(info, suffix)`` names what about a file deserves a look before packing.
"""

import struct
from typing import NamedTuple, Optional

from .jpeg import SOF_MARKERS, JpegHeaderError, segments

__all__ = ["ImageInfo", "sniff", "unusual_reasons", "REASONS", "FORMATS"]

FORMATS = ("jpeg", "png", "gif", "bmp", "webp", "unknown")

# reason code -> what it means; codes are stable, for counting and JSON reports
REASONS = {
    "unreadable": "not a recognised image (or its header is truncated)",
    "not-jpeg": "the bytes are not JPEG although the name ends in .jpg/.jpeg",
    "progressive": "progressive JPEG (or interlaced PNG): slower to decode",
    "cmyk": "4-component JPEG (CMYK or YCCK): colours depend on the decoder",
    "grayscale": "single-channel image",
    "exif-rotated": "EXIF orientation other than 1: decoders disagree on applying it",
}

_JPEG_SUFFIXES = (".jpg", ".jpeg", ".jpe", ".jfif")
# SOFn markers: C0-CF except DHT (C4), JPG (C8) and DAC (CC)
_PROGRESSIVE_SOF = frozenset((0xC2, 0xC6, 0xCA, 0xCE))
_APP1 = 0xE1
_DRI = 0xDD
_ORIENTATION_TAG = 0x0112
_PNG_CHANNELS = {0: 1, 2: 3, 3: 3, 4: 2, 6: 4}


class ImageInfo(NamedTuple):
    """What the header says. ``width``/``height``/``channels`` are ``None`` when not found.

    ``progressive`` is a progressive JPEG or an interlaced (Adam7) PNG; ``cmyk`` a 4-component
    JPEG (Adobe CMYK or YCCK); ``exif_orientation`` the EXIF tag 0x0112 (1..8) when present;
    ``restart_interval`` a JPEG's restart interval in MCUs (its DRI segment; ``image.restart``)
    when it has one.
    """

    format: str
    width: Optional[int] = None
    height: Optional[int] = None
    channels: Optional[int] = None
    progressive: bool = False
    cmyk: bool = False
    grayscale: bool = False
    exif_orientation: Optional[int] = None
    restart_interval: Optional[int] = None


UNKNOWN = ImageInfo("unknown")


def sniff(data):
    """Return the ``ImageInfo`` of image file bytes (``bytes``/``memoryview``); never raises."""
    try:
        head = bytes(data[:16])
        if head[:3] == b"\xff\xd8\xff":
            return _sniff_jpeg(data)
        if head[:8] == b"\x89PNG\r\n\x1a\n":
            return _sniff_png(data)
        if head[:6] in (b"GIF87a", b"GIF89a"):
            return _sniff_gif(data)
        if head[:2] == b"BM":
            return _sniff_bmp(data)
        if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
            return _sniff_webp(data)
    except (struct.error, ValueError, IndexError, TypeError):
        pass
    return UNKNOWN


def unusual_reasons(info, suffix=""):
    """Reason codes (keys of ``REASONS``) for what is unusual about a file; ``[]`` if nothing.

    ``suffix`` is the file name's extension (or the whole name); a JPEG extension on non-JPEG
    bytes is reported as ``not-jpeg``.
    """
    if info.format == "unknown" or info.width is None:
        return ["unreadable"]
    reasons = []
    if str(suffix).lower().endswith(_JPEG_SUFFIXES) and info.format != "jpeg":
        reasons.append("not-jpeg")
    if info.progressive:
        reasons.append("progressive")
    if info.cmyk:
        reasons.append("cmyk")
    if info.grayscale:
        reasons.append("grayscale")
    if info.exif_orientation not in (None, 1):
        reasons.append("exif-rotated")
    return reasons


def _jpeg_segments(data):
    """``jpeg.segments``, ending quietly where the header stops making sense."""
    try:
        yield from segments(data)
    except JpegHeaderError:
        return


def _sniff_jpeg(data):
    fields = {"progressive": False}
    for marker, start, end in _jpeg_segments(data):
        if marker in SOF_MARKERS and "width" not in fields and end - start >= 6:
            _, height, width, components = struct.unpack_from(">BHHB", data, start)
            fields.update(width=width, height=height, channels=components,
                          progressive=marker in _PROGRESSIVE_SOF)
        elif marker == _DRI and end - start >= 2:
            fields["restart_interval"] = struct.unpack_from(">H", data, start)[0] or None
        elif marker == _APP1 and bytes(data[start:start + 6]) == b"Exif\x00\x00":
            if "exif_orientation" not in fields:
                fields["exif_orientation"] = _exif_orientation(bytes(data[start + 6:end]))
    # 4 components is CMYK or YCCK (the Adobe APP14 transform says which): both count as cmyk
    channels = fields.get("channels")
    return ImageInfo("jpeg", fields.get("width"), fields.get("height"), channels,
                     progressive=fields["progressive"], cmyk=channels == 4,
                     grayscale=channels == 1, exif_orientation=fields.get("exif_orientation"),
                     restart_interval=fields.get("restart_interval"))


def _exif_orientation(tiff):
    """Orientation (tag 0x0112) from IFD0 of a TIFF block, or ``None``."""
    if len(tiff) < 8 or tiff[:2] not in (b"II", b"MM"):
        return None
    order = "<" if tiff[:2] == b"II" else ">"
    magic, ifd = struct.unpack_from(order + "HI", tiff, 2)
    if magic != 42 or ifd + 2 > len(tiff):
        return None
    (count,) = struct.unpack_from(order + "H", tiff, ifd)
    for i in range(count):
        entry = ifd + 2 + 12 * i
        if entry + 12 > len(tiff):
            return None
        tag, kind = struct.unpack_from(order + "HH", tiff, entry)
        if tag == _ORIENTATION_TAG:
            if kind == 3:  # SHORT: value in the first two bytes of the value field
                (value,) = struct.unpack_from(order + "H", tiff, entry + 8)
            elif kind == 4:  # LONG
                (value,) = struct.unpack_from(order + "I", tiff, entry + 8)
            else:
                return None
            return value
    return None


def _sniff_png(data):
    if bytes(data[12:16]) != b"IHDR":
        return ImageInfo("png")
    width, height, _, color_type, _, _, interlace = struct.unpack_from(">IIBBBBB", data, 16)
    return ImageInfo("png", width, height, _PNG_CHANNELS.get(color_type),
                     progressive=interlace == 1, grayscale=color_type in (0, 4))


def _sniff_gif(data):
    width, height = struct.unpack_from("<HH", data, 6)
    return ImageInfo("gif", width, height, 3)


def _sniff_bmp(data):
    (header_size,) = struct.unpack_from("<I", data, 14)
    if header_size == 12:  # BITMAPCOREHEADER
        width, height, _, bits = struct.unpack_from("<HHHH", data, 18)
    elif header_size >= 40:
        width, height, _, bits = struct.unpack_from("<iiHH", data, 18)
    else:
        return ImageInfo("bmp")
    return ImageInfo("bmp", abs(width), abs(height), 4 if bits == 32 else 3)


def _sniff_webp(data):
    chunk = bytes(data[12:16])
    if chunk == b"VP8X":
        flags = data[20]
        width = 1 + int.from_bytes(bytes(data[24:27]), "little")
        height = 1 + int.from_bytes(bytes(data[27:30]), "little")
        return ImageInfo("webp", width, height, 4 if flags & 0x10 else 3)
    if chunk == b"VP8L" and data[20] == 0x2F:
        (bits,) = struct.unpack_from("<I", data, 21)
        width = 1 + (bits & 0x3FFF)
        height = 1 + ((bits >> 14) & 0x3FFF)
        return ImageInfo("webp", width, height, 4 if (bits >> 28) & 1 else 3)
    if chunk == b"VP8 " and bytes(data[23:26]) == b"\x9d\x01\x2a":
        width, height = struct.unpack_from("<HH", data, 26)
        return ImageInfo("webp", width & 0x3FFF, height & 0x3FFF, 3)
    return ImageInfo("webp")
