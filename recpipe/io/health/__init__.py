"""Checking a whole ``.rec``: ``verify`` (every record's framing, header, checksum and, on
request, decode; ``recpipe verify``), ``integrity_check`` (writing or clearing the checksum
sidecar and the quarantine from a verify), ``contents`` (what a file holds: labels, sizes,
formats), ``explain`` (a record traced back to the file it was packed from) and ``protection``
(whether a file is protected by its checksums)."""

__all__: list = []
