"""What the model gets: a record's draws under the recipe, and batch K of epoch E.

Both come from one ``ImageLoader`` built with the viewer's ``LoaderOptions`` (the recipe and the
loader keywords), created on first use and closed with the server, so the pixels are the
loader's own and not a re-implementation of them:

- a draw is one sample as an epoch delivers it: draw ``e`` of a record is
  ``loader.records.decode(position, sample, e)`` (the loader's ``RecordDecoder``, native run
  included), and its plan is the loader's planner on the same random stream
  (``augmenter.plan`` with ``augmenter.sample_rng(aug_seed, e, sample)``), so the crop box,
  flip, angle and colour factors shown are those that made the pixels;
- a batch is what iterating the loader delivers: ``loader.batch(epoch, index)``, the loader's
  public way to one batch (it resumes the epoch at that batch, as ``load_state_dict`` does,
  which yields exactly the batch an uninterrupted run would), so its records, order, seeds,
  rank split, quarantine, ``on_error`` handling and pixels are the loader's; ``recpipe replay``
  of a provenance line for that batch decodes the same records with the same
  ``RecordDecoder``. The loader keeps the batch plan of the latest epoch it planned, so asking
  for batch after batch of one epoch does not make its 17M-record permutation again each time.

Only the runtime settings that change no pixel are fixed here (threads, prefetch 1, no
lookahead, a wait of at most ``batch_wait`` for a sample), as ``recpipe.decode.provenance``
lists them.
"""

import math
import threading
from typing import Optional

import numpy as np

from ..decode.loader import ImageLoader
from ..io.format.layout import image_positions
from .pictures import viewable

__all__ = ["Busy", "ModelView", "plan_json"]

_COLOUR_OPS = ("brightness", "contrast", "saturation")


class Busy(RuntimeError):
    """The work asked for waits for other requests longer than the server allows."""


def plan_json(plan):
    """A ``SamplePlan`` as the page shows it: the crop box in source pixels, flip, rotation
    angle (from the affine matrix), colour factors in the order applied, and the rest."""
    out = {"source_size": list(plan.source_size), "resized_size": list(plan.resized_size),
           "work_size": list(plan.work_size),
           "crop_box": [round(float(v), 2) for v in plan.source_box],
           "crop": list(plan.crop), "resize_crop": bool(plan.resize_crop),
           "mirror": bool(plan.mirror), "inter": list(plan.inter),
           "colour": [{"op": _COLOUR_OPS[op] if 0 <= op < 3 else str(op),
                       "factor": round(float(alpha), 4)} for op, alpha in plan.colour],
           "hls": list(plan.hls) if plan.hls is not None else None,
           "pca": [round(float(v), 4) for v in plan.pca] if plan.pca is not None else None,
           "contrast": round(float(plan.contrast), 4),
           "illumination": round(float(plan.illumination), 4),
           "upscale": list(plan.upscale) if plan.upscale is not None else None,
           "angle": None, "affine": None}
    if plan.affine is not None:
        rows, size = plan.affine
        m = [float(v) for v in np.asarray(rows, dtype=np.float64).ravel()]
        out["affine"] = {"matrix": [round(v, 5) for v in m], "size": list(size)}
        out["angle"] = round(math.degrees(math.atan2(-m[3], m[4])), 2)
    return out


class ModelView:
    """The loader of the viewer's recipe over ``dataset`` (built on first use)."""

    def __init__(self, dataset, options, *, threads=2, batch_wait=60.0):
        self.dataset = dataset
        self.options = options.replace(threads=threads, prefetch=1, lookahead=False,
                                       provenance=None, trace=False,
                                       timeout=min(options.timeout, batch_wait))
        self.config = self.options.augment
        self.batch_wait = batch_wait
        self._loader: Optional[ImageLoader] = None
        self._samples = None
        self._open_lock = threading.Lock()
        self._batch_lock = threading.Lock()
        self._closed = False

    def loader(self) -> ImageLoader:
        with self._open_lock:
            if self._closed:
                raise RuntimeError("the viewer is closing")
            if self._loader is None:
                d = self.dataset
                loader = ImageLoader(d.url, index_url=d.reader.index_url or None,
                                     storage_options=d.storage_options,
                                     options=self.options)
                self._samples = image_positions(loader.reader, self.options.keys)
                self._loader = loader
            return self._loader

    def close(self):
        with self._open_lock:
            self._closed = True
            loader, self._loader = self._loader, None
        if loader is not None:
            with self._batch_lock:  # a batch being made finishes first
                loader.close()

    def describe(self) -> dict:
        """The recipe as the page lists it: batch settings and the augmentation keywords that
        differ from ImageRecordIter's defaults."""
        import dataclasses

        o, c = self.options, self.config
        changed = {f.name: getattr(c, f.name) for f in dataclasses.fields(c)
                   if getattr(c, f.name) != f.default}
        changed = {k: list(v) if isinstance(v, tuple) else v for k, v in changed.items()}
        return {"batch_size": o.batch_size, "seed": o.seed, "aug_seed": o.augment_seed,
                "shuffle": o.shuffle, "part_index": o.part_index, "num_parts": o.num_parts,
                "last_batch": o.last_batch, "on_error": o.on_error, "integrity": o.integrity,
                "dtype": c.dtype, "layout": c.layout, "augment": changed}

    # -- draws of one record ---------------------------------------------------------------

    def sample_of(self, position) -> int:
        """The sample number of the record at ``position`` (what keys its random stream);
        KeyError for a record the loader does not serve (InsightFace header/identity)."""
        self.loader()
        samples = self._samples
        if samples is None:
            return position
        found = np.flatnonzero(samples == position)
        if not len(found):
            raise KeyError(f"record {position} is not served by the loader (not one of its "
                           f"{len(samples)} image records)")
        return int(found[0])

    def plan(self, position, epoch):
        """The loader's ``SamplePlan`` for the record at ``position`` in ``epoch``."""
        loader = self.loader()
        sample = self.sample_of(position)
        _, data = loader.records.image_bytes(position)
        augmenter = loader.augmenter
        size = loader.decoder.size(data)
        return augmenter.plan(*size, augmenter.sample_rng(self.options.augment_seed, epoch,
                                                          sample))

    def draw(self, position, epoch):
        """``(picture, label, plan)``: the record as epoch ``epoch`` delivers it, made
        viewable (``pictures.viewable``), with its label and plan."""
        loader = self.loader()
        sample = self.sample_of(position)
        image, label = loader.records.decode(position, sample, epoch)
        plan = self.plan(position, epoch)
        return viewable(image, self.config), np.asarray(label).tolist(), plan

    # -- batch K of epoch E ---------------------------------------------------------------

    def batches(self) -> int:
        return len(self.loader())  # the same count on every epoch and part

    def batch(self, epoch, index):
        """``(images, labels, pad, positions)`` of batch ``index`` of ``epoch`` exactly as the
        loader delivers it (copies: the loader reuses its buffers). Raises the loader's error
        when it raises (``on_error='raise'`` and a bad record), KeyError for a batch that does
        not exist, Busy when another batch is being made for longer than ``batch_wait``."""
        loader = self.loader()
        if not 0 <= index < len(loader):
            raise KeyError(f"no batch {index}: an epoch has {len(loader)} batches "
                           f"(0..{len(loader) - 1}) of {self.options.batch_size}")
        if not self._batch_lock.acquire(timeout=self.batch_wait):
            raise Busy("another batch is being made; try again")
        try:
            if self._closed:
                raise RuntimeError("the viewer is closing")
            delivered = loader.batch(epoch, index)
            return (np.array(delivered.images), np.array(delivered.labels), delivered.pad,
                    np.array(delivered.positions, dtype=np.int64))
        finally:
            self._batch_lock.release()

