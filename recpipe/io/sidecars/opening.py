"""Opening a ``.rec``'s sidecars together, the one way a reader does (``RecordReader``).

``open_sidecars`` names them (``names``: ``x.idx``, ``x.sums``), opens those present in one go
(``recpipe.io.sources.open_present``), and hands each to its own module, each called once and
calling only downward: the index (``index.index_table``: the ``.idx`` parsed, or the records
scanned when there is none; a local one through the memory-mapped ``index_cache``), the
checksums bound to the file (``sums.sums_of``) and, when asked, the quarantine view of the
file's records (``quarantine.RecordQuarantine``). ``load_index_table`` opens an index alone, for
the tools that need one without a reader (``recpipe verify``, the chunk planner).
"""

from typing import NamedTuple, Optional

from ..sources import open_present
from .index import index_table
from .index_table import IndexTable
from .names import index_url_for, sums_url_for
from .quarantine import RecordQuarantine
from .sums import RecordSums, note_unprotected, sums_of

__all__ = ["Sidecars", "load_index_table", "open_sidecars"]


class Sidecars(NamedTuple):
    """What describes a ``.rec``: ``index_url`` (the ``.idx`` read, None without one), its
    ``table`` (offsets and keys), its bound checksum sidecar (``sums``, None without one or
    with ``integrity='off'``) and the quarantine view of its records (None unless asked)."""

    index_url: Optional[str]
    table: IndexTable
    sums: Optional[RecordSums]
    quarantine: Optional[RecordQuarantine]


def open_sidecars(rec_url, rec_source, index_url=None, storage_options=None, *,
                  key_type=int, cache=True, integrity="auto", quarantine=False,
                  note=False) -> Sidecars:
    """The sidecars of the ``.rec`` at ``rec_url``, open as ``rec_source``.

    ``index_url``: the ``.idx`` to read (it must exist); None: the one beside the ``.rec`` when
    there is one; False or "": none (the records are found by a scan). ``integrity`` other than
    'off': the ``.sums`` beside the ``.rec`` too, when there is one. ``quarantine``: the view of
    the records found bad earlier (kept in the user's quarantine file unless ``integrity`` is
    'off'). ``note``: log, once per file, that it has no checksum sidecar (what loaders do,
    ``sums.note_unprotected``). Errors: FileNotFoundError for a missing ``index_url``,
    RecordFormatError for a
    damaged sidecar, ``StaleSumsError`` for one that does not describe the file."""
    rec_url = str(rec_url)
    wanted = index_url_for(rec_url) if index_url is None else (str(index_url) or None)
    sums_url = sums_url_for(rec_url) if integrity != "off" else None
    idx_source, sums_source = open_present(
        [wanted if wanted != rec_url else None, sums_url if sums_url != rec_url else None],
        storage_options)
    try:
        if idx_source is None and index_url:
            raise FileNotFoundError(f"no such file: {index_url}")
        table = index_table(rec_source, idx_source, url=wanted, key_type=key_type, cache=cache)
        sums = sums_of(sums_source, rec_url, rec_source, table.offsets)
        if note and sums is None and integrity != "off":
            note_unprotected(rec_url)  # no checksums, and how to add them
    finally:
        for source in (idx_source, sums_source):
            if source is not None:
                source.close()
    view = RecordQuarantine.opened(rec_url, rec_source.identity, table.offsets, sums,
                                   enabled=integrity != "off") if quarantine else None
    return Sidecars(wanted if idx_source is not None else None, table, sums, view)


def load_index_table(url, storage_options=None, *, key_type=int, cache=True,
                     rec_url=None) -> IndexTable:
    """The ``IndexTable`` of the ``.idx`` at ``url`` (checked against, and for the cache bound
    to, the ``.rec`` at ``rec_url`` when given and present), as readers parse it."""
    idx_source, rec_source = open_present([str(url), rec_url], storage_options)
    try:
        if idx_source is None:
            raise FileNotFoundError(f"no such file: {url}")
        return index_table(rec_source, idx_source, url=str(url), key_type=key_type, cache=cache)
    finally:
        for source in (idx_source, rec_source):
            if source is not None:
                source.close()
