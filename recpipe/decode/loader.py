"""``ImageLoader``: RecordIO records in, augmented numpy batches out, decoded by a thread pool.

The facade: it checks the options (``LoaderOptions``, kept as ``self.options``), opens the file,
and owns the parts both sides share. Worker threads run the filling side
(``filling.Filler``: decode and augment each sample straight into its slot of a preallocated
batch array, with the error policy); the consumer runs the epoch side (``epoch.Epoch``: issue
batches ahead, wait for the next one in order, hand it out as a ``Batch``, raise worker errors
with their original traceback).
"""

import hashlib
import math
import os
import weakref
from typing import Optional, Sequence

import numpy as np

from ..system.env import threads_override, trace_path
from .assembly import assemble
from .augment import Augmenter
from .augment.effect import warn_no_effect
from .epoch import Batch, Epoch, check_process
from .options import ON_ERROR, LoaderOptions, decoder_for
from .order import epoch_order, split_batches
from .pool import shut_down
from .provenance import check_log_path
from .records import record_decoder
from .tune.tuner import AutoTuner, TunerOptions

__all__ = ["Batch", "ImageLoader", "LoaderOptions", "ON_ERROR", "not_picklable", "record_decoder"]


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
    ``positions`` (record positions of its samples). ``loader.batch(epoch, index)`` gives any
    one batch of any epoch as iterating delivers it, without decoding those before it.
    ``max_pixels``: images declaring more pixels are refused before decoding (a DecodeError
    under ``on_error``; default 89.5 MP, Pillow's limit; None: no limit). Work and memory per
    sample are bounded by it and by the output size (an image far smaller than the output is
    cropped before it is upscaled). ``max_scans``: JPEGs of more scans (default 100; None: no
    limit) are refused before their extra scans are decoded (a progressive "scan bomb").
    ``aug_seed``: keys the augmentation's random stream (default: ``seed``, which also keys
    the shuffle).
    ``keys``: index keys of the records to serve (default: every record, or only the images of
    a file in InsightFace's layout, whose header and identity records are left out,
    ``recpipe.io.format.layout``).
    ``lookahead``: near the end of an epoch, start decoding the next one (as if ``iter`` had
    been called; a ``set_epoch`` to another number discards that work).
    ``run_bytes``: on a remote file (``s3://``...) records are fetched ahead by coalesced range
    requests, and ``shuffle='block'`` shuffles runs of about this many bytes (8 MiB), one
    request each, then records within a window of runs (``recpipe.decode.order.block_shuffle``).
    ``threads``: 'auto' (the default: the autotuner grows the decode threads, and the prefetch
    depth, until the consumer stops waiting, see ``autotune_report()``) or a fixed number.
    ``on_error``: 'raise' (default), 'skip' (the batch comes out shorter) or 'replace' (a
    deterministic other record takes the slot); skipped and replaced samples are counted in
    ``stats()``, each once: a filler of the padded last batch is a record met earlier in the
    epoch, so its failure is not counted again, and a skipped filler leaves the batch and
    ``batch.pad`` (``pad`` is always the filler rows actually in the batch).
    ``integrity``: 'auto' (default) or 'strict' check every record against the ``.sums``
    sidecar when there is one (a mismatch is a RecordFormatError under ``on_error``), and
    remember records found bad (checksum, framing, decode) in a quarantine file that later
    epochs and runs skip without reading them (``recpipe.io.sidecars.quarantine``; ``recpipe
    verify`` clears entries that pass); 'off': neither. In every mode libjpeg's corrupt-data
    warnings in the rows decoded are errors; 'strict' also entropy-decodes the rest of a region
    decode's scan, so every record a full decode would flag is a DecodeError (its cost:
    BENCHMARKS.md). ``label_rule``: ``label_rule(header, position)`` gives each record's label (a
    float32 scalar, or ``label_width`` float32 values) instead of ImageRecordIter's rules over the
    record header (``recpipe.mx.record_iter`` passes one for ``path_imglist``); for a record it has
    no label for, raise RecordFormatError: it becomes a ``recpipe.errors.LabelError``, which goes
    through ``on_error`` but never quarantines the (sound) record. It runs on the decode threads,
    and the native batch path is not used with it.
    ``provenance``: a file to append one JSON line to per batch handed out (epoch, batch,
    record positions, seeds, digests of the options and the file; the labels too under a
    ``label_rule``): ``recpipe.replay`` rebuilds any logged batch from it with every option
    that decides records, pixels or labels (``recpipe.decode.provenance``). Its folder must
    exist and be writable: checked when the loader is created, before the file is opened.

    The keywords are checked, all of them and before the file is opened, into a frozen
    ``LoaderOptions`` (``loader.options``); ``ImageLoader(url, options=LoaderOptions...)``
    takes one directly (``recpipe.mx.record_iter`` and ``recpipe.torch`` build theirs).

    >>> with ImageLoader("val.rec", 128, (3, 224, 224), resize=256) as loader:  # doctest: +SKIP
    ...     for images, labels in loader:
    ...         train_step(images, labels)
    """

    def __init__(self, url: str, batch_size: Optional[int] = None,
                 data_shape: Optional[Sequence[int]] = None, index_url: Optional[str] = None,
                 storage_options: Optional[dict] = None, *,
                 options: Optional[LoaderOptions] = None, **keywords) -> None:
        self.options = o = _loader_options(batch_size, data_shape, options, keywords)
        if o.provenance is not None:
            check_log_path(o.provenance)  # not at the first batch, after the file was read
        warn_no_effect(o.augment)  # a setting the others leave without effect: said once
        self.augmenter = Augmenter(o.augment)
        self.decoder = decoder_for(o)
        self._pid = os.getpid()
        parts = assemble(url, index_url, storage_options, o, self.decoder, self.augmenter,
                         self._pid)
        self.reader, self.quarantine, self.records, self.shuffle, self._filler, epoch = parts
        self._parts = epoch
        self._records, self._runs = epoch.records, epoch.runs
        self._pool, self._buffers, self._stats = epoch.pool, epoch.buffers, epoch.stats
        # a loader dropped without close() stops its threads (when collected, or at exit)
        self._finalizer = weakref.finalize(self, shut_down, self._pool, self.reader)
        self.epoch = -1
        self._current = self._next = None
        self._resume_batch = 0
        self._planned = None  # (epoch, its batch plan): the latest one made
        self.autotuner: Optional[AutoTuner] = None
        if o.threads == "auto":
            self.enable_autotune()

    # -- public surface -------------------------------------------------------------------

    @property
    def prefetch(self):
        """Batches decoded ahead of the consumer (the autotuner may change it)."""
        return self._parts.prefetch

    @prefetch.setter
    def prefetch(self, depth):
        if depth < 1:
            raise ValueError(f"prefetch={depth} must be at least 1")
        self._parts.prefetch = depth
        # the batches in flight, the one the consumer holds and one it just dropped
        self._buffers.set_keep(depth + 2)

    @property
    def batch_bytes(self):
        """Bytes of one batch: images and labels."""
        item = math.prod(self.augmenter.out_shape) * self.augmenter.dtype.itemsize
        return self.options.batch_size * (item + 4 * self.options.label_width)

    @property
    def num_samples(self):
        """Records served per epoch (all of them, or the chosen/image ones, see ``keys``)."""
        return len(self.reader) if self._records is None else len(self._records)

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

    def enable_autotune(self, options: Optional[TunerOptions] = None, *, controller=None,
                        **keywords):
        """Let an ``AutoTuner`` drive ``threads`` and ``prefetch`` (what ``threads="auto"``
        does); ``options`` (a ``tune.tuner.TunerOptions``) and/or its field names as
        keywords configure it; ``controller`` replaces its ``tune.controller.Controller``."""
        if self.autotuner is None:
            self.autotuner = AutoTuner(self, TunerOptions.of(options, keywords),
                                       controller=controller)
        return self.autotuner

    def autotune_report(self):
        """With the autotuner on: a dict with the current ``threads`` and ``prefetch``, the stop
        ``reason``, ``wait_fraction`` before/after and the decision ``history``; else None."""
        return None if self.autotuner is None else self.autotuner.report()

    def add_observer(self, observer):
        """Call ``observer(images, waited_seconds)`` in the consumer thread after every batch
        is handed out (``images`` excludes padding and skipped samples). Used by the autotuner."""
        self._parts.observers.append(observer)

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

    def batch(self, epoch: int, index: int) -> Batch:
        """Batch ``index`` of epoch ``epoch`` exactly as iterating that epoch hands it out (its
        records, order, rank part, seeds, quarantine, ``on_error`` handling and pixels; a
        provenance line is written for it, which ``recpipe.replay`` rebuilds), without decoding
        the batches before it: the epoch is resumed at ``index`` (as ``load_state_dict`` does)
        for that one batch. Where iteration goes on is left as it is, and the arrays are the
        caller's. The plan of the latest epoch asked for is kept, so batch after batch of one
        epoch does not permute its records again. IndexError for a batch the epoch does not
        have; a bad record raises (or is skipped/replaced) as in an epoch."""
        check_process(self._pid)
        if self._pool is None:
            raise RuntimeError("the loader is closed: batch() needs an open loader")
        for name, value in (("epoch", epoch), ("index", index)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"batch(): {name}={value!r}, expected an integer >= 0")
        if index >= len(self):
            raise IndexError(f"no batch {index}: an epoch has {len(self)} batches "
                             f"(0..{len(self) - 1}) of {self.options.batch_size}")
        one = Epoch(self._parts, self._batches(int(epoch)), int(epoch), int(index),
                    stop=int(index) + 1)
        try:
            return next(one)
        finally:
            one.cancel()

    def _batches(self, epoch):
        """The batch plan of ``epoch`` (an immutable ``order.EpochBatches``); the latest one
        made is kept (the running epoch holds it anyway)."""
        kept = self._planned
        if kept is not None and kept[0] == epoch:
            return kept[1]
        self._planned = None  # the old order goes before the new one is made
        o = self.options
        order = epoch_order(self.num_samples, shuffle=self.shuffle, seed=o.seed, epoch=epoch,
                            part_index=o.part_index, num_parts=o.num_parts,
                            run_starts=self._runs)
        batches = split_batches(order, o.batch_size, o.last_batch)
        self._planned = (epoch, batches)
        return batches

    def __len__(self):
        """Batches per epoch (the same on every part)."""
        o = self.options
        per_part = -(-self.num_samples // o.num_parts)
        full, tail = divmod(per_part, o.batch_size)
        return full + (1 if tail and o.last_batch != "drop" else 0)

    def state_dict(self):
        """Where the loader is: enough to resume exactly (order and augmentation included)."""
        o, current = self.options, self._current
        done = current.next_index if current is not None else 0
        epoch = self.epoch
        if current is None or done >= len(current.batches):
            epoch, done = self.epoch + 1, 0
        return {"epoch": max(epoch, 0), "batch": done, "seed": o.seed,
                "records": self.num_samples, "batch_size": o.batch_size,
                "part_index": o.part_index, "num_parts": o.num_parts,
                "shuffle": self.shuffle, "last_batch": o.last_batch,
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
        check_process(self._pid)
        if self._pool is None:
            raise RuntimeError("the loader is closed")
        self.epoch += 1
        start, self._resume_batch = self._resume_batch, 0
        ahead, self._next = self._next, None
        if self._current is not None:
            self._current.cancel("the loader's epoch was superseded by a new iter(loader)")
        if ahead is not None and (start or ahead.epoch != self.epoch):
            ahead.cancel("the loader's epoch was superseded by a new iter(loader)")
            ahead = None
        self._current = ahead or self._epoch(self.epoch, start)
        return self._current

    def _epoch(self, epoch, start=0):
        lookahead = self._prefetch_next_epoch if self.options.lookahead else None
        return Epoch(self._parts, self._batches(epoch), epoch, start, next_epoch=lookahead)

    def _prefetch_next_epoch(self, batches):
        """Start decoding the first ``batches`` batches of the next epoch while this one ends."""
        if self._pool is None:  # closed from another thread meanwhile
            return
        if self._next is None:
            self._next = self._epoch(self.epoch + 1)
        self._next.issue_until(batches)

    @property
    def closed(self):
        """True once ``close()`` ran."""
        return self._pool is None

    def close(self):
        """Stop and join every decode thread and close the file. An epoch still running
        (in this thread or another) raises RuntimeError "the loader was closed while
        iterating" at its next batch, or at once when it waits for one: never a quiet end that
        looks like a complete epoch."""
        for epoch in (self._current, self._next):
            if epoch is not None:
                epoch.cancel("the loader was closed")
        self._current = self._next = self._planned = None
        pool, self._pool = self._pool, None
        self._finalizer.detach()
        if self._parts.provenance is not None:
            self._parts.provenance.close()
        shut_down(pool, self.reader)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __reduce__(self):
        raise TypeError(not_picklable("an ImageLoader"))


def not_picklable(what):
    """Why ``what`` (a loader running decode threads) cannot be pickled, and what to do."""
    return (f"{what} cannot be sent to another process (pickled for spawn or forkserver "
            "workers, mp.spawn, a DataLoader's dataset): its decode threads and open file "
            "belong to the process that made it. It is a batch loader already: iterate it "
            "directly (num_workers is its threads=), not through a DataLoader, and create it "
            "in the process that iterates it (in each rank, after init_process_group); for "
            "DataLoader workers use recpipe.torch.RecordDataset, which pickles its arguments "
            "and opens the file in each worker")


def _loader_options(batch_size, data_shape, options, keywords):
    """The loader's ``LoaderOptions``, every argument checked before the file opens;
    ``$RECPIPE_THREADS`` and ``$RECPIPE_TRACE`` win over them (``recpipe.system.env``)."""
    if options is None:
        if batch_size is None or data_shape is None:
            raise TypeError("ImageLoader needs batch_size and data_shape (or options=)")
        options = LoaderOptions.from_kwargs(batch_size, data_shape, **keywords)
    elif keywords or batch_size is not None or data_shape is not None:
        raise TypeError("give options= or keywords (batch_size, data_shape, ...), not both")
    if options.augment is None:
        raise ValueError("ImageLoader needs a data_shape: its options have no augmentation "
                         "(whole images are recpipe.torch.RecordDataset's, data_shape=None)")
    return options.replace(threads=threads_override(options.threads),
                           trace=options.trace or trace_path() is not None)


def _state_int(state, key, low, high):
    """``state[key]``, an integer in ``low..high`` (``high`` None: no upper bound)."""
    value = state.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low or (
            high is not None and value > high):
        bounds = f">= {low}" if high is None else f"in {low}..{high}"
        raise ValueError(f"cannot resume: state has {key}={value!r}, expected an integer {bounds}")
    return int(value)
