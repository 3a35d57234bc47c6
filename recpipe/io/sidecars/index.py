"""The text files beside a ``.rec``: ``.idx`` (key, byte offset) and im2rec's ``.lst``.

``.idx`` lines are ``key<TAB>offset``; MXNet's Python reader takes ``key_type(column 0)`` and keeps
file order in ``keys`` (the last duplicate wins in lookups). ``.lst`` lines are
``index<TAB>label...<TAB>path`` with labels printed ``%f``; im2rec skips lines with fewer than
three fields or that do not parse. See ``shared/docs/recordio-compat.md`` section 2.

Remote ``.idx`` and ``.lst`` files are read like records are (``recpipe.io.sources.open_source``):
with the same retries, timeouts and errors.
"""

import functools
import logging
import math
import os
import re
from typing import List, NamedTuple, Optional, Tuple

import numpy as np
from fsspec.implementations.local import LocalFileSystem

from ..._optional import native
from ...errors import RecordFormatError, RemoteReadError
from ..sources import exists, open_regular, open_source, url_to_fs
from ..format.scan import iter_records
from .index_cache import cached_arrays
from .index_table import IndexTable
from .names import index_url_for

__all__ = [
    "ListEntry",
    "read_index",
    "parse_index",
    "format_index_line",
    "index_url_for",
    "read_list",
    "read_index_bytes",
    "read_text",
    "decode_text",
    "resolve_index_url",
    "parse_list",
    "exact_label_text",
    "format_list_line",
    "index_table",
    "parse_idx",
]

log = logging.getLogger(__name__)

CHUNK_BYTES = 32 << 20
_INT64 = np.iinfo(np.int64)


def read_index_bytes(url, storage_options=None):
    """The whole file: local files directly (``sources.open_regular``: a FIFO or a device is
    refused, not waited on or read forever), anything else through ``open_source`` (one range
    request through the retry layer of record reads: transient faults are retried, a persistent
    one raises ``RemoteReadError`` naming the URL)."""
    fs, path = url_to_fs(url, storage_options)
    if isinstance(fs, LocalFileSystem):
        try:
            with os.fdopen(open_regular(path, str(url)), "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise FileNotFoundError(f"no such file: {url}") from None
    with open_source(url, storage_options) as source:  # FileNotFoundError names the URL
        data = bytes(source.read(0, source.size))
    if len(data) != source.size:
        raise RemoteReadError(f"read {len(data)} of {source.size} bytes", url=str(url), offset=0,
                              length=source.size)
    return data


def decode_text(data, url):
    """UTF-8 ``data`` of the file at ``url`` as text; RecordFormatError at the first bad byte."""
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        raise RecordFormatError(f"not a text file ({e.reason})", path=str(url),
                                offset=e.start) from e


def read_text(url, storage_options=None):
    """A whole text file (``.idx``, ``.lst``, imglist) at any URL, read through the retry layer."""
    return decode_text(read_index_bytes(url, storage_options), url)


def resolve_index_url(rec_url, index_url=None, storage_options=None):
    """The ``.idx`` of ``rec_url`` to use, or None: ``index_url`` when given, none when it is
    ``False`` or ``""``, else the conventional one beside the ``.rec`` when it exists."""
    if index_url is None:
        candidate = index_url_for(rec_url)
        if candidate != str(rec_url) and exists(candidate, storage_options):
            return candidate
        return None
    return str(index_url) if index_url else None


def parse_index(text, *, path=None, key_type=int):
    """Parse ``.idx`` text into ``(keys, offsets)`` lists in file order. Blank lines are skipped."""
    keys = []
    offsets = []
    for lineno, line in enumerate(text.splitlines(), 1):
        fields = line.strip().split("\t")  # MXNet splits on tabs (string keys may hold spaces)
        if len(fields) != 2:
            fields = line.split()  # dmlc reads any whitespace
        if not fields:
            continue
        if len(fields) != 2:
            raise RecordFormatError(
                f"index line {lineno} has {len(fields)} fields, expected 'key<TAB>offset': "
                f"{line!r}", path=path)
        try:
            key = key_type(fields[0])
        except ValueError:
            raise RecordFormatError(
                f"index line {lineno}: key {fields[0]!r} is not {key_type.__name__} "
                f"(pass key_type=str for string keys)", path=path) from None
        try:
            offset = int(fields[1])
        except ValueError:
            raise RecordFormatError(
                f"index line {lineno}: offset {fields[1]!r} is not an integer", path=path) from None
        if offset < 0:
            raise RecordFormatError(f"index line {lineno}: negative offset {offset}", path=path)
        if offset >= 1 << 63:
            raise RecordFormatError(f"index line {lineno}: offset {offset} is too large",
                                    path=path)
        keys.append(key)
        offsets.append(offset)
    return keys, offsets


def read_index(url: str, storage_options: Optional[dict] = None, *,
               key_type: type = int) -> Tuple[list, list]:
    """Read a ``.idx`` file; return ``(keys, offsets)``."""
    return parse_index(read_text(url, storage_options), path=str(url), key_type=key_type)


def format_index_line(key, offset):
    """One ``.idx`` line, as ``MXIndexedRecordIO.write_idx`` writes it (``str(key)``)."""
    key = str(key)
    if not key or "\t" in key or "\n" in key or "\r" in key or key != key.strip():
        raise ValueError(f"index key {key!r} cannot be written to a .idx line "
                         "(empty, or has tabs, newlines or surrounding spaces)")
    return f"{key}\t{offset}\n"


class ListEntry(NamedTuple):
    """One ``.lst`` line: the record index, its labels and the image path relative to the root."""

    # the .lst column's name, kept for the public API; it shadows tuple.index on purpose
    index: int  # type: ignore[assignment]
    labels: Tuple[float, ...]
    path: str


def _text_lines(text):
    """Lines as im2rec's ``open(path).readline()`` sees them: universal newlines only
    (``\\n``, ``\\r``, ``\\r\\n``), unlike ``str.splitlines`` which also breaks at
    ``\\f``, ``\\x1c``, U+2028 and others that may appear in file names."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


_LIST_INDEX = re.compile(r"[+-]?[0-9]+", re.ASCII)
_LIST_LABEL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_NON_FINITE = re.compile(r"[+-]?(?:nan|inf|infinity)", re.ASCII | re.IGNORECASE)


def _list_index(text):
    if not _LIST_INDEX.fullmatch(text):
        raise ValueError(f"index {text!r} is not a decimal integer")
    return int(text)


def _list_label(text, allow_nonfinite):
    """A label written as a plain decimal number (not ``1_0``, other scripts' digits, or
    numbers that overflow to infinity); ``nan``/``inf`` only with ``allow_nonfinite``."""
    if _LIST_LABEL.fullmatch(text):
        value = float(text)
        if math.isfinite(value) or allow_nonfinite:
            return value
        raise ValueError(f"label {text!r} overflows a float (allow_nonfinite=True accepts it)")
    if _NON_FINITE.fullmatch(text):
        if allow_nonfinite:
            return float(text)
        raise ValueError(f"label {text!r} is not finite (allow_nonfinite=True accepts it)")
    raise ValueError(f"label {text!r} is not a decimal number")


def parse_list(text, *, path=None, allow_nonfinite=False):
    """Parse ``.lst`` text with im2rec's rules; return ``(entries, skipped_line_numbers)``.

    A line needs at least three tab-separated fields (index, one or more labels, path); lines that
    do not parse are skipped and their numbers returned, as im2rec skips them. Indexes and labels
    must be plain ASCII decimal numbers (Python's ``float`` would also take ``1_0``, other
    scripts' digits and ``1e309``); labels must be finite unless ``allow_nonfinite``.
    """
    entries = []
    skipped = []
    for lineno, line in enumerate(_text_lines(text), 1):
        fields = [field.strip() for field in line.strip().split("\t")]
        if len(fields) < 3:
            if line.strip():
                log.warning("%s: line %d has fewer than 3 tab-separated fields, skipped: %r",
                            path, lineno, line)
                skipped.append(lineno)
            continue
        try:
            entry = ListEntry(_list_index(fields[0]),
                              tuple(_list_label(x, allow_nonfinite) for x in fields[1:-1]),
                              fields[-1])
        except ValueError as e:
            log.warning("%s: line %d does not parse (%s), skipped: %r", path, lineno, e, line)
            skipped.append(lineno)
            continue
        entries.append(entry)
    return entries, skipped


def read_list(url: str, storage_options: Optional[dict] = None, *,
              allow_nonfinite: bool = False) -> Tuple[List[ListEntry], List[int]]:
    """Read a ``.lst`` file; return ``(entries, skipped_line_numbers)`` (see ``parse_list``)."""
    return parse_list(read_text(url, storage_options), path=str(url),
                      allow_nonfinite=allow_nonfinite)


def format_list_line(index, labels, path, *, exact=False):
    """One ``.lst`` line exactly as im2rec writes it (``%f``: 6 decimals). ``exact=True``
    writes each label as ``exact_label_text`` does, so that it reads back as the same float32
    (im2rec's text where that is already exact). A path that would not read back as itself (a
    tab, newline or carriage return in it, or surrounding spaces, which readers strip) raises
    ValueError naming it, as writing it would shift the columns."""
    if "\t" in path or "\n" in path or "\r" in path or path != path.strip():
        raise ValueError(f"file name {path!r} cannot be written to a .lst line (it has a tab, "
                         "newline or carriage return, or surrounding spaces): rename it")
    text = exact_label_text if exact else _im2rec_label_text
    return "%d\t" % index + "".join(text(label) + "\t" for label in labels) + path + "\n"


def _im2rec_label_text(label):
    return "%f" % label


def exact_label_text(label):
    """A label as ``.lst`` text that reads back (``float``, C's ``atof``) as the same float32:
    im2rec's ``%f`` when that is exact (``3.000000``, ``0.500000``), else the shortest decimal
    that identifies the float32 (``0.70710677``, ``1e-07``), where ``%f`` would lose it
    (``0.707107``, ``0.000000``)."""
    value = np.float32(label)
    fixed = "%f" % value
    if not np.isfinite(value) or (abs(value) < 1e16 and np.float32(float(fixed)) == value):
        return fixed
    return np.format_float_scientific(value, unique=True, trim="-") if \
        abs(value) < 1e-4 or abs(value) >= 1e16 else \
        np.format_float_positional(value, unique=True, trim="-")


# ------------------------------------------------------------------------------------------------
# the one .idx parser


def parse_idx(data, *, path=None, key_type=int) -> IndexTable:
    """The ``IndexTable`` of a whole ``.idx`` file's bytes ``data``: integer keys parsed at C
    speed; what that parse does not take (string keys, blank lines, spaces, junk) is parsed as
    text, line by line, which names the first bad line (``parse_index``)."""
    offsets, keys = _parse_arrays(data, path, key_type)
    return IndexTable(offsets, keys)


def index_table(rec_source, idx_source=None, *, url=None, key_type=int, cache=True) -> IndexTable:
    """The index of the ``.rec`` open as ``rec_source`` (a ``Source``, or None: nothing to check
    the offsets against): the ``.idx`` open as ``idx_source`` (at ``url``) parsed as
    ``parse_idx`` does, through the memory-mapped cache (``index_cache``) for a local ``.idx``
    with integer keys; without an ``.idx``, the records found by scanning the ``.rec`` (keys
    ``0..N-1``). An offset past the end of the ``.rec`` or not 4-byte aligned raises
    RecordFormatError naming its ``.idx`` line."""
    local = getattr(idx_source, "descriptor", None) is not None
    if idx_source is not None and not (local and cache and key_type is int):
        offsets, keys = _source_arrays(idx_source, url, key_type)
    elif idx_source is not None:
        offsets, keys = cached_arrays(idx_source, rec_source,
                                      functools.partial(_source_arrays, url=url, key_type=int))
    else:
        offsets = np.fromiter((pos for pos, _ in iter_records(rec_source, keep_payload=False)),
                              dtype=np.int64)
        keys = None
    table = IndexTable(offsets, keys)
    if rec_source is not None and idx_source is not None:
        table.check_offsets(rec_source.size, index_url=url, rec_url=rec_source.url)
    return table


def _source_arrays(source, url, key_type):
    """``(offsets, keys)`` of the ``.idx`` open as ``source``. Integer keys go to the C parse: a
    local file in chunks, twice over (its lines counted, then parsed into arrays of that
    length: no copy of the whole text is held), a remote one read whole (one request, as
    before the parse moved to C). Any other text is parsed line by line (``parse_index``)."""
    data = None
    if key_type is int:
        if getattr(source, "descriptor", None) is not None:
            parsed = _fast_chunks(source)
        else:
            data = _whole(source, url)
            parsed = _fast_arrays(data)
        if parsed is not None:
            return parsed
    return _text_arrays(_whole(source, url) if data is None else data, url, key_type)


def _whole(source, url):
    """All of ``source``'s bytes; RemoteReadError when fewer come back."""
    data = bytes(source.read(0, source.size))
    if len(data) != source.size:
        raise RemoteReadError(f"read {len(data)} of {source.size} bytes", url=str(url),
                              offset=0, length=source.size)
    return data


def _parse_arrays(data, path, key_type):
    """``(offsets, keys)`` of ``.idx`` bytes: ``keys`` None for ``0..N-1``, else an int64 array,
    or a list (string keys, integers outside int64: never clamped)."""
    parsed = _fast_arrays(data) if key_type is int else None
    return parsed if parsed is not None else _text_arrays(data, path, key_type)


def _fast_arrays(data):
    """``(offsets, keys)`` of plain ``key<TAB>offset`` lines, parsed in C
    (``recpipe._kernels.parse_idx``); None when ``data`` is not exactly such lines."""
    kernels = native("_kernels")
    count = kernels.idx_lines(data)
    keys, offsets = np.empty(count, np.int64), np.empty(count, np.int64)
    outcome = kernels.parse_idx(data, keys, offsets)
    if outcome < 0:
        return None
    return offsets, (None if outcome == 1 else keys)


def _fast_chunks(source):
    """``_fast_arrays`` of a local file read in chunks cut at line ends: one pass counts the
    lines, the next parses each chunk into its part of the arrays. None when the text is not
    plain integer lines (or changed between the passes: the caller's text parse decides)."""
    kernels = native("_kernels")
    buffer = bytearray(min(CHUNK_BYTES, source.size + 1))  # reused: no copy a chunk
    lines = [kernels.idx_lines(chunk) for chunk in _local_chunks(source, buffer)]
    count = sum(lines)
    keys, offsets = np.empty(count, np.int64), np.empty(count, np.int64)
    first, identity = 0, True
    for chunk, chunk_lines in zip(_local_chunks(source, buffer), lines):
        part = slice(first, first + chunk_lines)
        try:
            outcome = kernels.parse_idx(chunk, keys[part], offsets[part], first)
        except ValueError:  # another number of lines than the first pass counted: changed
            return None
        if outcome < 0:
            return None
        identity = identity and outcome == 1
        first += chunk_lines
    if first != count:
        return None
    return offsets, (None if identity else keys)


def _local_chunks(source, buffer):
    """The bytes of the local file open as ``source`` in chunks cut at line ends: views of
    ``buffer``, read into it in place (each view is valid until the next is asked for). A line
    longer than the buffer is one chunk of its own (the C parse refuses it: the text parse
    then names it)."""
    fd, size, view = source.descriptor(), source.size, memoryview(buffer)
    offset = carry = 0
    while offset < size:
        if carry == len(buffer):  # one line fills the buffer
            yield view[:carry]
            carry = 0
        got = os.preadv(fd, [view[carry:min(len(buffer), carry + size - offset)]], offset)
        if got <= 0:
            break
        offset += got
        filled = carry + got
        cut = buffer.rfind(b"\n", 0, filled) + 1
        if cut == 0:
            carry = filled
            continue
        yield view[:cut]
        tail = bytes(view[cut:filled])
        view[:len(tail)] = tail
        carry = len(tail)
    if carry:
        yield view[:carry]


def _text_arrays(data, path, key_type):
    """``_parse_arrays`` of the text parse, which names the first bad line."""
    keys, offsets = parse_index(decode_text(data, path), path=path, key_type=key_type)
    offsets = np.array(offsets, dtype=np.int64)
    if keys and not isinstance(keys[0], (int, np.integer)):
        return offsets, list(keys)
    if keys and not _INT64.min <= min(keys) <= max(keys) <= _INT64.max:
        return offsets, list(keys)
    return offsets, np.array(keys, dtype=np.int64)
