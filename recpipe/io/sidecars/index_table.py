"""The index of a ``.rec`` as arrays: parsed at C speed, looked up without Python objects per
record, shared between processes through a memory-mapped cache (``index_cache``).

``IndexTable`` holds ``offsets`` (int64) and the keys: none at all when they are ``0..N-1`` in
order (the common case: im2rec, recpipe pack, InsightFace), an int64 array, or a list of strings
(``key_type=str``) or of integers outside int64 (never clamped). Record ends (the next indexed offset) come from the sorted offsets, which are
the offsets themselves when the index is in file order.
"""

import logging
import operator
import os
import warnings
from collections.abc import Sequence

import numpy as np


__all__ = ["Column", "IndexTable", "parse_index_chunks", "local_chunks", "memory_chunks", "CHUNK_BYTES"]

log = logging.getLogger(__name__)

CHUNK_BYTES = 32 << 20
_INT64 = np.iinfo(np.int64)


class Column(Sequence):
    """A read-only, list-like view of an index column (``range``, int64 array or list of
    strings) that creates no Python object per record until items are asked for. Compares equal
    to any sequence with the same items; ``array`` gives it as a numpy array."""

    # unhashable: it compares equal to any sequence with the same items (a list among them)
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, values):
        self._values = values

    def __len__(self):
        return len(self._values)

    def __getitem__(self, index):
        value = self._values[index]
        if isinstance(index, slice):
            return Column(value)
        return int(value) if isinstance(value, np.integer) else value

    def __iter__(self):
        values = self._values
        if not isinstance(values, np.ndarray):
            yield from values
            return
        for start in range(0, len(values), 1 << 16):
            yield from values[start:start + (1 << 16)].tolist()

    @property
    def array(self):
        """The column as a numpy array (no copy for int64 columns)."""
        if isinstance(self._values, range):
            return np.arange(self._values.start, self._values.stop, dtype=np.int64)
        return np.asarray(self._values)

    def __eq__(self, other):
        if isinstance(other, (str, bytes)) or not isinstance(other, (Sequence, np.ndarray)):
            return NotImplemented
        if len(self) != len(other):
            return False
        if isinstance(self._values, list) or (isinstance(other, Sequence) and len(other) and
                                              isinstance(other[0], str)):
            return all(a == b for a, b in zip(self, other))
        return bool(np.array_equal(self.array, np.asarray(other)))

    def __repr__(self):
        head = list(self[:8])
        return f"Column({head}{' ...' if len(self) > 8 else ''}, length {len(self)})"


class IndexTable:
    """Offsets and keys of an index. ``keys`` is None for keys ``0..N-1`` in order."""

    def __init__(self, offsets, keys=None):
        self.offsets = np.asarray(offsets, dtype=np.int64)
        if keys is not None and not isinstance(keys, list):
            keys = np.asarray(keys, dtype=np.int64)
            if _is_identity(keys):
                keys = None
        if keys is not None and len(keys) != len(self.offsets):
            raise ValueError(f"{len(keys)} keys for {len(self.offsets)} offsets")
        self._keys = keys
        self._sorted = None
        self._lookup = None

    @classmethod
    def from_lists(cls, keys, offsets):
        """From ``parse_index``'s lists (string or int keys)."""
        if keys and not isinstance(keys[0], (int, np.integer)):
            return cls(np.array(offsets, dtype=np.int64), list(keys))
        if keys and not _INT64.min <= min(keys) <= max(keys) <= _INT64.max:
            return cls(np.array(offsets, dtype=np.int64), list(keys))  # no int64 clamping
        return cls(np.array(offsets, dtype=np.int64), np.array(keys, dtype=np.int64))

    def __len__(self):
        return len(self.offsets)

    @property
    def identity(self):
        """True when the keys are the positions ``0..N-1``."""
        return self._keys is None

    @property
    def keys(self):
        """The keys in index order: ``range(N)``, an int64 array or a list of strings."""
        return range(len(self.offsets)) if self._keys is None else self._keys

    @property
    def has_string_keys(self):
        return isinstance(self._keys, list)

    @property
    def in_file_order(self):
        """True when the offsets increase strictly (so a record ends at the next one)."""
        return self.sorted_offsets is self.offsets

    @property
    def sorted_offsets(self):
        """The distinct offsets in increasing order (the offsets themselves when in order)."""
        if self._sorted is None:
            offsets = self.offsets
            if len(offsets) < 2 or bool(np.all(offsets[1:] > offsets[:-1])):
                self._sorted = offsets
            else:
                self._sorted = np.unique(offsets)
        return self._sorted

    def span(self, position, size):
        """``(start, end)``: record ``position`` lies before the next indexed offset (or ``size``)."""
        start = int(self.offsets[position])
        ordered = self.sorted_offsets
        if ordered is self.offsets:
            following = position + 1
        else:
            following = int(np.searchsorted(ordered, start, side="right"))
        end = int(ordered[following]) if following < len(ordered) else size
        return start, end

    def spans(self, positions, size):
        """``(starts, ends)`` int64 arrays of the records at ``positions`` (``span`` of each,
        vectorised)."""
        positions = np.asarray(positions, dtype=np.int64)
        starts = np.asarray(self.offsets, dtype=np.int64)[positions]
        ordered = self.sorted_offsets
        if ordered is self.offsets:
            following = positions + 1
        else:
            following = np.searchsorted(ordered, starts, side="right")
        inside = following < len(ordered)
        ends = np.full(len(positions), size, dtype=np.int64)
        ends[inside] = np.asarray(ordered, dtype=np.int64)[following[inside]]
        return starts, ends

    def ends(self, size):
        """The end of every record (int64 array): the next indexed offset, or ``size``."""
        ordered = self.sorted_offsets
        following = np.searchsorted(ordered, self.offsets, side="right")
        padded = np.append(ordered, np.int64(size))
        return padded[following]

    def position_of_key(self, key):
        """The position of ``key`` (the last one when repeated); KeyError when absent."""
        if self._keys is None:
            try:
                position = operator.index(key)
            except TypeError:
                raise KeyError(key) from None
            if 0 <= position < len(self.offsets):
                return position
            raise KeyError(key)
        if isinstance(self._keys, list):
            if self._lookup is None:
                self._lookup = {k: i for i, k in enumerate(self._keys)}
            return self._lookup[key]
        return self._array_position(key)

    def _array_position(self, key):
        try:
            key = operator.index(key)
        except TypeError:
            raise KeyError(key) from None
        if self._lookup is None:
            order = np.argsort(self._keys, kind="stable")
            self._lookup = (self._keys[order], order)
        ordered, order = self._lookup
        at = int(np.searchsorted(ordered, key, side="right")) - 1
        if at < 0 or int(ordered[at]) != key:
            raise KeyError(key)
        return int(order[at])


def _is_identity(keys):
    return len(keys) == 0 or (int(keys[0]) == 0 and bool(np.all(np.diff(keys) == 1)))


def _chunk_pairs(chunk):
    """The int64 ``(keys, offsets)`` of whole ``key<TAB>offset`` lines, or None when the chunk
    is not exactly that (then the caller parses it line by line for the precise error)."""
    lines = chunk.count(b"\n") + (0 if chunk.endswith(b"\n") else 1)
    if lines == 0 or chunk.count(b"\t") != lines or b" " in chunk:
        return None
    raw = np.frombuffer(chunk, dtype=np.uint8)
    separators = raw[(raw == 9) | (raw == 10)]  # must alternate tab, newline: one tab a line
    if not (np.all(separators[0::2] == 9) and np.all(separators[1::2] == 10)):
        return None
    try:
        with warnings.catch_warnings():  # older numpy warns instead of raising on junk
            warnings.simplefilter("error", DeprecationWarning)
            values = np.fromstring(chunk, dtype=np.int64, sep=" ")
    except (ValueError, DeprecationWarning):
        return None
    if values.size != 2 * lines:
        return None
    if bool(np.any((values == _INT64.max) | (values == _INT64.min))):
        return None  # numpy clamps numbers outside int64 to these: the text parse decides
    return values[0::2].copy(), values[1::2].copy()


def parse_index_chunks(chunks, *, path=None):
    """An ``IndexTable`` from ``.idx`` bytes given as chunks that end at line ends, parsed by
    numpy (about 20x faster than a Python loop). Returns None when a chunk is not plain
    ``int<TAB>int`` lines (blank lines, spaces, string keys, junk): parse it as text then, for
    the precise error. Keys are kept only once they stop being ``0..N-1``."""
    offsets, key_parts, count = [], None, 0
    for chunk in chunks:
        if not len(chunk):
            continue
        pairs = _chunk_pairs(bytes(chunk))
        if pairs is None:
            return None
        chunk_keys, chunk_offsets = pairs
        if int(chunk_offsets.min()) < 0:
            return None  # the text parse names the line
        offsets.append(chunk_offsets)
        if key_parts is not None:
            key_parts.append(chunk_keys)
        elif not (int(chunk_keys[0]) == count and bool(np.all(np.diff(chunk_keys) == 1))):
            key_parts = [np.arange(count, dtype=np.int64), chunk_keys]
        count += len(chunk_keys)
    all_offsets = np.concatenate(offsets) if offsets else np.zeros(0, np.int64)
    del offsets
    if key_parts is None:
        return IndexTable(all_offsets)
    return IndexTable(all_offsets, np.concatenate(key_parts))


def local_chunks(path, chunk_bytes=CHUNK_BYTES):
    """The bytes of a local file (a path, or a file open in binary mode) in chunks cut at line
    ends."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        yield from _file_chunks(path, chunk_bytes)
        return
    with open(path, "rb") as f:
        yield from _file_chunks(f, chunk_bytes)


def _file_chunks(f, chunk_bytes):
    size = os.fstat(f.fileno()).st_size
    carry = b""
    while True:
        block = f.read(max(1, min(chunk_bytes, size - f.tell())))  # no oversized buffer
        if not block:
            if carry:
                yield carry
            return
        block = carry + block
        cut = block.rfind(b"\n") + 1
        if cut == 0:
            carry = block
            continue
        yield block[:cut]
        carry = block[cut:]


def memory_chunks(data, chunk_bytes=CHUNK_BYTES):
    """``data`` (bytes) in chunks cut at line ends."""
    view, start = memoryview(data), 0
    while start < len(data):
        stop = min(len(data), start + chunk_bytes)
        if stop < len(data):
            cut = data.rfind(b"\n", start, stop)
            stop = cut + 1 if cut >= start else data.find(b"\n", stop) + 1 or len(data)
        yield view[start:stop]
        start = stop
