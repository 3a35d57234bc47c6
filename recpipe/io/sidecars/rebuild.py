"""``rebuild_index``: a fresh ``.idx`` for a ``.rec``, written atomically, keyed by ``IRHeader.id``
when those are usable (as im2rec does) or by position (as mxnet's ``tools/rec2idx.py`` does)."""

import array
import logging
from typing import Callable, NamedTuple, Optional

import numpy as np

from ...errors import RecordFormatError
from ..atomic import AtomicOutput
from ..format.header import unpack_header
from .index import format_index_line, index_url_for
from ..format.scan import scan_with_progress
from ..sources import open_source

__all__ = ["IndexRebuild", "index_target", "rebuild_index", "record_id", "write_index"]

log = logging.getLogger(__name__)


class IndexRebuild(NamedTuple):
    """What ``rebuild_index`` wrote: ``keys`` is ``"header.id"`` or ``"position"``."""

    index_url: str
    records: int
    keys: str
    reason: str
    skipped: int = 0


def rebuild_index(url: str, index_url: Optional[str] = None, *, positions: bool = False,
                  skip_bad: bool = False, storage_options: Optional[dict] = None,
                  progress: Optional[Callable[[int], None]] = None) -> "IndexRebuild":
    """Write a fresh ``.idx`` for ``url`` atomically and return an ``IndexRebuild``.

    Keys are ``IRHeader.id`` when every record has a header and the ids are unique (im2rec's
    keys), else ``0..N-1``; ``positions=True`` forces ``0..N-1`` like mxnet's ``tools/rec2idx.py``.
    A bad record raises RecordFormatError unless ``skip_bad=True``, which indexes the readable
    records only. ``index_url=None`` writes beside the ``.rec`` (``x.rec`` -> ``x.idx``).
    """
    url = str(url)
    index_url = index_target(url, index_url)
    offsets, ids, skipped = _collect_heads(url, skip_bad, storage_options, need_ids=not positions,
                                           progress=progress)
    return write_index(index_url, offsets, ids, positions=positions, skipped=skipped,
                       storage_options=storage_options)


def index_target(url, index_url=None):
    """Where ``rebuild_index`` writes: ``index_url``, else beside the ``.rec``; never the
    ``.rec`` itself."""
    url = str(url)
    index_url = str(index_url) if index_url else index_url_for(url)
    if index_url == url:
        raise ValueError(f"the index would overwrite the record file {url}")
    return index_url


def write_index(index_url: str, offsets, ids, *, positions: bool = False, skipped: int = 0,
                storage_options: Optional[dict] = None) -> "IndexRebuild":
    """Write the ``.idx`` of the readable records at ``offsets`` (int64 array, file order)
    atomically, keyed as ``rebuild_index`` says from their header ``ids`` (int64 array of
    ``record_id``; unused with ``positions``). ``skipped``: bad ranges left out (reported)."""
    keys, kind, reason = _choose_keys(offsets, ids, positions)
    with AtomicOutput(index_url, storage_options) as output:
        for start in range(0, len(offsets), 1 << 16):  # in slices: no 17M-line string
            stop = start + (1 << 16)
            output.write("".join(format_index_line(k, o) for k, o in
                                 zip(keys[start:stop], offsets[start:stop].tolist())).encode())
    log.info("wrote %s: %d entries keyed by %s (%s)", index_url, len(offsets), kind, reason)
    return IndexRebuild(index_url, len(offsets), kind, reason, skipped)


def _collect_heads(url, skip_bad, storage_options, *, need_ids, progress=None):
    """Offsets of the readable records and, when wanted, their header ids (-1 if no header),
    as int64 arrays."""
    offsets, ids, skipped = array.array("q"), array.array("q"), 0
    with open_source(url, storage_options) as source:
        for item in scan_with_progress(source, keep_payload=need_ids, progress=progress):
            if item.error is not None:
                if not skip_bad:
                    raise item.error
                log.warning("%s: skipping bytes %d..%d: %s", url, item.offset, item.end,
                            item.error.reason)
                skipped += 1
                continue
            offsets.append(item.offset)
            if need_ids:
                ids.append(record_id(item.payload))
    return np.frombuffer(offsets, np.int64), np.frombuffer(ids, np.int64), skipped


def record_id(payload):
    """The ``IRHeader.id`` of a record's payload, or -1 when it has no readable header."""
    try:
        header, _ = unpack_header(payload)
    except RecordFormatError:
        return -1
    return header.id


def _choose_keys(offsets, ids, positions):
    if positions:
        return range(len(offsets)), "position", "positions requested"
    if not len(offsets):
        return [], "position", "the file has no records"
    if bool((ids < 0).any()):
        return range(len(offsets)), "position", "some records have no IRHeader"
    if len(np.unique(ids)) != len(ids):
        return range(len(offsets)), "position", "IRHeader ids are not unique"
    return ids.tolist() if len(ids) < (1 << 16) else _IdColumn(ids), "header.id", \
        "every record has an IRHeader with a unique id"


class _IdColumn:
    """Slices of an id array as lists (what the writer loop takes), without one big list."""

    def __init__(self, ids):
        self.ids = ids

    def __getitem__(self, index):
        return self.ids[index].tolist()
