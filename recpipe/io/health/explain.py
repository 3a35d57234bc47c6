"""What an error that stops a run says: which record (its index key, the file it was packed
from) and how to go on.

A loader with ``on_error='raise'`` (the default) stops at the first damaged record: a checksum
mismatch, a broken frame, an image that does not decode. ``explain_stop(exc, reader)`` returns
that error with the record's key, the source file ``recpipe pack`` recorded for it
(``recpipe.io.sidecars.record_sources``, when the sidecar exists) and the way on:
``on_error='skip'`` or ``'replace'``, and ``recpipe verify`` to list every damaged record.
"""

import logging
from typing import Optional

from ...errors import DecodeError, LabelError, RecordFormatError
from ..sidecars.record_sources import RecordSources, SourceEntry

__all__ = ["explain_stop", "record_source"]

log = logging.getLogger(__name__)


def record_source(reader, position) -> Optional[SourceEntry]:
    """The file record ``position`` of ``reader`` was packed from, or None (no sidecar, or
    one that does not describe this file)."""
    if position is None or not 0 <= position < len(reader):
        return None
    try:
        with_sources = RecordSources.open(reader.url, reader.storage_options, reader.size)
        if with_sources is None:
            return None
        with with_sources:
            return with_sources.lookup(int(reader.offsets[position]), reader.keys[position])
    except (OSError, ValueError) as e:  # naming the source is a courtesy: never a second error
        log.warning("%s: the source of record %s cannot be looked up: %s", reader.url,
                    position, e)
        return None


def _hint(exc, url, loader):
    if isinstance(exc, LabelError):
        return ("to go on: on_error='skip' leaves records without a label out (or give the "
                "label rule one for it)" if loader else None)
    verify = f"`recpipe verify {'--decode ' if isinstance(exc, DecodeError) else ''}{url}` " \
             "lists every damaged record"
    if not loader:
        return f"{verify}; repair or re-pack it, then run again"
    return (f"to go on: on_error='skip' leaves damaged records out, on_error='replace' puts "
            f"another record in their place; {verify}")


def explain_stop(exc, reader, *, loader=True):
    """``exc`` as the error that stops a run over ``reader`` should say it: a new error of the
    same type naming the record's key and its source file, with a hint on how to go on
    (``loader``: the loaders' ``on_error``; else only ``recpipe verify``). Errors that are
    not about a record of ``reader``, or already explained, are returned as they are."""
    if not isinstance(exc, (RecordFormatError, DecodeError)) or exc.hint is not None:
        return exc
    position = exc.record
    if exc.path not in (None, reader.url) or position is None or \
            not 0 <= position < len(reader):
        return exc
    source = record_source(reader, position)
    fields = exc.details()
    fields.update(key=reader.keys[position], hint=_hint(exc, reader.url, loader),
                  source=source.describe() if source is not None else None)
    explained = type(exc)(exc.reason, **fields)
    explained.__cause__ = exc.__cause__
    return explained.with_traceback(exc.__traceback__)
