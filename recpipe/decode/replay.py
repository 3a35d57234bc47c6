"""``replay(log, batch=N, epoch=E)``: a delivered batch again, from its provenance line.

The loader's line (``recpipe.decode.provenance``) names the file, the options, and the records
and sample numbers of the batch; the augmentation's random stream is keyed by the seed, the
sample number and the epoch (``recpipe.decode.augment.rng``), so decoding those records again
with those options gives the same pixels, bit for bit, whatever the thread count was. The file
is found by its logged absolute URL (from any working folder), or given as ``rec=`` (a moved or
copied file; ``recpipe replay --rec``), and checked first to be the logged file (size, hashes
of its first and last 64 KiB, digest of its ``.sums``): another or a changed file raises
``ValueError`` naming what differs (``check_file=False`` replays anyway).
"""

import json
import logging
import os
from typing import Optional

import numpy as np

from ..io.format.header import unpack_header
from ..io.sidecars.index import resolve_index_url
from ..io.sources import exists
from .augment import Augmenter
from .decoders import available_decoders
from .epoch import Batch
from .labels import IdLabels, header_labels
from .records import record_decoder
from .options import decoder_for
from .provenance import (absolute_url, decode_indices, decode_labels, file_fingerprint,
                         identity_changes, options_from_json)

__all__ = ["batch_records", "check_identity", "find_batch", "locate_files", "replay"]

log = logging.getLogger(__name__)


def _read_lines(path):
    loaders, batches = {}, []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                log.warning("%s: line %d is not JSON (a write cut short?), ignored", path, number)
                continue
            if not isinstance(entry, dict) or not _has_keys(entry):
                log.warning("%s: line %d is not a provenance line, ignored", path, number)
            elif entry.get("kind") == "loader":
                loaders[(entry["options"], entry["file"])] = entry
            else:
                batches.append(entry)
    return loaders, batches


def _has_keys(entry):
    needed = ("options", "file", "url", "loader_options") if entry.get("kind") == "loader" \
        else ("options", "file", "epoch", "batch", "positions")
    return all(key in entry for key in needed)


def find_batch(path, batch, epoch=None, options=None):
    """``(loader line, batch line)`` of batch ``batch`` of ``epoch`` (None: the last logged
    one) in provenance log ``path``; ``options`` (an options digest) picks among loaders that
    logged the same batch (e.g. the ranks of a run writing one log)."""
    loaders, batches = _read_lines(path)
    found = [b for b in batches if b["batch"] == batch
             and (epoch is None or b["epoch"] == epoch)
             and (options is None or b["options"] == options)]
    if not found:
        where = f"epoch {epoch}" if epoch is not None else "any epoch"
        raise ValueError(f"{path}: no line for batch {batch} of {where}")
    if epoch is None:
        last_epoch = found[-1]["epoch"]
        found = [b for b in found if b["epoch"] == last_epoch]
    if len({b["options"] for b in found}) > 1:
        raise ValueError(f"{path}: batch {batch} was logged by loaders with different options "
                         f"({sorted({b['options'] for b in found})}): choose one with options=")
    entry = found[-1]
    key = (entry["options"], entry["file"])
    if key not in loaders:
        raise ValueError(f"{path}: no loader line for options {key[0]} and file {key[1]}")
    return loaders[key], entry


def locate_files(loader_line, log_path, rec=None, index=None, storage_options=None):
    """``(rec_url, index_url or None)`` to replay a loader line from: ``rec``/``index`` when
    given (a moved or copied file; its ``.idx`` beside it unless ``index`` is given), else the
    logged URLs (absolute; a log written before they were, with a relative path, is also
    looked up from the log's folder). FileNotFoundError saying to pass ``rec=`` when the file
    is not there."""
    logged_index = loader_line.get("index_url")
    if rec is not None:
        rec_url = str(rec)
        index_url = resolve_index_url(rec_url, index, storage_options)
        if logged_index and not index_url:
            raise FileNotFoundError(
                f"the batch was logged with the index {logged_index}; there is none beside "
                f"{rec_url}: pass index= (--idx) with its .idx")
        return rec_url, index_url if logged_index else None
    rec_url = _logged_path(loader_line["url"], log_path, storage_options)
    index_url = index if index is not None else logged_index
    if index_url and index is None:
        index_url = _logged_path(index_url, log_path, storage_options)
    if not exists(rec_url, storage_options):
        raise FileNotFoundError(
            f"{rec_url} (logged by {log_path}) is not there: pass rec= (recpipe replay --rec) "
            "with where the file is now; it is checked to be the same file")
    return rec_url, index_url or None


def _logged_path(url, log_path, storage_options):
    """A logged URL; a relative local path (logs written before URLs were made absolute) that
    does not exist from here is taken from the log's folder when it exists there."""
    if "://" in url or os.path.isabs(url) or exists(url, storage_options):
        return url
    beside = os.path.join(os.path.dirname(os.path.abspath(log_path)), url)
    return beside if os.path.exists(beside) else url


def check_identity(loader_line, rec_url, index_url, storage_options=None):
    """ValueError unless ``rec_url`` (and ``index_url``) are the files the loader line was
    logged from: same size, same first and last 64 KiB, same ``.sums`` digest when both have
    one (``provenance.file_fingerprint``)."""
    now = file_fingerprint(rec_url, index_url, storage_options)
    then = loader_line["file_parts"]
    changes = identity_changes(then, now)
    if not changes:
        return
    logged = then["rec"]["url"]
    moved = now["rec"]["url"] != absolute_url(logged, storage_options)
    what = (f"{rec_url} is not the file the batch was logged from ({logged})" if moved
            else f"{rec_url} changed since the batch was logged")
    raise ValueError(f"{what}: {'; '.join(changes)}. The replay would not be that batch "
                     "(check_file=False / --no-check replays anyway)")


def replay(path, batch: int, epoch: Optional[int] = None, *, options: Optional[str] = None,
           storage_options: Optional[dict] = None, check_file: bool = True,
           rec: Optional[str] = None, index: Optional[str] = None) -> Batch:
    """The images and labels of batch ``batch`` of ``epoch`` as the loader delivered them, from
    provenance log ``path``: a ``Batch`` (``images, labels``, ``pad``, ``positions``).

    Every option the loader line records is applied as the loader applied it: the
    augmentation, the decoder backend (``"auto"`` as it resolved then), its pixel and scan
    limits, ``integrity``, ``label_width``; labels the loader took from a ``label_rule`` come
    from the batch line. ``epoch`` None: the last epoch that logged that batch; ``options``:
    the options digest of one loader when several logged it; ``storage_options`` for a remote
    file (never logged). The file is the logged one (an absolute URL: any working folder
    will do) or ``rec`` (a moved or copied ``.rec``; its ``.idx`` beside it, or ``index``),
    checked to be the same file (size, first and last 64 KiB, ``.sums`` digest). Raises
    ValueError when it is not (unless ``check_file=False``) or the line is damaged,
    FileNotFoundError when the file is not there, and any decode error as the loader would
    have."""
    from ..io.reader import RecordReader

    loader_line, entry = find_batch(path, batch, epoch, options)
    rec_url, index_url = locate_files(loader_line, path, rec, index, storage_options)
    if check_file:
        check_identity(loader_line, rec_url, index_url, storage_options)
    o = options_from_json(loader_line["loader_options"])
    positions, samples = batch_records(entry, path)
    augmenter = Augmenter(o.augment)
    decoder = decoder_for(o.replace(decoder=_backend(o, loader_line)))
    with RecordReader(rec_url, index_url or False, storage_options, integrity=o.integrity,
                      note_unprotected=True) as reader:
        _check_positions(positions, reader, f"{path}: epoch {entry['epoch']} batch {batch}")
        logged = _logged_labels(loader_line, entry, len(positions), o.label_width, path)
        rule = _replay_rule(loader_line, logged is not None, reader, positions, o.label_width)
        records = record_decoder(o, reader, decoder, augmenter, label_rule=rule)
        images = np.empty((len(positions),) + augmenter.out_shape, dtype=augmenter.dtype)
        labels = np.zeros((len(positions),) if o.label_width == 1
                          else (len(positions), o.label_width), dtype=np.float32)
        failures = records.fill(images, labels, np.arange(len(positions)), positions, samples,
                                entry["epoch"])
    if failures:
        raise failures[0][1]
    return Batch(images, labels if logged is None else logged, entry["pad"], positions)


def batch_records(entry, path="the log"):
    """``(positions, samples)`` of a batch line, checked: ValueError naming the line when they
    are not valid index arrays of the same length as the batch."""
    where = f"{path}: epoch {entry.get('epoch')} batch {entry.get('batch')}"
    try:
        positions = decode_indices(entry["positions"])
        samples = decode_indices(entry["samples"]) if "samples" in entry else positions
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{where}: damaged record list ({exc})") from None
    if len(samples) != len(positions):
        raise ValueError(f"{where}: {len(samples)} sample numbers for {len(positions)} records")
    pad = entry.get("pad", 0)
    if isinstance(pad, bool) or not isinstance(pad, int) or not 0 <= pad <= len(positions):
        raise ValueError(f"{where}: pad={pad!r} for a batch of {len(positions)} records")
    return positions, samples


def _check_positions(positions, reader, where):
    """ValueError naming the first position past the file's last record."""
    if len(positions) and positions.max() >= len(reader):
        raise ValueError(f"{where}: record {int(positions.max())} is past the last record of "
                         f"{reader.url} ({len(reader)} records)")


def _backend(o, loader_line):
    """The decoder backend to replay with: ``"auto"`` as it resolved for the loader when that
    backend is available here (another one may differ in the last bit of a pixel)."""
    resolved = loader_line.get("decoder")
    if o.decoder != "auto" or resolved is None:
        return o.decoder
    if resolved in available_decoders():
        return resolved
    log.warning("the loader decoded with %s, not available here: replaying with %s (pixels "
                "may differ slightly)", resolved, available_decoders()[0])
    return "auto"


def _logged_labels(loader_line, entry, count, label_width, path):
    """The labels a batch line carries (the loader had a ``label_rule``), else None."""
    if loader_line.get("label_rule") is None:
        return None
    where = f"{path}: epoch {entry.get('epoch')} batch {entry.get('batch')}"
    if "labels" not in entry:
        raise ValueError(f"{where}: the loader took its labels from {loader_line['label_rule']}"
                         " but the line does not hold them")
    try:
        return decode_labels(entry["labels"], count, label_width)
    except ValueError as exc:
        raise ValueError(f"{where}: damaged labels ({exc})") from None


def _replay_rule(loader_line, labels_logged, reader, positions, label_width):
    """The ``label_rule`` to decode with. Labels from the line: a rule that only lets the
    records through (an id table when the loader's runs went to ``recpipe._batch``, which takes
    id tables, so that the pixels come from the same path). Labels from the headers: none, or
    the header rule itself when the loader decoded in Python (to stay on that path)."""
    native = loader_line.get("native")
    if labels_logged:
        if native:
            ids = {unpack_header(reader[int(p)], path=reader.url, record=int(p))[0].id
                   for p in np.unique(positions)}
            zero = np.float32(0) if label_width == 1 else np.zeros(label_width, np.float32)
            return IdLabels(dict.fromkeys(ids, zero), label_width, source="the provenance log",
                            path=reader.url)
        return _AnyLabel(label_width)
    if native is False:
        return _HeaderLabels(label_width, reader.url)
    return None


class _AnyLabel:
    """A label rule giving zeros (the real labels come from the provenance line)."""

    def __init__(self, label_width):
        self.zero = np.float32(0) if label_width == 1 else np.zeros(label_width, np.float32)

    def __call__(self, header, position):
        return self.zero


class _HeaderLabels:
    """ImageRecordIter's header labels as a label rule (keeps ``fill`` on the Python path)."""

    def __init__(self, label_width, url):
        self.label_width = label_width
        self.url = url

    def __call__(self, header, position):
        return header_labels(header, self.label_width, path=self.url, record=position)
