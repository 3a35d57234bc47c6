"""``replay(log, batch=N, epoch=E)``: a delivered batch again, from its provenance line.

The loader's line (``recpipe.decode.provenance``) names the file, the options, and the records
and sample numbers of the batch; the augmentation's random stream is keyed by the seed, the
sample number and the epoch (``recpipe.decode.augment.rng``), so decoding those records again
with those options gives the same pixels, bit for bit, whatever the thread count was. The file
is checked first (size, modification time, hash of its first 64 KiB): a changed file raises
``ValueError`` naming what changed (``check_file=False`` replays anyway).
"""

import json
import logging
from typing import Optional

import numpy as np

from .augment import Augmenter
from .decoders import get_decoder
from .epoch import Batch
from .provenance import (decode_indices, file_fingerprint, fingerprint_digest,
                         options_from_json)
from .records import RecordDecoder

__all__ = ["replay", "find_batch"]

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
            if entry.get("kind") == "loader":
                loaders[(entry["options"], entry["file"])] = entry
            else:
                batches.append(entry)
    return loaders, batches


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


def _check_file(loader_line, storage_options):
    now = file_fingerprint(loader_line["url"], loader_line["index_url"], storage_options)
    if fingerprint_digest(now) == loader_line["file"]:
        return
    then = loader_line["file_parts"]
    changes = [f"{name} {field}: {then[name][field]!r} then, {now[name][field]!r} now"
               for name in then for field in ("size", "mtime", "head")
               if name in now and then[name][field] != now[name][field]]
    raise ValueError(f"{loader_line['url']} changed since the batch was logged ("
                     f"{'; '.join(changes) or 'index added or removed'}): the replay would not "
                     "be that batch (check_file=False replays anyway)")


def replay(path, batch: int, epoch: Optional[int] = None, *, options: Optional[str] = None,
           storage_options: Optional[dict] = None, check_file: bool = True) -> Batch:
    """The images and labels of batch ``batch`` of ``epoch`` as the loader delivered them, from
    provenance log ``path``: a ``Batch`` (``images, labels``, ``pad``, ``positions``).

    ``epoch`` None: the last epoch that logged that batch; ``options``: the options digest of
    one loader when several logged it; ``storage_options`` for a remote file (never logged).
    Raises ValueError when the file changed since (unless ``check_file=False``) and any
    decode error as the loader would have."""
    from ..io.reader import RecordReader

    loader_line, entry = find_batch(path, batch, epoch, options)
    if check_file:
        _check_file(loader_line, storage_options)
    o = options_from_json(loader_line["loader_options"])
    positions = decode_indices(entry["positions"])
    samples = decode_indices(entry["samples"]) if "samples" in entry else positions
    augmenter = Augmenter(o.augment)
    decoder = get_decoder(o.decoder, fast_dct=o.fast_dct, fast_upsample=o.fast_upsample,
                          max_pixels=o.max_pixels)
    with RecordReader(loader_line["url"], loader_line["index_url"] or False,
                      storage_options) as reader:
        records = RecordDecoder(reader, decoder, augmenter, label_width=o.label_width,
                                seed=o.augment_seed)
        images = np.empty((len(positions),) + augmenter.out_shape, dtype=augmenter.dtype)
        labels = np.zeros((len(positions),) if o.label_width == 1
                          else (len(positions), o.label_width), dtype=np.float32)
        failures = records.fill(images, labels, np.arange(len(positions)), positions, samples,
                                entry["epoch"])
    if failures:
        raise failures[0][1]
    return Batch(images, labels, entry["pad"], positions)
