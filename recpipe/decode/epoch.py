"""The epoch side of ``ImageLoader``: issue batches ahead, hand them out in order as ``Batch``.

An ``Epoch`` is one pass over the loader's batches, run in the consumer thread: it allocates
each batch (``filling.PendingBatch``), submits its runs of samples to the ``WorkerPool``
``prefetch`` batches ahead of the consumer, waits for the next one (with a deadline that moves
while samples are still being decoded) and hands it out as a ``Batch``, raising a worker's error
with its original traceback. Everything it uses comes in ``EpochParts``, shared by the epochs of
one loader; the loader's only say while an epoch runs is ``parts.prefetch`` (the autotuner moves
it) and the ``next_epoch`` callback that starts the following epoch near this one's end.
"""

import os
import time
from dataclasses import dataclass
from typing import Callable, Dict, Optional

import numpy as np

from ..io.health.explain import explain_stop
from ..io.reader import RecordReader
from .buffers import BufferPool
from .filling import PendingBatch
from .pool import WorkerPool
from .provenance import ProvenanceLog
from .stats import PipelineStats

__all__ = ["Batch", "Epoch", "EpochParts", "check_process"]

_WAIT_SLICE = 0.1
# samples per worker task: fewer queue round trips than one per sample, while a batch still
# spreads over every thread (128 samples -> 16 tasks)
_RUN_SAMPLES = 8
# runs the native decoder takes whole: as long as a batch still spreads over every thread, up to
# this many samples (the Python around each run is paid once per run, not per sample)
_NATIVE_RUN_SAMPLES = 64


class Batch(tuple):
    """A delivered batch: unpacks as ``images, labels``; ``pad`` says how many samples at its
    end are filler (``last_batch='pad'``; a filler skipped under ``on_error='skip'`` is not
    in the batch, nor in ``pad``, so ``images[:len(images) - pad]`` are the real samples),
    ``positions`` the record position of each sample."""

    def __new__(cls, images, labels, pad=0, positions=None):
        batch = super().__new__(cls, (images, labels))
        batch.pad = pad
        batch.positions = positions
        return batch

    @property
    def images(self):
        """The image batch (``batch[0]``)."""
        return self[0]

    @property
    def labels(self):
        """The label batch (``batch[1]``)."""
        return self[1]


@dataclass
class EpochParts:
    """What every epoch of a loader uses: its decode workers, batch memory, counters and
    observers, the file, which records the samples are (None: sample i is record i), the
    block-shuffle runs of a remote file, the shape of a batch, the wait deadline, the process
    that owns the threads, and the prefetch depth (batches issued ahead; the loader moves it)."""

    pool: WorkerPool
    buffers: BufferPool
    stats: PipelineStats
    observers: list
    reader: RecordReader
    records: Optional[np.ndarray]
    runs: Optional[list]
    sample_shape: tuple
    dtype: np.dtype
    label_width: int
    timeout: float
    prefetch: int
    pid: int
    native: bool = False  # runs go to recpipe._batch: spans are looked up once per batch
    provenance: Optional[ProvenanceLog] = None  # writes a line per batch handed out

    def record_positions(self, samples):
        samples = np.asarray(samples, dtype=np.int64)
        return samples if self.records is None else self.records[samples]


def check_process(pid):
    """RuntimeError unless this is process ``pid`` (the one whose decode threads exist)."""
    if os.getpid() != pid:
        raise RuntimeError(
            f"this ImageLoader was created in process {pid}; its decode threads do not "
            f"exist in this forked process {os.getpid()}: create the loader in the process "
            "that iterates it (e.g. in each DataLoader worker), or use recpipe.torch")


def _fillers(batch, slots):
    """How many of ``slots`` are filler slots of ``batch`` (its last ``pad``)."""
    first_filler = len(batch.positions) - batch.pad
    return sum(1 for slot in slots if slot >= first_filler)


class Epoch:
    """The consumer side of one epoch: issues batches ahead and hands them out in order.

    ``batches`` are the epoch's batches (``order.split_batches``), ``start`` the first one to
    hand out (a resumed epoch), ``stop`` the one before which it ends (None: the epoch's end;
    ``ImageLoader.batch`` hands out one); ``next_epoch(batches)``, when given, is called once the
    prefetch window reaches past the end, to start decoding that many batches of the next
    epoch (``lookahead``), and for a remote file with 0 as soon as this epoch's reads are all
    sent, to announce the next epoch's reads."""

    def __init__(self, parts: EpochParts, batches, epoch: int, start: int = 0,
                 next_epoch: Optional[Callable[[int], None]] = None,
                 stop: Optional[int] = None):
        self.parts = parts
        self.batches = batches
        self.stop = len(batches) if stop is None else min(stop, len(batches))
        self.epoch = epoch
        self.next_epoch = next_epoch
        self.issued: Dict[int, PendingBatch] = {}
        # why the epoch was stopped before its end (``cancel(reason)``): every later next()
        # raises RuntimeError with it, so that a stopped epoch never looks complete
        self.stopped: Optional[str] = None
        self.next_index = start
        self.issue_index = start
        self._next_announced = False
        # remote files: fetch the epoch's records ahead, coalesced (per run with a block shuffle)
        reader = parts.reader
        self.reads = reader.prefetch(()) if not reader.remote else \
            reader.prefetch(parts.record_positions(batches.flat(start, self.stop)),
                            runs=parts.runs if parts.records is None else None)

    def __iter__(self):
        return self

    def __len__(self):
        return len(self.batches)

    # -- issuing ------------------------------------------------------------------------------

    def _allocate(self, plan):
        parts, size = self.parts, len(plan.positions)
        images = parts.buffers.array((size,) + parts.sample_shape, parts.dtype)
        label_shape = (size,) if parts.label_width == 1 else (size, parts.label_width)
        records = parts.record_positions(plan.positions)
        # C reads a local file's records by these spans; a remote file's come from windows of
        # its prefetched requests, taken from the plan here (in reading order, while the decode
        # threads run C) and waited for on the decode thread
        spans = windows = None
        if parts.native:
            spans = parts.reader.spans(records)
            if parts.reader.remote:
                windows = parts.reader.claim_windows(records, spans)
        return PendingBatch(plan, images, np.zeros(label_shape, dtype=np.float32), records,
                            spans, windows)

    def _run_samples(self, size):
        """Samples per worker task: 8, or for the native decoder as many as still give every
        thread a part of the batch (up to ``_NATIVE_RUN_SAMPLES``)."""
        if not self.parts.native:
            return _RUN_SAMPLES
        return max(_RUN_SAMPLES, min(_NATIVE_RUN_SAMPLES, -(-size // self.parts.pool.threads)))

    def _issue_ahead(self):
        wanted = self.next_index + self.parts.prefetch
        self.issue_until(wanted)
        if wanted > len(self.batches) and self.next_epoch is not None:
            self.next_epoch(wanted - len(self.batches))

    def _announce_next(self):
        """A remote file: once every request of this epoch's plan is sent (none waits for the
        budget), have the next epoch's reads announced (``next_epoch(0)``: its order is known
        from the seed), so that its first windows arrive while this epoch ends instead of
        after. Its requests queue behind this epoch's: the prefetch budget holds for both."""
        if self._next_announced or self.next_epoch is None or not self.parts.reader.remote:
            return
        if self.reads.all_sent:
            self._next_announced = True
            self.next_epoch(0)

    def issue_until(self, count):
        """Submit the samples of every batch before index ``count``."""
        limit = min(self.stop, count)
        while self.issue_index < limit:
            batch = self._allocate(self.batches[self.issue_index])
            self.issued[self.issue_index] = batch
            size = len(batch.positions)
            run = self._run_samples(size)
            for start in range(0, size, run):  # runs of samples, not one item each
                self.parts.pool.submit((batch, start, min(size, start + run), self.epoch))
            self.issue_index += 1

    # -- handing out --------------------------------------------------------------------------

    def _wait(self, batch):
        pool, stats, timeout = self.parts.pool, self.parts.stats, self.parts.timeout
        deadline = time.monotonic() + timeout
        last_samples = stats.snapshot()["samples"]
        while not batch.done.wait(_WAIT_SLICE):
            self._check_running()
            if pool.closed:
                raise RuntimeError("the loader was closed while iterating (its decode threads "
                                   "stopped)")
            if pool.error is not None:
                raise RuntimeError("a decode worker died") from pool.error
            samples = stats.snapshot()["samples"]
            if samples != last_samples:
                last_samples = samples
                deadline = time.monotonic() + timeout
            elif time.monotonic() > deadline:
                raise TimeoutError(f"no sample decoded for {timeout} s")

    def __next__(self):
        check_process(self.parts.pid)
        self._check_running()
        if self.next_index >= self.stop:
            self.reads.cancel()
            raise StopIteration
        t0 = time.perf_counter()
        self._issue_ahead()
        self._announce_next()
        batch = self.issued.get(self.next_index)
        if batch is None:  # cancel() from another thread emptied ``issued`` meanwhile
            self._check_running()
            raise RuntimeError(f"batch {self.next_index} of epoch {self.epoch} was never issued")
        t1 = time.perf_counter()
        self._wait(batch)  # interrupted (Ctrl-C, timeout): the batch stays, next() waits again
        # a batch cancelled meanwhile is "done" with its slots undecoded: never handed out
        self._check_running()
        waited = time.perf_counter() - t1
        self.issued.pop(self.next_index, None)
        self.next_index += 1
        if batch.error is not None:
            self.parts.stats.errors += 1
            self.cancel()
            raise explain_stop(batch.error, self.parts.reader)  # the key, the source, the way on
        delivered = self._deliver(batch)
        self._account(batch, delivered, waited)
        self.parts.stats.consumer.add("batch", t0, t1)
        return delivered

    def _check_running(self):
        """RuntimeError when the epoch was stopped with a reason (``cancel(reason)``)."""
        reason = self.stopped
        if reason is not None:
            raise RuntimeError(reason)

    def _deliver(self, batch):
        """The ``Batch`` handed out: failed slots left out, substitutes' positions in, ``pad``
        the filler rows still in it, and a provenance line written."""
        images, labels = batch.images, batch.labels
        samples = np.array(batch.positions, dtype=np.int64)  # a copy: substitutes go in
        for slot, other in batch.substitutes.items():
            samples[slot] = other
        pad = batch.pad
        if batch.failed:
            keep = np.setdiff1d(np.arange(len(images)), batch.failed)
            images, labels, samples = images[keep], labels[keep], samples[keep]
            pad -= _fillers(batch, batch.failed)
        positions = self.parts.record_positions(samples)
        if self.parts.provenance is not None:
            self.parts.provenance.record(self.epoch, self.next_index - 1, positions, samples,
                                         pad, labels)
        return Batch(images, labels, pad, positions)

    def _account(self, batch, delivered, waited):
        """Count the batch in the stats and tell the observers (rows without padding). A
        filler is a record served (or skipped, or replaced) earlier in the epoch: its failure
        or replacement is not counted again."""
        stats = self.parts.stats
        real = len(delivered.images) - delivered.pad
        stats.delivered(real, waited)
        stats.skipped += len(batch.failed) - _fillers(batch, batch.failed)
        stats.replaced += len(batch.substitutes) - _fillers(batch, batch.substitutes)
        for observer in self.parts.observers:
            observer(real, waited)

    def cancel(self, reason: Optional[str] = None):
        """Stop the epoch: no more batches are decoded for it. With a ``reason`` (the loader
        closed, a new epoch started) every later ``next()`` raises RuntimeError(reason), also
        one waiting in another thread now; without one (after an error was raised) the epoch
        ends. An epoch that handed out all its batches stays complete."""
        done = self.next_index
        if reason is not None and self.stopped is None and done < len(self.batches):
            self.stopped = (f"{reason} while iterating: epoch {self.epoch} stopped after "
                            f"{done} of {len(self.batches)} batches")
        self.reads.cancel()
        for batch in list(self.issued.values()):  # a copy: the consumer may be issuing
            batch.cancelled = True
        self.issued.clear()
        self.next_index = len(self.batches)
