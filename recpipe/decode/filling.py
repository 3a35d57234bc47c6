"""The filling side of ``ImageLoader``: what runs on the decode threads.

A ``PendingBatch`` is one batch being filled: its preallocated arrays, the samples of its slots,
a count of the slots left and, for the consumer, the first error and the slots that failed or
were replaced. ``Filler.fill_run`` is the ``WorkerPool``'s target: it fills a run of slots of a
batch with one ``RecordDecoder.fill`` call, skips records the quarantine holds, and applies the
error policy (``on_error``: 'raise' keeps the first error for the consumer, 'skip' drops the
slot, 'replace' decodes a deterministic other record into it, else drops it).

Nothing here reads the loader: a ``Filler`` is given its record decoder, quarantine, error
policy and which records the samples are.
"""

import logging
import threading
from typing import Optional

import numpy as np

__all__ = ["Filler", "PendingBatch"]

log = logging.getLogger(__name__)
# other records tried in turn for a failed sample under on_error='replace'
REPLACE_TRIES = 10


class PendingBatch:
    """One batch being filled: buffers, slots left to fill, and the first error. ``records``
    (the record position of each slot) and ``spans`` (their byte spans, or None) are computed
    once for the batch, so that a worker's run takes slices of them; ``windows`` (a remote
    file's, or None) the batch's records taken from the prefetch plan
    (``RecordReader.claim_windows``), whose ``windows()`` every run of the batch decodes from."""

    def __init__(self, plan, images, labels, records, spans=None, windows=None):
        self.positions = plan.positions
        self.records = records
        self.spans = spans
        self.windows = windows
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

    def run(self, start, stop):
        """``(slots, record positions, samples, spans)`` of the slots ``[start, stop)``."""
        spans = self.spans
        if spans is not None:
            spans = (spans[0][start:stop], spans[1][start:stop])
        return (self.slots[start:stop], self.records[start:stop], self.positions[start:stop],
                spans)


class Filler:
    """Fills runs of batch slots on the pool's threads (``fill_run(task, clock)``; a task is
    ``(batch, start, stop, epoch)``). ``records`` decodes, ``quarantine`` holds the records
    known bad, ``on_error`` is the policy, ``positions`` maps sample -> record position (None:
    sample i is record i) over ``num_samples`` samples."""

    def __init__(self, records, quarantine, on_error: str, positions: Optional[np.ndarray],
                 num_samples: int):
        self.records = records
        self.quarantine = quarantine
        self.on_error = on_error
        self.positions = positions
        self.num_samples = num_samples

    def fill_run(self, task, clock):
        """Fill the slots ``[start, stop)`` of a batch: one queue item per run of samples,
        decoded by one ``RecordDecoder.fill`` call."""
        batch, start, stop, epoch = task
        try:
            if not batch.cancelled:
                self._fill(batch, *batch.run(start, stop), epoch, clock)
        # e.g. the file closed under a cancelled batch: the whole run, through on_error
        except Exception as exc:  # noqa: BLE001 - each sample's error goes to on_error
            for slot in range(start, stop):
                self._on_sample_error(batch, slot, epoch, exc, clock)
        finally:
            batch.finish_slots(stop - start)

    def _fill(self, batch, slots, positions, samples, spans, epoch, clock):
        held = self.quarantine.mask(positions)
        if held.any():  # quarantined records are never read again
            for slot, position in zip(slots[held].tolist(), positions[held].tolist()):
                self._on_sample_error(batch, slot, epoch, self.quarantine.error(position), clock)
            keep = ~held
            slots, positions = slots[keep], positions[keep]
            samples = np.asarray(samples, dtype=np.int64)[keep]
            spans = None if spans is None else (spans[0][keep], spans[1][keep])
        failures = self.records.fill(batch.images, batch.labels, slots, positions, samples,
                                     epoch, clock, spans, batch.windows)
        for slot, exc in failures:
            self.quarantine.record(exc)
            self._on_sample_error(batch, slot, epoch, exc, clock)

    def _on_sample_error(self, batch, slot, epoch, exc, clock):
        if self.on_error == "replace" and self._replace(batch, slot, epoch, exc, clock):
            return
        if self.on_error in ("skip", "replace"):
            log.warning("skipping %s", exc)
            batch.failed.append(slot)
            return
        if batch.error is None:  # the first error raises in the consumer
            batch.error = exc

    def _replace(self, batch, slot, epoch, exc, clock):
        n = self.num_samples
        sample = int(batch.positions[slot])
        for attempt in range(1, min(REPLACE_TRIES, n - 1) + 1):
            other = (sample + attempt) % n
            try:
                self._fill_slot(batch, slot, other, epoch, clock)
            except Exception:  # noqa: BLE001 - a replacement that fails: try the next one
                continue
            log.warning("replaced with record %d: %s", other, exc)
            batch.replaced += 1
            batch.substitutes[slot] = other
            return True
        return False

    def _fill_slot(self, batch, slot, sample, epoch, clock):
        position = sample if self.positions is None else int(self.positions[sample])
        if self.quarantine.mask(position):
            raise self.quarantine.error(position)
        batch.labels[slot] = self.records.decode_into(batch.images[slot], position, sample,
                                                      epoch, clock)
