"""Labels of a record by ImageRecordIter's rules (``label_width``)."""

import numpy as np

from ..errors import RecordFormatError

__all__ = ["header_labels"]


def header_labels(header, label_width, *, path=None, record=None):
    """A float32 scalar when ``label_width == 1``, else the first ``label_width`` packed labels.

    A flag-0 header has one label; packed labels (flag > 0) must number at least
    ``label_width`` (MXNet requires exactly; extra trailing labels are ignored here).
    """
    if header.flag == 0:
        if label_width != 1:
            raise RecordFormatError(f"record has a single label but label_width={label_width}",
                                    path=path, record=record)
        return np.float32(header.label)
    if header.flag < label_width:
        raise RecordFormatError(f"record has {header.flag} packed labels but "
                                f"label_width={label_width}", path=path, record=record)
    labels = np.asarray(header.label, dtype=np.float32)
    return labels[0] if label_width == 1 else labels[:label_width].copy()
