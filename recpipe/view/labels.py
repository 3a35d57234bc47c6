"""Labels of a whole file, on demand: the histogram and the by-label (by-identity) order.

Nothing here runs until the page asks for the histogram or the by-label order; then one
background thread (owned by ``LabelIndex``, cancelled and joined by ``close``) reads what it
needs and the page polls its progress.

- InsightFace's layout: the identity records already say which image keys each identity holds
  (``label = [start, end)``), so only those records are read (one per identity, contiguous at
  the end of the file). Identity ``i`` holds ``end - start`` images and the by-identity order
  is computed from the cumulative counts: no array per image.
- Any other file: the first 40 bytes of every record (record head, ``IRHeader``, first packed
  label) are gathered, from 64 MiB windows of a local file mapped in turn (one page touched
  per record) or coalesced range reads of a remote one, into one float32 per record; the
  by-label order is a
  stable argsort of it. That is 8 bytes a record kept (the order and the sorted labels; 12 at
  the peak, 200 MiB for 17M records), and files above ``MAX_SCANNED_RECORDS`` are refused with
  a clear message instead.

The histogram is bounded the way ``recpipe inspect``'s is: the ``TOP`` most common labels, the
number of distinct ones, and how many labels (identities) have 1, 2-3, 4-7... records.
"""

import logging
import mmap
import os
import threading
import time
from typing import Optional

import numpy as np

from ..io.format.framing import MAGIC
from ..io.sources import local_path, open_source

__all__ = ["LabelIndex", "MAX_SCANNED_RECORDS", "TOP", "read_heads"]

log = logging.getLogger(__name__)

TOP = 50
MAX_SCANNED_RECORDS = 64 << 20  # 512 MiB of order + sorted labels
HEAD_BYTES = 40  # record head (8), IRHeader (24), two packed labels (8)
_CHUNK = 1 << 16  # records gathered per step (the cancel flag is checked between steps)
_RANGE_BYTES = 8 << 20  # a remote read covers records within this many bytes
_WINDOW_BYTES = 64 << 20  # a local file is mapped this much at a time


class Cancelled(Exception):
    """The scan was cancelled (the server is closing)."""


def read_heads(url, storage_options, offsets, *, step=None):
    """The first ``HEAD_BYTES`` bytes at each of ``offsets`` (int64, any order) as a
    ``(n, HEAD_BYTES)`` uint8 array (zeros past the end of the file). ``step(done)``, called
    between chunks, may raise to stop."""
    offsets = np.asarray(offsets, dtype=np.int64)
    out = np.zeros((len(offsets), HEAD_BYTES), dtype=np.uint8)
    if not len(offsets):
        return out
    path = local_path(url, storage_options)
    if path is not None:
        _mapped_heads(path, offsets, out, step)
    else:
        _ranged_heads(url, storage_options, offsets, out, step)
    return out


def _mapped_heads(path, offsets, out, step):
    """Gather from windows of at most ``_WINDOW_BYTES`` of the file mapped one at a time (and
    unmapped after): only the pages holding the heads are read, and the mapped pages a scan
    holds (which count in the process's resident size) stay bounded by the window."""
    order = np.argsort(offsets, kind="stable")
    ordered = offsets[order]
    columns = np.arange(HEAD_BYTES, dtype=np.int64)
    page = mmap.ALLOCATIONGRANULARITY
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        first = 0
        while first < len(ordered):
            base = int(ordered[first]) // page * page
            last = int(np.searchsorted(ordered, base + _WINDOW_BYTES - HEAD_BYTES, "right"))
            last = max(last, first + 1)
            end = min(size, int(ordered[last - 1]) + HEAD_BYTES)
            if base < end:
                with mmap.mmap(f.fileno(), end - base, offset=base,
                               access=mmap.ACCESS_READ) as window:
                    data = np.frombuffer(window, dtype=np.uint8)
                    where = (ordered[first:last] - base)[:, None] + columns
                    inside = where < len(data)
                    block = np.zeros(where.shape, dtype=np.uint8)
                    block[inside] = data[where[inside]]
                    del data
                out[order[first:last]] = block
            first = last
            if step is not None:
                step(first)


def _ranged_heads(url, storage_options, offsets, out, step):
    order = np.argsort(offsets, kind="stable")
    ordered = offsets[order]
    with open_source(url, storage_options) as source:
        first = 0
        while first < len(ordered):
            start = int(ordered[first])
            last = int(np.searchsorted(ordered, start + _RANGE_BYTES, side="left"))
            last = max(last, first + 1)
            end = min(int(ordered[last - 1]) + HEAD_BYTES, source.size)
            data = np.frombuffer(bytes(source.read(start, end - start)), dtype=np.uint8)
            where = (ordered[first:last] - start)[:, None] + np.arange(HEAD_BYTES)
            inside = where < len(data)
            block = np.zeros(where.shape, dtype=np.uint8)
            block[inside] = data[where[inside]]
            out[order[first:last]] = block
            first = last
            if step is not None:
                step(first)


def head_labels(heads):
    """``(flag, label0, label1)`` per gathered head: the IRHeader flag, the record's label
    (``label`` for flag 0, else the first packed label) and the second packed label (NaN when
    there is none); NaN labels where the bytes are not a record head with a header."""
    raw = np.ascontiguousarray(heads)
    magic = raw[:, 0:4].copy().view("<u4")[:, 0]
    lrec = raw[:, 4:8].copy().view("<u4")[:, 0]
    length, cflag = lrec & ((1 << 29) - 1), lrec >> 29
    flag = raw[:, 8:12].copy().view("<u4")[:, 0]
    scalar = raw[:, 12:16].copy().view("<f4")[:, 0]
    first = raw[:, 32:36].copy().view("<f4")[:, 0]
    second = raw[:, 36:40].copy().view("<f4")[:, 0]
    framed = (magic == MAGIC) & (cflag <= 1) & (length >= 24)
    label0 = np.where(flag == 0, scalar, np.where(length >= 28, first, np.nan))
    label1 = np.where((flag >= 2) & (length >= 32), second, np.nan)
    label0 = np.where(framed, label0, np.nan).astype(np.float32)
    label1 = np.where(framed, label1, np.nan).astype(np.float32)
    return flag, label0, label1


def _size_buckets(counts):
    """How many labels have 1, 2-3, 4-7, ... records: ``[[low, high, labels], ...]``."""
    if not len(counts):
        return []
    bucket = np.floor(np.log2(np.maximum(counts, 1))).astype(np.int64)
    found = np.bincount(bucket)
    return [[1 << b, (2 << b) - 1, int(n)] for b, n in enumerate(found) if n]


class LabelIndex:
    """The label histogram and by-label order of a ``Dataset``, computed once, on demand, in
    a background thread (``start``); ``state()`` says how far it is."""

    def __init__(self, dataset):
        self.dataset = dataset
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None
        self._cancel = threading.Event()
        self._done = 0
        self._total = 0
        self._started = None
        self._error: Optional[str] = None
        self._result = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self):
        """Start the scan when it has not run yet (a failed scan is not retried)."""
        with self._lock:
            if self._thread is not None or self._cancel.is_set():
                return
            self._started = time.monotonic()
            self._thread = threading.Thread(target=self._run, name="recpipe-view-labels")
            self._thread.start()

    def close(self, timeout=10.0):
        self._cancel.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _step(self, done):
        self._done = done
        if self._cancel.is_set():
            raise Cancelled()

    def _run(self):
        try:
            if self.dataset.layout is not None:
                result = self._identities()
            else:
                result = self._scan()
        except Cancelled:
            return
        except Exception as exc:  # noqa: BLE001 - shown on the page, logged with its traceback
            log.warning("label scan of %s failed", self.dataset.url, exc_info=True)
            self._error = f"{type(exc).__name__}: {exc}"
            return
        self._result = result

    @property
    def ready(self):
        return self._result is not None

    def state(self) -> dict:
        """``state`` ('idle', 'running', 'ready', 'failed'), progress, and when ready the
        histogram (``TOP`` labels, distinct count, size buckets)."""
        if self._result is not None:
            return {"state": "ready", **self._result["summary"]}
        if self._error is not None:
            return {"state": "failed", "error": self._error}
        if self._thread is None:
            return {"state": "idle", "records": self._planned()}
        return {"state": "running", "done": self._done, "total": self._total,
                "seconds": round(time.monotonic() - self._started, 1)}

    def _planned(self):
        layout = self.dataset.layout
        return len(self.dataset) if layout is None else layout.identities

    # -- InsightFace: the identity records -------------------------------------------------

    def _identities(self):
        dataset, layout = self.dataset, self.dataset.layout
        keys = range(layout.first_identity, layout.end_identity)
        positions = np.array([dataset.reader.position_of_key(k) for k in keys], dtype=np.int64) \
            if not dataset.reader.table.identity else np.arange(keys.start, keys.stop)
        self._total = len(positions)
        heads = read_heads(dataset.url, dataset.storage_options,
                           dataset.reader.table.offsets[positions], step=self._step)
        _, starts, ends = head_labels(heads)
        bad = ~(np.isfinite(starts) & np.isfinite(ends) & (ends >= starts))
        if bad.any():
            raise ValueError(f"identity record {int(positions[np.argmax(bad)])} does not hold "
                             "an image key range [start, end): the InsightFace header is wrong")
        starts, ends = starts.astype(np.int64), ends.astype(np.int64)
        counts = ends - starts
        cumulative = np.cumsum(counts)
        top = np.argsort(-counts, kind="stable")[:TOP]
        summary = {"of": "identity", "records": int(cumulative[-1]) if len(counts) else 0,
                   "distinct": len(counts),
                   "histogram": [[int(i), int(counts[i])] for i in sorted(top.tolist())],
                   "truncated": len(counts) > TOP, "sizes": _size_buckets(counts),
                   "unreadable": 0}
        return {"summary": summary, "starts": starts, "counts": counts, "cumulative": cumulative}

    # -- any other file: every record's head ----------------------------------------------

    def _scan(self):
        dataset = self.dataset
        total = len(dataset)
        if total > MAX_SCANNED_RECORDS:
            raise ValueError(f"{total} records: the by-label order of a file this large is not "
                             f"computed (over {MAX_SCANNED_RECORDS}; record order still works)")
        self._total = total
        heads_of = dataset.reader.table.offsets
        labels = np.empty(total, dtype=np.float32)
        for first in range(0, total, 1 << 20):  # bounded temporaries: 40 MiB of heads at most
            part = read_heads(dataset.url, dataset.storage_options,
                              heads_of[first:first + (1 << 20)],
                              step=lambda done, base=first: self._step(base + done))
            labels[first:first + len(part)] = head_labels(part)[1]
        order = np.argsort(labels, kind="stable")  # NaN (unreadable) last
        order = order.astype(np.int32 if total < (1 << 31) else np.int64)
        ordered = labels[order]
        del labels
        known = ordered[np.isfinite(ordered)]
        values, counts = np.unique(known, return_counts=True)
        top = np.argsort(-counts, kind="stable")[:TOP]
        summary = {"of": "label", "records": int(total), "distinct": len(values),
                   "histogram": [[float(values[i]), int(counts[i])] for i in sorted(top.tolist())],
                   "truncated": len(values) > TOP, "sizes": _size_buckets(counts),
                   "unreadable": int(total - len(known))}
        return {"summary": summary, "order": order, "ordered": ordered}

    # -- the by-label order ----------------------------------------------------------------

    def page(self, start, count):
        """``(positions, labels)`` of entries ``start..start+count`` of the by-label order
        (by identity in InsightFace's layout), and the order's length."""
        result = self._result
        if "order" in result:
            order = result["order"]
            stop = min(len(order), start + count)
            return (order[start:stop].astype(np.int64), result["ordered"][start:stop],
                    len(order))
        cumulative, starts = result["cumulative"], result["starts"]
        total = int(cumulative[-1]) if len(cumulative) else 0
        j = np.arange(start, min(total, start + count), dtype=np.int64)
        identity = np.searchsorted(cumulative, j, side="right")
        before = cumulative[identity] - result["counts"][identity]
        keys = starts[identity] + (j - before)
        positions = np.array([self.dataset.position_of_key(int(k)) for k in keys],
                             dtype=np.int64)
        return positions, identity.astype(np.float64), total

    def first_of(self, label):
        """Where ``label`` (an identity in InsightFace's layout) starts in the by-label order;
        KeyError when no record has it."""
        result = self._result
        if "order" in result:
            ordered = result["ordered"]
            at = int(np.searchsorted(ordered, np.float32(label), side="left"))
            if at >= len(ordered) or ordered[at] != np.float32(label):
                raise KeyError(f"no record has label {label:g}")
            return at
        identity = int(label)
        counts = result["counts"]
        if identity != label or not 0 <= identity < len(counts) or counts[identity] == 0:
            raise KeyError(f"no identity {label:g} (identities 0..{len(counts) - 1})")
        return int(result["cumulative"][identity] - counts[identity])
