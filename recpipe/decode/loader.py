"""``ImageLoader``: RecordIO records in, augmented numpy batches out, decoded by a thread pool.

Worker threads decode and augment each sample straight into its slot of a preallocated batch
array. The consumer thread issues batches ahead of itself (``prefetch``), waits for the next one
in order, and raises worker errors with their original traceback.
"""

import hashlib
import logging
import math
import os
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ..system.env import threads_override, trace_path
from ..io.layout import image_positions
from ..io.quarantine import RecordQuarantine
from ..io.reader import RecordReader
from .augment import Augmenter
from .buffers import BufferPool
from .decoders import get_decoder
from .options import ON_ERROR, LoaderOptions
from .order import byte_runs, epoch_order, split_batches
from .pool import WorkerPool, shut_down, weak_method
from .provenance import ProvenanceLog
from .records import RecordDecoder
from .stats import PipelineStats, traced
from .tuning_window import AutoTuner, initial_threads

__all__ = ["Batch", "ImageLoader", "LoaderOptions", "ON_ERROR"]

log = logging.getLogger(__name__)
_REPLACE_TRIES = 10
_WAIT_SLICE = 0.1
# samples per worker task: fewer queue round trips than one per sample, while a batch still
# spreads over every thread (128 samples -> 16 tasks)
_RUN_SAMPLES = 8
# runs the native decoder takes whole: as long as a batch still spreads over every thread, up to
# this many samples (the Python around each run is paid once per run, not per sample)
_NATIVE_RUN_SAMPLES = 64


class Batch(tuple):
    """A delivered batch: unpacks as ``images, labels``; ``pad`` says how many samples at its
    end are filler (``last_batch='pad'``), ``positions`` the record position of each sample."""

    def __new__(cls, images, labels, pad=0, positions=None):
        batch = super().__new__(cls, (images, labels))
        batch.pad = pad
        batch.positions = positions
        return batch

    @property
    def images(self):
        return self[0]

    @property
    def labels(self):
        return self[1]


@dataclass
class _EpochParts:
    """What every epoch of a loader uses: its decode workers, batch memory, counters and
    observers, the file, which records the samples are (None: sample i is record i), the
    block-shuffle runs of a remote file, the shape of a batch and the wait deadline."""

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
    native: bool = False  # runs go to recpipe._batch: spans are looked up once per batch
    provenance: Optional[ProvenanceLog] = None  # writes a line per batch handed out

    def record_positions(self, samples):
        samples = np.asarray(samples, dtype=np.int64)
        return samples if self.records is None else self.records[samples]


class _Batch:
    """One batch being filled: buffers, slots left to fill, and the first error. ``records``
    (the record position of each slot) and ``spans`` (their byte spans, or None) are computed
    once for the batch, so that a worker's run takes slices of them."""

    def __init__(self, plan, images, labels, records, spans=None):
        self.positions = plan.positions
        self.records = records
        self.spans = spans
        self.slots = np.arange(len(plan.positions), dtype=np.int64)
        self.pad = plan.pad
        self.images = images
        self.labels = labels
        self.failed = []
        self.replaced = 0
        self.substitutes = {}  # slot -> the sample that replaced its failed one
        self.error = None
        self.cancelled = False
        self._remaining = len(plan.positions)
        self._lock = threading.Lock()
        self.done = threading.Event()

    def finish_slots(self, count):
        with self._lock:
            self._remaining -= count
            if self._remaining == 0:
                self.done.set()


class ImageLoader:
    """Iterate ``(images, labels)`` numpy batches from a RecordIO file.

    Augmentation keywords are ImageRecordIter's (``resize``, ``rand_crop``,
    ``random_resized_crop``, ``min_random_area``, ``max_aspect_ratio``, ``rand_mirror``,
    ``mean_r``, ``std_r``, ``scale``, ``inter_method``, ...). Each ``iter(loader)`` is one epoch;
    the shuffle and the augmentation are deterministic for a given ``seed`` and epoch, whatever
    the number of threads.

    ``dtype``: 'uint8', 'float32' or 'float16'; by default float32 when ``mean_*``, ``std_*``,
    ``scale`` or normalising jitter change the pixels (as ImageRecordIter), else uint8.
    ``shuffle``: False, True ('full' with an index, 'block' without), 'full' or 'block'.
    ``last_batch``: 'pad' (fill from the start, count in ``batch.pad``), 'drop', 'partial'.
    Each batch is a ``Batch``: it unpacks as ``images, labels`` and has ``pad`` and
    ``positions`` (record positions of its samples); ``loader.last_pad`` and
    ``loader.last_positions`` repeat those of the batch just returned.
    ``max_pixels``: images declaring more pixels are refused before decoding (a DecodeError
    under ``on_error``; default 89.5 MP, Pillow's limit; None: no limit). Work and memory per
    sample are bounded by it and by the output size (an image far smaller than the output is
    cropped before it is upscaled). ``max_scans``: JPEGs of more scans (default 100; None: no
    limit) are refused before their extra scans are decoded (a progressive "scan bomb").
    ``aug_seed``: keys the augmentation's random stream (default: ``seed``, which also keys
    the shuffle).
    ``keys``: index keys of the records to serve (default: every record, or only the images of
    a file in InsightFace's layout, whose header and identity records are left out,
    ``recpipe.io.layout``).
    ``lookahead``: near the end of an epoch, start decoding the next one (as if ``iter`` had
    been called; a ``set_epoch`` to another number discards that work).
    ``run_bytes``: on a remote file (``s3://``...) records are fetched ahead by coalesced range
    requests, and ``shuffle='block'`` shuffles runs of about this many bytes (8 MiB), one
    request each, then records within a window of runs (``recpipe.decode.order.block_shuffle``).
    ``threads``: 'auto' (the default: the autotuner grows the decode threads, and the prefetch
    depth, until the consumer stops waiting, see ``autotune_report()``) or a fixed number.
    ``on_error``: 'raise' (default), 'skip' (the batch comes out shorter) or 'replace' (a
    deterministic other record takes the slot); skipped and replaced samples are counted in
    ``stats()``.
    ``integrity``: 'auto' (default) or 'strict' check every record against the ``.sums``
    sidecar when there is one (a mismatch is a RecordFormatError under ``on_error``), and
    remember records found bad (checksum, framing, decode) in a quarantine file that later
    epochs and runs skip without reading them (``recpipe.io.quarantine``; ``recpipe verify``
    clears entries that pass); 'off': neither. In every mode libjpeg's corrupt-data warnings in
    the rows decoded are errors; 'strict' also entropy-decodes the rest of a region decode's
    scan, so every record a full decode would flag is a DecodeError (its cost: BENCHMARKS.md).
    ``provenance``: a file to append one JSON line to per batch handed out (epoch, batch,
    record positions, seeds, digests of the options and the file): ``recpipe.replay`` rebuilds
    any logged batch from it (``recpipe.decode.provenance``).

    The keywords are checked, all of them and before the file is opened, into a frozen
    ``LoaderOptions`` (``loader.options``); ``ImageLoader(url, options=LoaderOptions...)``
    takes one directly (``recpipe.mxnet`` and ``recpipe.torch`` build theirs).

    >>> with ImageLoader("val.rec", 128, (3, 224, 224), resize=256) as loader:  # doctest: +SKIP
    ...     for images, labels in loader:
    ...         train_step(images, labels)
    """

    def __init__(self, url: str, batch_size: Optional[int] = None,
                 data_shape: Optional[Sequence[int]] = None, index_url: Optional[str] = None,
                 storage_options: Optional[dict] = None, *,
                 options: Optional[LoaderOptions] = None, **keywords) -> None:
        if options is None:  # every argument is checked before the file opens
            if batch_size is None or data_shape is None:
                raise TypeError("ImageLoader needs batch_size and data_shape (or options=)")
            options = LoaderOptions.from_kwargs(batch_size, data_shape, **keywords)
        elif keywords or batch_size is not None or data_shape is not None:
            raise TypeError("give options= or keywords (batch_size, data_shape, ...), not both")
        # $RECPIPE_THREADS and $RECPIPE_TRACE win over the options (recpipe.env)
        options = options.replace(threads=threads_override(options.threads),
                                  trace=options.trace or trace_path() is not None)
        self.options = o = options
        self.config = o.augment
        self.augmenter = Augmenter(self.config)
        self.decoder = get_decoder(o.decoder, fast_dct=o.fast_dct, fast_upsample=o.fast_upsample,
                                   max_pixels=o.max_pixels, integrity=o.integrity,
                                   max_scans=o.max_scans)
        self._pid = os.getpid()
        self._pool = None
        self.reader = RecordReader(url, index_url, storage_options, integrity=o.integrity)
        try:
            self._records = image_positions(self.reader, o.keys)
            self.quarantine = RecordQuarantine.of(self.reader, enabled=o.integrity != "off")
            self.batch_size = o.batch_size
            self.label_width = o.label_width
            self.on_error = o.on_error
            self._buffers = BufferPool()
            self.prefetch = o.prefetch  # sizes the buffer pool
            self.timeout = o.timeout
            self.lookahead = o.lookahead
            self.seed = o.seed
            self.aug_seed = o.augment_seed
            self.records = RecordDecoder(self.reader, self.decoder, self.augmenter,
                                         label_width=o.label_width, seed=self.aug_seed,
                                         label_rule=self._label_rule())
            self.part_index = o.part_index
            self.num_parts = o.num_parts
            self.last_batch = o.last_batch
            self.shuffle = self._shuffle_mode(o.shuffle)
            self._runs = self._byte_runs(o.run_bytes)
            self.epoch = -1
            self.last_pad = 0
            self.last_positions = np.arange(0)
            self._stats = PipelineStats(trace=o.trace)
            traced(self._stats.trace)
            self._current = None
            self._next = None
            self._observers = []
            self.autotuner = None
            self._resume_batch = 0
            auto = o.threads == "auto"
            # the threads call the loader through a weak reference: a loader dropped without
            # close() is collected, and its finalizer (also run at interpreter exit) stops them
            self._pool = WorkerPool(weak_method(self._process),
                                    initial_threads() if auto else o.threads, stats=self._stats)
            self._finalizer = weakref.finalize(self, shut_down, self._pool, self.reader)
            self._parts = _EpochParts(self._pool, self._buffers, self._stats, self._observers,
                                      self.reader, self._records, self._runs,
                                      self.augmenter.out_shape, self.augmenter.dtype,
                                      o.label_width, o.timeout, self.records.native,
                                      ProvenanceLog(o.provenance, o, self.reader, storage_options)
                                      if o.provenance else None)
            if auto:
                self.enable_autotune()
        except BaseException:
            shut_down(self._pool, self.reader)
            raise

    def _label_rule(self):
        """``label(header, position)`` when labels do not come from the record headers by
        ``label_width`` (subclasses: an imglist's), else None."""
        return None

    def _byte_runs(self, run_bytes):
        """Block-shuffle runs of about ``run_bytes`` for remote files (one range request each)."""
        if self.shuffle != "block" or not self.reader.remote:
            return None
        records = np.arange(self.num_samples) if self._records is None else self._records
        starts, ends = self.reader.spans(records)  # one numpy call, not one per record
        return byte_runs(ends - starts, run_bytes)

    def _shuffle_mode(self, shuffle):
        if shuffle is True:
            return "full" if self.reader.index_url else "block"
        if shuffle is False or shuffle is None:
            return "none"
        return shuffle

    # -- public surface -------------------------------------------------------------------

    @property
    def prefetch(self):
        """Batches decoded ahead of the consumer (the autotuner may change it)."""
        return self._prefetch

    @prefetch.setter
    def prefetch(self, depth):
        if depth < 1:
            raise ValueError(f"prefetch={depth} must be at least 1")
        self._prefetch = depth
        # the batches in flight, the one the consumer holds and one it just dropped
        self._buffers.set_keep(depth + 2)

    @property
    def batch_bytes(self):
        """Bytes of one batch: images and labels."""
        item = math.prod(self.augmenter.out_shape) * self.augmenter.dtype.itemsize
        return self.batch_size * (item + 4 * self.label_width)

    @property
    def num_samples(self):
        """Records served per epoch (all of them, or the chosen/image ones, see ``keys``)."""
        return len(self.reader) if self._records is None else len(self._records)

    def _record(self, sample):
        """The record position of sample ``sample`` (0..num_samples-1)."""
        return sample if self._records is None else int(self._records[sample])

    @property
    def threads(self):
        """The current number of decode threads (0 once closed)."""
        pool = self._pool
        return 0 if pool is None else pool.threads

    def set_threads(self, threads):
        """Change the number of decode threads while the loader runs."""
        pool = self._pool
        if pool is None:
            raise RuntimeError("the loader is closed: set_threads() needs an open loader")
        pool.resize(threads)

    def enable_autotune(self, **options):
        """Let an ``AutoTuner`` drive ``threads`` and ``prefetch`` (what ``threads="auto"``
        does); ``options`` go to ``recpipe.decode.tuning_window.AutoTuner``."""
        if self.autotuner is None:
            self.autotuner = AutoTuner(self, **options)
        return self.autotuner

    def autotune_report(self):
        """With the autotuner on: a dict with the current ``threads`` and ``prefetch``, the stop
        ``reason``, ``wait_fraction`` before/after and the decision ``history``; else None."""
        return None if self.autotuner is None else self.autotuner.report()

    def add_observer(self, observer):
        """Call ``observer(images, waited_seconds)`` in the consumer thread after every batch
        is handed out (``images`` excludes padding and skipped samples). Used by the autotuner."""
        self._observers.append(observer)

    def stats(self):
        """Images/s, consumer wait, per-stage seconds and error counts since the loader started."""
        return self._stats.snapshot()

    @property
    def trace_spans(self):
        """``(thread, stage, start, end)`` spans when created with ``trace=True``."""
        return list(self._stats.trace or [])

    def set_epoch(self, epoch):
        """Make the next ``iter(loader)`` epoch number ``epoch``."""
        self.epoch = epoch - 1

    def _batches(self, epoch):
        order = epoch_order(self.num_samples, shuffle=self.shuffle, seed=self.seed, epoch=epoch,
                            part_index=self.part_index, num_parts=self.num_parts,
                            run_starts=self._runs)
        return split_batches(order, self.batch_size, self.last_batch)

    def __len__(self):
        """Batches per epoch (the same on every part)."""
        per_part = -(-self.num_samples // self.num_parts)
        full, tail = divmod(per_part, self.batch_size)
        return full + (1 if tail and self.last_batch != "drop" else 0)

    def state_dict(self):
        """Where the loader is: enough to resume exactly (order and augmentation included)."""
        current = self._current
        done = current.next_index if current is not None else 0
        epoch = self.epoch
        if current is None or done >= len(current.plans):
            epoch, done = self.epoch + 1, 0
        return {"epoch": max(epoch, 0), "batch": done, "seed": self.seed,
                "records": self.num_samples, "batch_size": self.batch_size,
                "part_index": self.part_index, "num_parts": self.num_parts,
                "shuffle": self.shuffle, "last_batch": self.last_batch,
                "options": self._options_digest(), "file": self._file_identity()}

    def _options_digest(self):
        """A digest of what decides the samples besides the keys ``state_dict`` lists: the
        augmentation and its seed, the label width, the record selection, the byte runs."""
        o = self.options
        digest = hashlib.blake2b(digest_size=8)
        digest.update(repr((o.augment, o.augment_seed, o.label_width, o.run_bytes)).encode())
        if self._records is not None:
            digest.update(np.ascontiguousarray(self._records, dtype="<i8").tobytes())
        return digest.hexdigest()

    def _file_identity(self):
        """The ``.rec`` size and a sample of its record offsets (the same on any copy)."""
        offsets = self.reader.table.offsets
        sample = offsets[np.linspace(0, len(offsets) - 1, min(len(offsets), 64)).astype(np.int64)]
        digest = hashlib.blake2b(np.ascontiguousarray(sample, dtype="<i8").tobytes(), digest_size=8)
        return f"{self.reader.size}:{len(offsets)}:{digest.hexdigest()}"

    def load_state_dict(self, state):
        """Make the next ``iter(loader)`` continue from ``state`` (from ``state_dict()``):
        it yields exactly the batches an uninterrupted run would have yielded next."""
        mine = self.state_dict()
        for key in ("seed", "records", "batch_size", "part_index", "num_parts", "shuffle",
                    "last_batch", "options", "file"):
            if (key in state or key not in ("options", "file")) and state.get(key) != mine[key]:
                raise ValueError(f"cannot resume: state has {key}={state.get(key)!r}, "
                                 f"this loader has {mine[key]!r}")
        epoch = _state_int(state, "epoch", 0, None)
        batch = _state_int(state, "batch", 0, max(len(self), 1) - 1)
        self.set_epoch(epoch)
        self._resume_batch = batch

    def __iter__(self):
        self._check_process()
        if self._pool is None:
            raise RuntimeError("the loader is closed")
        self.epoch += 1
        start, self._resume_batch = self._resume_batch, 0
        ahead, self._next = self._next, None
        if self._current is not None:
            self._current.cancel()
        if ahead is not None and (start or ahead.epoch != self.epoch):
            ahead.cancel()
            ahead = None
        self._current = ahead or _Epoch(self, self._parts, self._batches(self.epoch), self.epoch,
                                        start)
        return self._current

    def _prefetch_next_epoch(self, batches):
        """Start decoding the first ``batches`` batches of the next epoch while this one ends."""
        if self._next is None:
            epoch = self.epoch + 1
            self._next = _Epoch(self, self._parts, self._batches(epoch), epoch)
        self._next.issue_until(batches)

    @property
    def closed(self):
        """True once ``close()`` ran."""
        return self._pool is None

    def close(self):
        """Stop and join every decode thread and close the file."""
        for epoch in (self._current, self._next):
            if epoch is not None:
                epoch.cancel()
        self._current = self._next = None
        pool, self._pool = self._pool, None
        self._finalizer.detach()
        if self._parts.provenance is not None:
            self._parts.provenance.close()
        shut_down(pool, self.reader)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _check_process(self):
        if os.getpid() != self._pid:
            raise RuntimeError(
                f"this ImageLoader was created in process {self._pid}; its decode threads do not "
                f"exist in this forked process {os.getpid()}: create the loader in the process "
                "that iterates it (e.g. in each DataLoader worker), or use recpipe.torch")

    # -- worker side ----------------------------------------------------------------------

    def _process(self, task, clock):
        """Fill the slots ``[start, stop)`` of a batch: one queue item per run of samples,
        decoded by one ``RecordDecoder.fill`` call."""
        batch, start, stop, epoch = task
        try:
            if batch.cancelled:
                return
            slots, positions = batch.slots[start:stop], batch.records[start:stop]
            samples, spans = batch.positions[start:stop], batch.spans
            if spans is not None:
                spans = (spans[0][start:stop], spans[1][start:stop])
            held = self.quarantine.mask(positions)
            if held.any():  # quarantined records are never read again
                for slot, position in zip(slots[held].tolist(), positions[held].tolist()):
                    self._on_sample_error(batch, slot, epoch, self.quarantine.error(position),
                                          clock)
                keep = ~held
                slots, positions = slots[keep], positions[keep]
                samples = np.asarray(samples, dtype=np.int64)[keep]
                spans = None if spans is None else (spans[0][keep], spans[1][keep])
            failures = self.records.fill(batch.images, batch.labels, slots, positions, samples,
                                         epoch, clock, spans)
            for slot, exc in failures:
                self.quarantine.record(exc)
                self._on_sample_error(batch, slot, epoch, exc, clock)
        except Exception as exc:  # e.g. the file closed under a cancelled batch: the whole run
            for slot in range(start, stop):
                self._on_sample_error(batch, slot, epoch, exc, clock)
        finally:
            batch.finish_slots(stop - start)

    def _fill_slot(self, batch, slot, sample, epoch, clock):
        position = self._record(sample)
        if self.quarantine.mask(position):
            raise self.quarantine.error(position)
        batch.labels[slot] = self.records.decode_into(batch.images[slot], position, sample,
                                                      epoch, clock)

    def _on_sample_error(self, batch, slot, epoch, exc, clock):
        if self.on_error == "replace" and self._replace(batch, slot, epoch, exc, clock):
            return
        if self.on_error in ("skip", "replace"):
            log.warning("skipping %s", exc)
            batch.failed.append(slot)
            return
        if batch.error is None:
            batch.error = exc

    def _replace(self, batch, slot, epoch, exc, clock):
        n = self.num_samples
        position = int(batch.positions[slot])
        for attempt in range(1, min(_REPLACE_TRIES, n - 1) + 1):
            other = (position + attempt) % n
            try:
                self._fill_slot(batch, slot, other, epoch, clock)
            except Exception:
                continue
            log.warning("replaced with record %d: %s", other, exc)
            batch.replaced += 1
            batch.substitutes[slot] = other
            return True
        return False


def _state_int(state, key, low, high):
    """``state[key]``, an integer in ``low..high`` (``high`` None: no upper bound)."""
    value = state.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low or (
            high is not None and value > high):
        bounds = f">= {low}" if high is None else f"in {low}..{high}"
        raise ValueError(f"cannot resume: state has {key}={value!r}, expected an integer {bounds}")
    return int(value)


class _Epoch:
    """The consumer side of one epoch: issues batches ahead and hands them out in order.

    ``parts`` are the loader's workers, memory and counters (``_EpochParts``); ``loader`` is
    asked only for what changes while it runs: the prefetch depth, lookahead, whether this epoch
    is still the current one, and to start the next epoch near this one's end."""

    def __init__(self, loader, parts, plans, epoch, start=0):
        self.loader = loader
        self.parts = parts
        self.plans = plans
        self.epoch = epoch
        self.issued = {}
        self.next_index = start
        self.issue_index = start
        # remote files: fetch the epoch's records ahead, coalesced (per run with a block shuffle)
        reader = parts.reader
        self.reads = reader.prefetch(()) if not reader.remote else \
            reader.prefetch(parts.record_positions(plans.flat(start)),
                            runs=parts.runs if parts.records is None else None)

    def __iter__(self):
        return self

    def __len__(self):
        return len(self.plans)

    def _allocate(self, plan):
        parts, size = self.parts, len(plan.positions)
        images = parts.buffers.array((size,) + parts.sample_shape, parts.dtype)
        label_shape = (size,) if parts.label_width == 1 else (size, parts.label_width)
        records = parts.record_positions(plan.positions)
        # C reads a local file's records by these spans (a remote file's payloads come through
        # the reader instead)
        spans = parts.reader.spans(records) if parts.native and not parts.reader.remote else None
        return _Batch(plan, images, np.zeros(label_shape, dtype=np.float32), records, spans)

    def _run_samples(self, size):
        """Samples per worker task: 8, or for the native decoder as many as still give every
        thread a part of the batch (up to ``_NATIVE_RUN_SAMPLES``)."""
        if not self.parts.native:
            return _RUN_SAMPLES
        return max(_RUN_SAMPLES, min(_NATIVE_RUN_SAMPLES, -(-size // self.parts.pool.threads)))

    def _issue_ahead(self):
        wanted = self.next_index + self.loader.prefetch
        self.issue_until(wanted)
        if wanted > len(self.plans) and self.loader.lookahead:
            self.loader._prefetch_next_epoch(wanted - len(self.plans))

    def issue_until(self, count):
        """Submit the samples of every batch before index ``count``."""
        limit = min(len(self.plans), count)
        while self.issue_index < limit:
            batch = self._allocate(self.plans[self.issue_index])
            self.issued[self.issue_index] = batch
            size = len(batch.positions)
            run = self._run_samples(size)
            for start in range(0, size, run):  # runs of samples, not one item each
                self.parts.pool.submit((batch, start, min(size, start + run), self.epoch))
            self.issue_index += 1

    def _wait(self, batch):
        pool, stats, timeout = self.parts.pool, self.parts.stats, self.parts.timeout
        deadline = time.monotonic() + timeout
        last_samples = stats.snapshot()["samples"]
        while not batch.done.wait(_WAIT_SLICE):
            if self.loader.closed:
                raise RuntimeError("the loader was closed")
            if pool.error is not None:
                raise RuntimeError("a decode worker died") from pool.error
            samples = stats.snapshot()["samples"]
            if samples != last_samples:
                last_samples = samples
                deadline = time.monotonic() + timeout
            elif time.monotonic() > deadline:
                raise TimeoutError(f"no sample decoded for {timeout} s")

    def __next__(self):
        self.loader._check_process()
        if self.next_index >= len(self.plans):
            self.reads.cancel()
            raise StopIteration
        if self.loader._current is not self:
            raise RuntimeError("this epoch was superseded by a newer iter(loader)")
        t0 = time.perf_counter()
        self._issue_ahead()
        batch = self.issued[self.next_index]
        t1 = time.perf_counter()
        self._wait(batch)  # interrupted (Ctrl-C, timeout): the batch stays, next() waits again
        waited = time.perf_counter() - t1
        del self.issued[self.next_index]
        self.next_index += 1
        stats = self.parts.stats
        if batch.error is not None:
            stats.errors += 1
            self.cancel()
            raise batch.error
        images, labels = batch.images, batch.labels
        samples = np.array(batch.positions, dtype=np.int64)  # a copy: substitutes go in
        for slot, other in batch.substitutes.items():
            samples[slot] = other
        if batch.failed:
            keep = np.setdiff1d(np.arange(len(images)), batch.failed)
            images, labels, samples = images[keep], labels[keep], samples[keep]
        positions = self.parts.record_positions(samples)
        if self.parts.provenance is not None:
            self.parts.provenance.record(self.epoch, self.next_index - 1, positions, samples,
                                         batch.pad)
        self.loader.last_pad = batch.pad
        self.loader.last_positions = positions
        stats.delivered(len(batch.positions) - batch.pad - len(batch.failed), waited)
        stats.skipped += len(batch.failed)
        stats.replaced += batch.replaced
        for observer in self.parts.observers:
            observer(len(images) - batch.pad, waited)
        stats.consumer.add("batch", t0, t1)
        return Batch(images, labels, batch.pad, positions)

    def cancel(self):
        self.reads.cancel()
        for batch in self.issued.values():
            batch.cancelled = True
        self.issued.clear()
        self.next_index = len(self.plans)
