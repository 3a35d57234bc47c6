"""``RecordDecoder``: a record of a ``.rec`` file -> its label and its augmented image.

The one place where read -> image header -> label -> plan -> decode -> augment happens, used by
``ImageLoader`` (``fill``: a run of batch slots in one call), ``recpipe.torch.RecordDataset``
(``decode``: one sample) and ``recpipe bench`` (``image_bytes``).

``fill`` hands the whole run to ``recpipe._batch`` when it can (a decoder that decodes regions
with ``recpipe._batch``, labels from the record headers or an id table (``IdLabels``: an
imglist's), an augmentation the C kernels render alone: an optional resize, then an output-sized,
random-resized or random-size crop, with any interpolation (bicubic included), mirror and
normalisation; the gate and the run description are ``recpipe.decode.native``'s): read, header,
label, plan, region decode at a DCT scale, resize and write then run in C without the GIL, with
the same random draws and the same pixels. C reads a local file's records itself; for any other
source (``s3://``, ``memory://``...) it reads them from windows of the file's bytes fetched
through the reader's coalesced readahead (the prefetched requests themselves, no copy). What the
C path leaves (any other configuration, and every unusual record or image) goes through
``decode_into``, the Python path, which decodes it or raises its precise error.
"""

import time

import numpy as np

from ..errors import DECODE, SETTINGS, DecodeError, RecordFormatError
from ..io.format.header import unpack_header
from .labels import IdLabels, record_label
from .native import native_module, run_options

__all__ = ["RecordDecoder", "record_decoder"]

_MASK64 = (1 << 64) - 1


class RecordDecoder:
    """Decodes records of ``reader`` with ``decoder`` and ``augmenter`` (None: whole images);
    labels by ``label_width`` (ImageRecordIter's rules from the record header) or by
    ``label_rule(header, position)`` (e.g. an imglist's); random draws keyed by ``seed``."""

    def __init__(self, reader, decoder, augmenter=None, *, label_width=1, label_rule=None,
                 seed=0, channels=3):
        self.reader = reader
        self.decoder = decoder
        self.augmenter = augmenter
        self.label_width = label_width
        self.label_rule = label_rule
        self.seed = seed
        self.channels = channels
        self._batch = native_module()
        key = seed & ((1 << 128) - 1)
        self._key_lo, self._key_hi = key & _MASK64, key >> 64
        self._native = self._native_options()
        self._sums_by_position = None  # (crcs, known) per reader position, made on first use

    @property
    def native(self):
        """True when ``fill`` hands runs to ``recpipe._batch``."""
        return self._native is not None

    def _native_options(self):
        """``RunOptions`` when runs go to ``recpipe._batch`` (``native.run_options``, with
        labels from the record headers or an ``IdLabels`` table), else None. A local file's
        records are read by C; any other source's are handed over as windows of its bytes
        (``RecordReader.windows``)."""
        id_labels = isinstance(self.label_rule, IdLabels)
        if self._batch is None or (self.label_rule is not None and not id_labels):
            return None
        return run_options(self.augmenter, self.decoder, label_width=self.label_width,
                           id_labels=id_labels)

    # -- one sample, in Python ------------------------------------------------------------

    def image_bytes(self, position):
        """``(header, image)``: the record's ``IRHeader`` and a memoryview of its image."""
        payload = self.reader[position]
        header, start = unpack_header(payload, path=self.reader.url, record=position)
        return header, memoryview(payload)[start:]

    def label(self, header, position):
        """The record's label: a float32 scalar, or ``label_width`` float32 values. A
        RecordFormatError or DecodeError of ``label_rule`` is raised as a ``LabelError`` (the
        record is sound: it is not quarantined)."""
        return record_label(header, position, self.label_width, self.label_rule,
                            path=self.reader.url)

    def labels_of(self, positions):
        """The labels of the records at ``positions`` that read (a record whose bytes or
        header fail is left out: its error comes when it is decoded)."""
        labels = []
        for position in positions:
            try:
                header, _ = unpack_header(self.reader[position], path=self.reader.url,
                                          record=position)
            except (RecordFormatError, DecodeError):
                continue
            labels.append(record_label(header, position, self.label_width, self.label_rule,
                                       path=self.reader.url))
        return labels

    def decode_into(self, out, position, sample, epoch, clock=None):
        """Decode record ``position`` as sample ``sample`` of ``epoch`` into ``out`` (the
        augmenter's ``out_shape`` and dtype); returns its label. ``clock`` (a stats clock)
        is charged read, decode and augment time."""
        t0 = time.perf_counter()
        header, data = self.image_bytes(position)
        label = self.label(header, position)
        t1 = time.perf_counter()
        augmenter = self.augmenter
        try:
            plan = augmenter.plan(*self.decoder.size(data),
                                  augmenter.sample_rng(self.seed, epoch, sample))
            c1 = time.thread_time()
            img, window = augmenter.decode(self.decoder, data, plan)
            c2 = time.thread_time()
        except DecodeError as exc:
            raise self._decode_error(exc, data, position) from exc
        t2 = time.perf_counter()
        augmenter.apply(img, plan, out, window=window)
        if clock is not None:
            clock.released(c1, c2)  # libjpeg and the C writers run without the GIL
            clock.released(c2, time.thread_time())
            clock.add("read", t0, t1)
            clock.add("decode", t1, t2)
            clock.add("augment", t2, time.perf_counter())
            clock.samples += 1
        return label

    @property
    def _whole_decode(self):
        return f"{self.decoder.name} decode of the whole image"

    def _decode_error(self, exc, data, position):
        """The DecodeError of record ``position`` whose image ``data`` failed ``exc`` as the
        augmentation decodes it (a region, a DCT scale): whose fault it is, found here. A
        limit of the settings (``LimitError``) stays the settings'; else the whole image is
        decoded once more, with this loader's decoder: only when that fails too are the bytes
        at fault (``DECODE``, quarantined), otherwise the failure belongs to the way it was
        decoded (``SETTINGS``: never quarantined, the error says so)."""
        fault, detector, reason = exc.fault, exc.detector, exc.reason
        if fault is None:
            try:
                self.decoder.decode(data)
            except DecodeError as whole:
                fault = whole.fault or DECODE
                detector = whole.detector or self._whole_decode
            else:
                fault, detector = SETTINGS, f"{self.decoder.name} region/scaled decode"
                reason += (" (the whole image decodes: this crop or scale fails, the bytes "
                           "are not quarantined)")
        return DecodeError(reason, path=self.reader.url, record=position, fault=fault,
                           detector=detector)

    def decode(self, position, sample, epoch):
        """``(image, label)`` of one record: augmented into a new array, or the whole image
        (``channels``) without an augmenter."""
        if self.augmenter is None:
            header, data = self.image_bytes(position)
            label = self.label(header, position)
            try:
                return self.decoder.decode(data, channels=self.channels), label
            except DecodeError as exc:  # a whole decode: the bytes' fault unless a limit's
                raise DecodeError(exc.reason, path=self.reader.url, record=position,
                                  fault=exc.fault or DECODE,
                                  detector=exc.detector or self._whole_decode) from exc
        out = np.empty(self.augmenter.out_shape, dtype=self.augmenter.dtype)
        if self._native is None:
            return out, self.decode_into(out, position, sample, epoch)
        # a run of one through recpipe._batch (the Python path if C leaves it): same pixels
        labels = np.empty((1, self.label_width), dtype=np.float32)
        failures = self.fill(out[None], labels, (0,), (position,), (sample,), epoch)
        if failures:
            raise failures[0][1]
        return out, labels[0, 0] if self.label_width == 1 else labels[0]

    # -- a run of samples ---------------------------------------------------------------------

    def fill(self, images, labels, slots, positions, samples, epoch, clock=None, spans=None,
             windows=None):
        """Fill ``images[slot]``/``labels[slot]`` for each ``slot`` of ``slots`` from the record
        at the matching ``positions``, as sample ``samples`` (keys of the random draws).
        ``images``: the batch (C-contiguous, the augmenter's sample shape and dtype); ``labels``:
        float32 ``(batch,)`` or ``(batch, label_width)``. ``spans``: the records' ``(starts,
        ends)`` when the caller has them (``reader.spans(positions)``, e.g. computed once per
        batch); ``windows``: for a file that is not local, the records' bytes claimed from the
        reader's prefetch plan (``reader.claim_windows``, e.g. once per batch, with ``spans``).
        Returns ``[(slot, exception)]`` of the samples that failed, for the caller's
        error policy."""
        slots = np.asarray(slots, dtype=np.int64)
        positions = np.asarray(positions, dtype=np.int64)
        samples = np.asarray(samples, dtype=np.int64)
        left = range(len(slots))
        if (self._native is not None and len(slots) and images.flags.c_contiguous
                and labels.flags.c_contiguous and labels.dtype == np.float32):
            left = self._fill_native(images, labels, slots, positions, samples, epoch, clock,
                                     spans, windows)
        failures = []
        for i in left:
            slot = int(slots[i])
            try:
                labels[slot] = self.decode_into(images[slot], int(positions[i]),
                                                int(samples[i]), epoch, clock)
            except Exception as exc:  # noqa: BLE001 - the caller's error policy decides
                failures.append((slot, exc))
        return failures

    def _fill_native(self, images, labels, slots, positions, samples, epoch, clock, spans,
                     windows=None):
        """The C path over the run; returns the indices it left to the Python path."""
        t0 = time.perf_counter()
        source = self.reader.local_descriptor()
        if source is None and windows is not None and spans is not None:  # claimed already
            source, (starts, ends) = windows.windows(), spans
            if not source:
                return range(len(slots))
        elif source is None:  # not a local file: windows of its bytes, through the readahead
            source, starts, ends = self.reader.windows(positions)
            if not source:  # no record could be read here: the Python path reports why
                return range(len(slots))
        else:
            starts, ends = self.reader.spans(positions) if spans is None else spans
        sums, ends = self._expected_sums(positions, starts, ends)  # checked by C
        status = np.zeros(len(slots), dtype=np.uint8)
        c0 = time.thread_time()
        table = (self.label_rule.ids, self.label_rule.values) if self._native.id_labels else ()
        done = self._batch.fill(
            source, self.reader.size, starts, ends, samples, slots, images, labels, status,
            self._key_lo, self._key_hi, epoch & _MASK64, self._native, sums, *table)
        if clock is not None:
            clock.released(c0, time.thread_time())
            clock.add("decode", t0, time.perf_counter())
            clock.samples += done
        if done == len(slots):
            return ()
        return np.flatnonzero(status == 0).tolist()

    def _expected_sums(self, positions, starts, ends):
        """``(sums, ends)``: the CRC32C the sidecar expects for the records at ``positions``
        (uint32; empty without a sidecar), and ``ends`` where a record the sidecar does not list
        gets an empty span (a copy): the C path leaves it to the Python path, which raises its
        error."""
        if self.reader.sums is None:
            return b"", ends
        if self._sums_by_position is None:  # once: 5 bytes a record, then one gather a run
            self._sums_by_position = self.reader.sums.expected(self.reader.offsets.array)
        crcs, known = self._sums_by_position
        unknown = ~known[positions]
        if unknown.any():
            ends = np.where(unknown, starts, ends)
        return crcs[positions], ends


def record_decoder(options, reader, decoder, augmenter, label_rule=..., channels=3):
    """The ``RecordDecoder`` ``options`` ask for over ``reader`` (``label_rule``: the options'
    unless given): the loader's, ``recpipe.torch.RecordDataset``'s and ``recpipe.replay``'s,
    so that all apply the same settings."""
    rule = options.label_rule if label_rule is ... else label_rule
    return RecordDecoder(reader, decoder, augmenter, label_width=options.label_width,
                         seed=options.augment_seed, label_rule=rule, channels=channels)
