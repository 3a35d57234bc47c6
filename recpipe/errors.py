"""Exception types of recpipe: builtin subclasses carrying where the problem is."""

from typing import Optional

__all__ = ["RecordFormatError", "DecodeError", "LabelError", "LimitError", "RecordTooLargeError",
           "RemoteReadError", "StaleSumsError", "NotCoveredError", "ON_ERROR", "check_on_error",
           "FAULTS", "BYTES_FAULTS", "CHECKSUM", "FORMAT", "DECODE", "SETTINGS", "SIDECAR",
           "is_fault_of_bytes"]

# ``on_error``: what a loader or the packer does with an item (a record, a file) that fails, one
# vocabulary for both: "raise" stops with the error; "skip" leaves the item out, counted and
# logged; "replace" (loaders only) puts another sample in its place, so batches stay full
ON_ERROR = ("raise", "skip", "replace")


def check_on_error(value, allowed=ON_ERROR):
    """Raise ValueError unless ``value`` is one of ``allowed`` (a part of ``ON_ERROR``)."""
    if value in allowed:
        return
    unavailable = f" ({value!r} is not available here)" if value in ON_ERROR else ""
    raise ValueError(f"on_error={value!r}: expected one of {tuple(allowed)}{unavailable}")


# ``fault``: what an error of a record says about the record, set where the error is raised.
# Faults of the record's bytes (the only ones a loader quarantines,
# ``recpipe.io.sidecars.quarantine``):
# the payload differs from its CRC32C in a .sums sidecar that describes the file
CHECKSUM = "checksum"
# the RecordIO framing, the IRHeader or an .idx offset of the record is broken
FORMAT = "format"
# the image does not decode, whatever the loader's settings (a whole decode fails)
DECODE = "decode"
BYTES_FAULTS = (CHECKSUM, FORMAT, DECODE)
# ...and faults of something else, never quarantined:
SETTINGS = "settings"  # sound bytes refused by a setting: label_width, a label_rule, max_pixels,
#                        max_scans, a crop or scale a decode fails at while the whole image decodes
SIDECAR = "sidecar"    # a .sums sidecar that is damaged or describes another file (stale)
FAULTS = BYTES_FAULTS + (SETTINGS, SIDECAR)
# ``None``: not known (an I/O error, a closed file...): never quarantined either


def is_fault_of_bytes(exc):
    """True when ``exc`` says that a record's own bytes are bad (``fault`` in BYTES_FAULTS)."""
    return getattr(exc, "fault", None) in BYTES_FAULTS


def _check_fault(fault):
    if fault is not None and fault not in FAULTS:
        raise ValueError(f"fault={fault!r}: expected one of {FAULTS} or None")
    return fault


def _where(path, offset, record, key=None):
    parts = []
    if record is not None:
        parts.append(f"record {record}")
    if offset is not None:
        parts.append(f"byte offset {offset}")
    if key is not None:
        parts.append(f"key {key}")
    return f" ({', '.join(parts)})" if parts else ""


def _more(source, hint):
    """What an error that stops a run adds: the file the record was packed from, and how to go
    on (``recpipe.io.health.explain``)."""
    text = f"; packed from {source}" if source else ""
    return f"{text}\n  {hint}" if hint else text


class RecordFormatError(ValueError):
    """A RecordIO, ``.idx`` or ``.lst`` file is malformed.

    ``path``, ``offset`` (byte offset in the file) and ``record`` (position of the record in the
    file, or line number for text files) say where; any of them may be ``None`` when unknown.
    ``fault`` says whose fault it is (``CHECKSUM``/``FORMAT``: the record's bytes; ``SIDECAR``;
    ``SETTINGS``; None: not known) and ``detector`` what found it (e.g. the sidecar and its
    digest), as set where it is raised. An error that stops a run also names the record's index
    ``key``, the ``source`` file it was packed from (when ``recpipe pack`` recorded it) and a
    ``hint`` on how to go on.
    """

    default_fault: Optional[str] = None

    def __init__(self, message, *, path=None, offset=None, record=None, fault=None,
                 detector=None, key=None, source=None, hint=None):
        self.reason = message
        self.path = path
        self.offset = offset
        self.record = record
        self.fault = _check_fault(fault or self.default_fault)
        self.detector = detector
        self.key = key
        self.source = source
        self.hint = hint
        prefix = f"{path}: " if path else ""
        super().__init__(f"{prefix}{message}{_where(path, offset, record, key)}"
                         f"{_more(source, hint)}")

    def __reduce__(self):
        return _rebuild_error, (type(self), self.reason, self.details())

    def details(self):
        """The keywords that rebuild this error (with its ``reason``)."""
        return {"path": self.path, "offset": self.offset, "record": self.record,
                "fault": self.fault, "detector": self.detector, "key": self.key,
                "source": self.source, "hint": self.hint}


def _rebuild_error(kind, message, fields):
    return kind(message, **fields)


class LabelError(RecordFormatError):
    """A record has no label under the loader's label settings: ``label_width`` (a record of
    one label read with ``label_width=2``) or ``label_rule`` (e.g. an imglist without its id).
    The record itself is sound (``fault == SETTINGS``): it goes through ``on_error`` but is
    never quarantined."""

    default_fault = SETTINGS


class StaleSumsError(RecordFormatError):
    """A ``.sums`` sidecar that does not describe its ``.rec`` as it is now (another file's, or
    left beside a re-packed one): nothing it says is a record's fault (``fault == SIDECAR``)."""

    default_fault = SIDECAR


class RecordTooLargeError(ValueError):
    """A payload exceeds RecordIO's 2**29 - 1 byte limit; nothing was written."""


class DecodeError(ValueError):
    """An image could not be decoded. ``fault``: ``DECODE`` when the record's bytes are at
    fault (the whole image does not decode), ``SETTINGS`` when a setting refused it
    (``LimitError``) or only this way of decoding it fails, None when not known (a decoder's
    own error before the loader classified it); ``detector``: what found it."""

    default_fault: Optional[str] = None

    def __init__(self, message, *, path=None, record=None, fault=None, detector=None,
                 key=None, source=None, hint=None):
        self.reason = message
        self.path = path
        self.record = record
        self.fault = _check_fault(fault or self.default_fault)
        self.detector = detector
        self.key = key
        self.source = source
        self.hint = hint
        prefix = f"{path}: " if path else ""
        super().__init__(f"{prefix}{message}{_where(path, None, record, key)}"
                         f"{_more(source, hint)}")

    def __reduce__(self):
        return _rebuild_error, (type(self), self.reason, self.details())

    def details(self):
        """The keywords that rebuild this error (with its ``reason``)."""
        return {"path": self.path, "record": self.record, "fault": self.fault,
                "detector": self.detector, "key": self.key, "source": self.source,
                "hint": self.hint}


class LimitError(DecodeError):
    """An image refused by a limit of the settings (``max_pixels``, ``max_scans``) before it
    was decoded: the bytes may be sound (``fault == SETTINGS``), never quarantined."""

    default_fault = SETTINGS


class RemoteReadError(OSError):
    """A byte range of a remote file could not be read: the error was permanent, or transient
    errors persisted through every retry or past the deadline. ``url``, ``offset`` and ``length``
    say which bytes; ``attempts`` how many requests were made; ``__cause__`` is the last error."""

    def __init__(self, message, *, url=None, offset=None, length=None, attempts=0):
        self.reason = message
        self.url = url
        self.offset = offset
        self.length = length
        self.attempts = attempts
        super().__init__(f"{url}: {message} (byte offset {offset}, {length} bytes, "
                         f"{attempts} attempt{'s' if attempts != 1 else ''})")

    def __reduce__(self):
        return _rebuild_remote_error, (self.reason, self.url, self.offset, self.length,
                                       self.attempts)


def _rebuild_remote_error(message, url, offset, length, attempts):
    return RemoteReadError(message, url=url, offset=offset, length=length, attempts=attempts)


class NotCoveredError(AttributeError):
    """An MXNet name that recpipe's MXNet namespaces (``import recpipe.mx as mx``, ``import
    recpipe as mx``, ``mx.image``) do not serve: the message says what they cover and what to
    use instead. An AttributeError, so ``hasattr`` and ``getattr(mx, name, default)`` still
    answer as for any missing attribute."""
