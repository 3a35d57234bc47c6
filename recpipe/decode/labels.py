"""Labels of a record by ImageRecordIter's rules (``label_width``), or looked up by the image id
of its header (``IdLabels``: an imglist's).

The rule and the lookup are defined once, in C (csrc/record/record.h's ``label_rule`` and
``id_row``, through ``recpipe._kernels``), the same code ``recpipe._batch`` labels its runs
with; this module turns their answers into numpy values and precise errors."""

import numpy as np

from .._optional import native
from ..errors import DecodeError, LabelError, RecordFormatError

__all__ = ["IdLabels", "header_labels", "record_label"]

_ID_RANGE = 1 << 64  # header ids are uint64
_C = None  # recpipe._kernels, loaded on first use (importing recpipe does not need it built)
_SCALAR = _PACKED = _NOT_SCALAR = None  # its label_rule's answers


def _records():
    global _C, _SCALAR, _PACKED, _NOT_SCALAR
    if _C is None:
        c = native("_kernels")
        _SCALAR, _PACKED, _NOT_SCALAR = c.LABELS_SCALAR, c.LABELS_PACKED, c.LABELS_NOT_SCALAR
        _C = c
    return _C


class IdLabels:
    """A label rule ``(header, position) -> label`` that looks the record's ``header.id`` up in
    ``labels`` (``{image id: float32 scalar or label_width values}``, e.g. an imglist's); an
    id not there raises LabelError (a RecordFormatError the quarantine ignores: the record is
    sound) naming ``source`` (and ``path``, the records). The label is the id's row of
    ``values``: a float32 scalar when ``label_width == 1``, else a copy of its ``label_width``
    float32 values.
    ``ids`` (ascending uint64) and ``values`` (float32, one row of ``label_width`` a id) are the
    table both paths look ids up in (record.h's ``id_row``: here and in ``recpipe._batch``)."""

    def __init__(self, labels, label_width, *, source, path=None):
        self.labels = labels
        self.label_width = int(label_width)
        self.source = source
        self.path = path
        ids = sorted(key for key in labels if 0 <= key < _ID_RANGE)  # others match no header
        self.ids = np.array(ids, dtype=np.uint64)
        rows = np.array([labels[key] for key in ids], dtype=np.float32)
        rows = rows.reshape(len(ids), -1) if ids else np.zeros((0, self.label_width), np.float32)
        self.values = np.ascontiguousarray(rows[:, :self.label_width])

    def __call__(self, header, position):
        row = (_C or _records()).id_row(self.ids, header.id)
        if row < 0:
            raise LabelError(f"image id {header.id} is not in {self.source}",
                             path=self.path, record=position)
        return self.values[row, 0] if self.label_width == 1 else self.values[row].copy()


def header_labels(header, label_width, *, path=None, record=None):
    """A float32 scalar when ``label_width == 1``, else the first ``label_width`` packed labels.

    A flag-0 header has one label; packed labels (flag > 0) must number at least
    ``label_width`` (MXNet requires exactly; extra trailing labels are ignored here). A record
    that has fewer raises ``LabelError``: the setting does not fit the record, whose bytes are
    sound (it is never quarantined).
    """
    rule = (_C or _records()).label_rule(header.flag, label_width)
    if rule == _SCALAR:
        return np.float32(header.label)
    if rule == _PACKED:
        labels = np.asarray(header.label, dtype=np.float32)
        return labels[0] if label_width == 1 else labels[:label_width].copy()
    if rule == _NOT_SCALAR:
        raise LabelError(f"record has a single label but label_width={label_width}",
                         path=path, record=record, detector="label_width")
    raise LabelError(f"record has {header.flag} packed labels but "
                     f"label_width={label_width}", path=path, record=record,
                     detector="label_width")


def record_label(header, position, label_width, label_rule=None, *, path=None):
    """The label of the record at ``position`` with ``header``: ``label_rule(header, position)``
    when given, else ImageRecordIter's rules (``header_labels``). A RecordFormatError or
    DecodeError of ``label_rule`` is raised as a ``LabelError`` (the record is sound: it is not
    quarantined)."""
    if label_rule is None:
        return header_labels(header, label_width, path=path, record=position)
    try:
        return label_rule(header, position)
    except LabelError:
        raise
    except (RecordFormatError, DecodeError) as exc:
        raise LabelError(exc.reason, path=exc.path or path, record=position) from exc
