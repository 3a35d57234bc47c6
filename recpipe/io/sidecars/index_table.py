"""The index of a ``.rec`` as arrays, looked up without Python objects per record (parsed by
``index.parse_idx``, shared between processes through the memory-mapped ``index_cache``).

``IndexTable`` holds ``offsets`` (int64) and the keys: none at all when they are ``0..N-1`` in
order (the common case: im2rec, recpipe pack, InsightFace), an int64 array, or a list of strings
(``key_type=str``) or of integers outside int64 (never clamped). Record ends (the next indexed
offset) come from the sorted offsets, which are the offsets themselves when the index is in file
order.
"""

import logging
import operator
from collections.abc import Sequence

import numpy as np

from ...errors import RecordFormatError

__all__ = ["Column", "IndexTable"]

log = logging.getLogger(__name__)

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

    def check_offsets(self, size, *, index_url=None, rec_url=None):
        """Raise RecordFormatError naming the ``.idx`` line of the first offset that is past the
        end of a ``.rec`` of ``size`` bytes or not 4-byte aligned."""
        offsets = self.offsets
        for first in range(0, len(offsets), 1 << 20):  # in slices: small temporaries
            part = offsets[first:first + (1 << 20)]
            bad = np.flatnonzero((part >= size) | ((part & 3) != 0))
            if len(bad):
                i = first + int(bad[0])
                offset = int(offsets[i])
                why = "past the end of the file" if offset >= size else "not 4-byte aligned"
                raise RecordFormatError(
                    f"index {index_url} line {i + 1}: offset {offset} is {why} "
                    f"(file size {size})", path=rec_url, offset=offset, record=i)

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
        """``(start, end)``: record ``position`` lies before the next indexed offset (or
        ``size``)."""
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
