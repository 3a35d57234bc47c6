"""Exception types of recpipe: builtin subclasses carrying where the problem is."""

__all__ = ["RecordFormatError", "DecodeError", "LabelError", "RecordTooLargeError", "RemoteReadError",
           "NotCoveredError", "ON_ERROR", "check_on_error"]

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


def _where(path, offset, record):
    parts = []
    if record is not None:
        parts.append(f"record {record}")
    if offset is not None:
        parts.append(f"byte offset {offset}")
    return f" ({', '.join(parts)})" if parts else ""


class RecordFormatError(ValueError):
    """A RecordIO, ``.idx`` or ``.lst`` file is malformed.

    ``path``, ``offset`` (byte offset in the file) and ``record`` (position of the record in the
    file, or line number for text files) say where; any of them may be ``None`` when unknown.
    """

    def __init__(self, message, *, path=None, offset=None, record=None):
        self.reason = message
        self.path = path
        self.offset = offset
        self.record = record
        prefix = f"{path}: " if path else ""
        super().__init__(f"{prefix}{message}{_where(path, offset, record)}")

    def __reduce__(self):
        return _rebuild_format_error, (self.reason, self.path, self.offset, self.record)


def _rebuild_format_error(message, path, offset, record):
    return RecordFormatError(message, path=path, offset=offset, record=record)


class LabelError(RecordFormatError):
    """A record has no label under the loader's ``label_rule`` (e.g. an imglist without its
    id). The record itself is sound: it goes through ``on_error`` but is never quarantined."""

    def __reduce__(self):
        return _rebuild_label_error, (self.reason, self.path, self.offset, self.record)


def _rebuild_label_error(message, path, offset, record):
    return LabelError(message, path=path, offset=offset, record=record)


class RecordTooLargeError(ValueError):
    """A payload exceeds RecordIO's 2**29 - 1 byte limit; nothing was written."""


class DecodeError(ValueError):
    """An image could not be decoded."""

    def __init__(self, message, *, path=None, record=None):
        self.reason = message
        self.path = path
        self.record = record
        prefix = f"{path}: " if path else ""
        super().__init__(f"{prefix}{message}{_where(path, None, record)}")

    def __reduce__(self):
        return _rebuild_decode_error, (self.reason, self.path, self.record)


def _rebuild_decode_error(message, path, record):
    return DecodeError(message, path=path, record=record)


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
        return _rebuild_remote_error, (self.reason, self.url, self.offset, self.length, self.attempts)


def _rebuild_remote_error(message, url, offset, length, attempts):
    return RemoteReadError(message, url=url, offset=offset, length=length, attempts=attempts)


class NotCoveredError(AttributeError):
    """An MXNet name that recpipe's MXNet namespaces (``import recpipe.mx as mx``, ``import
    recpipe as mx``, ``mx.image``) do not serve: the message says what they cover and what to
    use instead. An AttributeError, so ``hasattr`` and ``getattr(mx, name, default)`` still
    answer as for any missing attribute."""
