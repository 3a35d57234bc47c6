"""What a ``.rec`` holds: ``inspect`` summarises records, headers, labels and, over a seeded
sample, image formats and sizes (``recpipe inspect``)."""

import array
import collections
import random
from typing import Callable, Optional

import numpy as np

from ...errors import RecordFormatError
from ..format.header import unpack_header
from ..format.layout import face_layout_of
from ..format.scan import SlidingBuffer, read_record, scan_with_progress
from ..sidecars.record_sources import sources_summary
from ..sources import open_source

__all__ = ["inspect"]

_SAMPLE_BLOCK = 1 << 16  # reads for sampled records: about one image, not a whole scan block


def inspect(url: str, *, sample: int = 64, seed: int = 0, storage_options: Optional[dict] = None,
            max_labels: int = 50, progress: Optional[Callable[[int], None]] = None) -> dict:
    """Summarise ``url`` as a JSON-ready dict: sizes, headers, labels and sampled image facts.

    The whole file is scanned once for the headers (bad byte ranges are skipped and counted);
    ``sample`` records, drawn with ``random.Random(seed)``, are sniffed for image format and size.
    In InsightFace's layout the labels and the sample are the image records' only (the header
    and identity records hold key ranges, not images); ``labels.layout_records`` counts those.
    """
    url = str(url)
    with open_source(url, storage_options) as source:
        stats = _RecordStats(max_labels)
        first = None
        for item in scan_with_progress(source, keep_payload=True, progress=progress):
            if first is None and item.error is None:
                first = item.payload
                stats.layout = face_layout_of(first, -1)  # a candidate: the count comes last
            stats.add(item)
        layout = face_layout_of(first, len(stats.offsets)) if first is not None else None
        stats.settle(layout)
        candidates = (range(1, min(layout.first_identity, len(stats.offsets))) if layout
                      else range(len(stats.offsets)))
        rng = random.Random(seed)
        chosen = sorted(rng.sample(candidates, min(sample, len(candidates))))
        images = _sample_images(source, [stats.offsets[i] for i in chosen])
    return {"url": url, "bytes": source.size, **stats.summary(),
            "images": {"sampled": len(chosen), "seed": seed, **images},
            "layout": _layout_summary(layout),
            "sources": sources_summary(url, storage_options, source.size)}


def _layout_summary(layout):
    if layout is None:
        return {"kind": "plain"}
    return {"kind": "insightface", "images": layout.images, "identities": layout.identities,
            "image_keys": [1, layout.first_identity],
            "identity_keys": [layout.first_identity, layout.end_identity]}


class _RecordStats:
    """Running counts over the records of a scan: sizes, header ids and labels."""

    def __init__(self, max_labels):
        self.max_labels = max_labels
        self.offsets = array.array("q")  # 8 bytes a record, not a Python int
        self.sizes = array.array("q")
        self.bad_ranges = 0
        self.skipped_bytes = 0
        self.no_header = 0
        self.ids = array.array("q")
        self.id2_nonzero = 0
        self.widths: "collections.Counter[int]" = collections.Counter()
        self.labels: "collections.Counter[float]" = collections.Counter()
        # InsightFace's header and identity records (a candidate layout, settled at the end)
        self.layout = None
        self.layout_widths: "collections.Counter[int]" = collections.Counter()
        self.layout_labels: "collections.Counter[float]" = collections.Counter()
        self.layout_records = 0

    def add(self, item):
        if item.error is not None:
            self.bad_ranges += 1
            self.skipped_bytes += item.end - item.offset
            return
        position = len(self.offsets)
        self.offsets.append(item.offset)
        self.sizes.append(len(item.payload))
        try:
            header, _ = unpack_header(item.payload)
        except RecordFormatError:
            self.no_header += 1
            return
        self.ids.append(header.id)
        self.id2_nonzero += header.id2 != 0
        label = header.label if header.flag == 0 else header.label[0]
        if self.layout is not None and (position == 0
                                        or position >= self.layout.first_identity):
            self.layout_widths[header.flag] += 1
            self.layout_labels[float(label)] += 1
            self.layout_records += 1
            return
        self.widths[header.flag] += 1
        self.labels[float(label)] += 1

    def settle(self, layout):
        """The file's layout, known once every record is counted: without InsightFace's, the
        records set apart for it are counted as the others are."""
        self.layout = layout
        if layout is None and self.layout_records:
            self.widths.update(self.layout_widths)
            self.labels.update(self.layout_labels)
            self.layout_widths.clear()
            self.layout_labels.clear()
            self.layout_records = 0

    def summary(self):
        sizes = np.frombuffer(self.sizes, dtype=np.int64)
        return {
            "records": len(self.offsets),
            "bad_ranges": self.bad_ranges,
            "skipped_bytes": self.skipped_bytes,
            "payload_bytes": {"total": int(sizes.sum()), **_spread(sizes)},
            "headers": self._headers(),
            "labels": self._labels(),
        }

    def _headers(self):
        ids = np.frombuffer(self.ids, dtype=np.int64)
        return {
            "with_header": len(ids),
            "without_header": self.no_header,
            "ids_unique": len(np.unique(ids)) == len(ids),
            "id_min": int(ids.min()) if len(ids) else None,
            "id_max": int(ids.max()) if len(ids) else None,
            "id2_nonzero": self.id2_nonzero,
        }

    def _labels(self):
        scalar = self.widths.get(0, 0)
        packed = sum(n for width, n in self.widths.items() if width > 0)
        common = self.labels.most_common(self.max_labels)
        return {
            "scalar": scalar,
            "packed": packed,
            "widths": {str(w): n for w, n in sorted(self.widths.items())},
            "distinct": len(self.labels),
            "histogram": {_label_text(v): n for v, n in sorted(common)},
            "histogram_of": "label" if not packed else ("label[0]" if not scalar else
                                                          "label, or label[0] when packed"),
            "histogram_truncated": len(self.labels) > len(common),
            "notes": self._label_notes(scalar, packed),
            # InsightFace's header and identity records, left out of the counts above
            "layout_records": {"header": 1, "identities": self.layout_records - 1}
            if self.layout_records else None,
        }

    def _label_notes(self, scalar, packed):
        notes = []
        if scalar and packed:
            notes.append("mixed: some records have a scalar label (flag 0), others packed labels")
        elif packed:
            notes.append("packed multi-labels (flag > 0): ImageRecordIter needs "
                         "label_width == flag")
        if packed and len([w for w in self.widths if w > 0]) > 1:
            notes.append("packed label widths differ between records")
        if self.labels and set(self.labels) == {0.0} and len(self.ids) > 1:
            notes.append("every label is 0.0: the labels may be missing")
        return notes


def _label_text(value):
    return format(value, "g")


def _spread(values):
    if not len(values):
        return {"min": None, "max": None, "mean": None}
    return {"min": int(values.min()), "max": int(values.max()),
            "mean": round(float(values.mean()), 1)}


def _sample_images(source, offsets):
    """Format, size and colour facts of the images in the records at ``offsets``."""
    from ...image.info import sniff

    formats: "collections.Counter[str]" = collections.Counter()
    channels: "collections.Counter[str]" = collections.Counter()
    orientation: "collections.Counter[str]" = collections.Counter()
    flags: "collections.Counter[str]" = collections.Counter()
    widths, heights = [], []
    for offset in offsets:
        payload, _ = read_record(SlidingBuffer(source, _SAMPLE_BLOCK), offset)
        try:
            _, start = unpack_header(payload)
        except RecordFormatError:
            start = 0  # a record without an IRHeader: sniff the whole payload
        info = sniff(memoryview(payload)[start:])
        formats[info.format] += 1
        if info.width is not None and info.height is not None:
            widths.append(info.width)
            heights.append(info.height)
        if info.channels is not None:
            channels[str(info.channels)] += 1
        if info.exif_orientation not in (None, 1):
            orientation[str(info.exif_orientation)] += 1
        flags.update(name for name in ("progressive", "cmyk", "grayscale", "restart_interval")
                     if getattr(info, name))
    return {
        "formats": dict(formats.most_common()),
        "width": _spread(np.asarray(widths, dtype=np.int64)),
        "height": _spread(np.asarray(heights, dtype=np.int64)),
        "channels": dict(sorted(channels.items())),
        "progressive": flags["progressive"],
        "cmyk": flags["cmyk"],
        "grayscale": flags["grayscale"],
        "restart_markers": flags["restart_interval"],  # JPEGs with a restart interval
        "exif_rotated": dict(sorted(orientation.items())),
    }
