"""Whether a ``.rec`` is protected by checksums, said where a user looks.

A file is protected when a ``.sums`` sidecar that describes it lies beside it
(``recpipe.io.sidecars.sums``): then every record read is checked and a damaged one is never
served. Without one, records are checked only by their framing (and, when decoded, by the
decoder, which lets much damage through: a JPEG whose scan data is hit often still decodes).
``protection_of`` says which (``bound``, ``stale``, ``unusable`` or ``absent``), for
``recpipe inspect`` and ``recpipe doctor FILE``; ``note_unprotected`` is what loaders log, once
per file and process, when they open a file without one, and ``advice`` the one line that says
how to protect it (both from ``recpipe.io.sidecars.sums``, where the reader opening the file
calls the first).
"""

import logging

from ...errors import SIDECAR, RecordFormatError, StaleSumsError
from ..reader import RecordReader
from ..sidecars.sums import advice, note_unprotected, sums_url_for

__all__ = ["PROTECTION_STATES", "advice", "describe", "note_unprotected", "protection_of"]

log = logging.getLogger(__name__)

PROTECTION_STATES = {
    "bound": "protected: every record read is checked against its CRC32C in the sidecar",
    "stale": "NOT protected: the sidecar does not describe the .rec as it is now",
    "unusable": "NOT protected: the sidecar is damaged (or not a regular file)",
    "absent": "NOT protected: no checksum sidecar, records are checked by framing (and "
              "decoding) only",
    "unknown": "not known: the .rec or its .idx does not open",
}


def protection_of(url, storage_options=None):
    """``{"state", "sums", "records", "detail"}``: whether ``url`` is protected by its sidecar
    (``sums``): ``state`` one of ``PROTECTION_STATES``, ``records`` the records it covers when
    bound. A bound sidecar is also probed against a few records (``RecordSums.stale_reason``).
    ``unknown`` when the ``.rec`` or its ``.idx`` does not open (``detail``: why)."""
    found = {"sums": sums_url_for(url), "records": None, "detail": ""}
    try:
        with RecordReader(url, storage_options=storage_options, integrity="off"):
            pass  # the .rec and its .idx open: what fails from here on is the sidecar
    except (RecordFormatError, OSError, KeyError) as exc:
        return {**found, "state": "unknown", "detail": str(exc)}
    try:
        with RecordReader(url, storage_options=storage_options) as reader:
            sums = reader.sums
            stale = sums.stale_reason() if sums is not None else ""
    except StaleSumsError as exc:
        return {**found, "state": "stale", "detail": exc.reason}
    except (RecordFormatError, OSError) as exc:
        if isinstance(exc, RecordFormatError) and exc.fault != SIDECAR:
            raise
        return {**found, "state": "unusable", "detail": getattr(exc, "reason", str(exc))}
    if sums is None:
        return {**found, "state": "absent", "detail": advice(url)}
    if stale:
        return {**found, "state": "stale", "detail": stale}
    return {**found, "state": "bound", "records": len(sums)}


def describe(protection):
    """One line for a person: the state, the sidecar, and what to do when not protected."""
    state = protection["state"]
    text = PROTECTION_STATES[state]
    if state == "bound":
        return f"{text} ({protection['sums']}, {protection['records']} records)"
    if state in ("absent", "unknown"):
        return f"{text}; {protection['detail']}"
    return f"{text} ({protection['sums']}): {protection['detail']}"
