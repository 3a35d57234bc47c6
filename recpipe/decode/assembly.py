"""What a loader builds over its file, in one pass: ``assemble`` opens the file with its
sidecars (``RecordReader``: index, checksums, quarantine view), then calls each part once, in
the order they depend on each other: the records served (``recpipe.io.format.layout``), the
record decoder (``records``), the shuffle and a remote file's block-shuffle runs (``order``),
the batch memory and counters (``buffers``, ``stats``), the provenance log (``provenance``),
the filler on the decode threads (``filling``, ``pool``) and what every epoch shares
(``epoch.EpochParts``). ``ImageLoader`` keeps the result; a failure closes what was opened.
"""

from typing import NamedTuple, Optional

import numpy as np

from ..io.format.layout import image_positions
from ..io.reader import RecordReader
from ..io.sidecars.quarantine import RecordQuarantine
from .buffers import BufferPool
from .epoch import EpochParts
from .filling import Filler
from .options import LoaderOptions
from .order import byte_runs, shuffle_mode
from .pool import WorkerPool, weak_method
from .provenance import ProvenanceLog
from .records import RecordDecoder, record_decoder
from .stats import PipelineStats, traced
from .tune.tuner import initial_threads

__all__ = ["LoaderParts", "assemble"]


class LoaderParts(NamedTuple):
    """A loader's file (``reader``) and what it built over it: the quarantine view of its
    records, the ``RecordDecoder``, the shuffle mode ('none', 'full', 'block'), the filler the
    decode threads run, and the parts every epoch shares (``epoch``: the worker pool, the batch
    memory, the counters, the records served, the block-shuffle runs...)."""

    reader: RecordReader
    quarantine: RecordQuarantine
    records: RecordDecoder
    shuffle: str
    filler: Filler
    epoch: EpochParts


def assemble(url, index_url, storage_options, options: LoaderOptions, decoder, augmenter,
             pid: int) -> LoaderParts:
    """Open ``url`` and build a loader's parts over it with ``options`` (checked), ``decoder``
    and ``augmenter``; ``pid``: the process that owns the decode threads. The decode threads
    call the filler through a weak reference: they go with it."""
    o = options
    reader = RecordReader(url, index_url, storage_options, integrity=o.integrity,
                          quarantine=True, note_unprotected=True)
    try:
        positions = image_positions(reader, o.keys)
        records = record_decoder(o, reader, decoder, augmenter)
        shuffle = shuffle_mode(o.shuffle, indexed=bool(reader.index_url))
        samples = len(reader) if positions is None else len(positions)
        runs = None
        if shuffle == "block" and reader.remote:  # one range request a run
            starts, ends = reader.spans(np.arange(samples) if positions is None else positions)
            runs = byte_runs(ends - starts, o.run_bytes)
        buffers = BufferPool()
        buffers.set_keep(o.prefetch + 2)  # the batches in flight, the consumer's, one dropped
        stats = PipelineStats(trace=o.trace)
        traced(stats.trace)
        provenance: Optional[ProvenanceLog] = None
        if o.provenance:
            provenance = ProvenanceLog(o.provenance, o, reader, storage_options,
                                       decoder=decoder.name, native=records.native)
        filler = Filler(records, reader.quarantine, o.on_error, positions, samples)
        threads = initial_threads() if o.threads == "auto" else o.threads
        pool = WorkerPool(weak_method(filler.fill_run), threads, stats=stats)
    except BaseException:
        reader.close()
        raise
    epoch = EpochParts(
        pool=pool, buffers=buffers, stats=stats, observers=[], reader=reader,
        records=positions, runs=runs, sample_shape=augmenter.out_shape, dtype=augmenter.dtype,
        label_width=o.label_width, timeout=o.timeout, prefetch=o.prefetch, pid=pid,
        native=records.native, provenance=provenance)
    return LoaderParts(reader, reader.quarantine, records, shuffle, filler, epoch)
