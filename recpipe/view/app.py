"""The viewer's routes: what each URL answers, with the limits every request is held to.

``App`` joins the parts (``Dataset``, ``ModelView``, ``LabelIndex``, ``Health``, the ``Job``s)
and answers ``respond(method, path, query, headers)`` with a ``server.Response``. URLs never name
files: the routes are a fixed table of patterns with numeric fields, and the page's own files
are a fixed set of package files read at start, so no request can reach another file.

Limits (``Limits``): page lengths, thumbnail and picture sizes, draws per record and epoch
numbers are bounded (a larger value is a 400 naming the limit); decoding work runs under one
semaphore of ``decode_slots`` places and a request waits at most ``decode_wait`` seconds for one
(then 503); caches of thumbnails, pictures and batches are bounded in bytes or entries.
"""

import collections
import io
import re
import threading
from dataclasses import dataclass
from importlib import resources
from typing import Optional

import numpy as np

from .. import errors
from ..decode.decoders import get_decoder
from ..errors import DecodeError, LabelError, RecordFormatError
from ..system.host import node_share
from .dataset import NotAnImage, record_error
from .health import Health
from .jobs import Job, verify_job
from .labels import LabelIndex
from .model import Busy, plan_json
from .pictures import jpeg_bytes, png_bytes, thumbnail, viewable
from .server import HttpError, Response, json_response

__all__ = ["App", "Limits", "STATIC_FILES"]

STATIC_FILES = {"app.js": "text/javascript; charset=utf-8",
                "style.css": "text/css; charset=utf-8",
                "index.html": "text/html; charset=utf-8"}
_RECORD_ERRORS = (RecordFormatError, DecodeError, NotAnImage)
_MAX_EPOCH = (1 << 31) - 1


@dataclass(frozen=True)
class Limits:
    """What one request may ask for, and the server's shared budgets."""

    page: int = 200                # records per page
    page_default: int = 48
    thumb: int = 512               # thumbnail box, pixels
    thumb_default: int = 128
    picture: int = 2048            # a record's picture, longer side
    picture_default: int = 768
    draws: int = 32                # draws of one record
    draws_default: int = 8
    decode_slots: int = 0          # concurrent decodes (0: two per usable core)
    decode_wait: float = 20.0      # seconds a request waits for a decode slot
    cache_bytes: int = 96 << 20    # thumbnails and pictures kept
    batches_kept: int = 2
    auto_summary_bytes: int = 1 << 30  # the page starts the summary by itself below this size

    def __post_init__(self):
        for name in ("page", "page_default", "thumb", "thumb_default", "picture",
                     "picture_default", "draws", "draws_default", "batches_kept"):
            if getattr(self, name) < 1:
                raise ValueError(f"Limits.{name} must be at least 1")
        if self.decode_wait <= 0:
            raise ValueError("Limits.decode_wait must be positive")


class ByteCache:
    """A thread-safe LRU of ``key -> bytes`` (or small error dicts) bounded in bytes."""

    def __init__(self, limit):
        self.limit = limit
        self._items: "collections.OrderedDict" = collections.OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key, value):
        size = len(value) if isinstance(value, (bytes, bytearray)) else 512
        if size > self.limit:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= len(old) if isinstance(old, (bytes, bytearray)) else 512
            self._items[key] = value
            self._bytes += size
            while self._bytes > self.limit:
                _, dropped = self._items.popitem(last=False)
                self._bytes -= len(dropped) if isinstance(dropped, (bytes, bytearray)) else 512


def _static_files():
    folder = resources.files("recpipe.view") / "static"
    return {name: (folder / name).read_bytes() for name in STATIC_FILES}


class App:
    """Answers the viewer's requests over ``dataset`` with ``model`` (a ``ModelView``).

    ``summary_target(url, storage_options, progress)`` makes the text of the summary panel in
    a child process (the CLI passes ``recpipe inspect``'s own printing); None: no summary."""

    def __init__(self, dataset, model, *, limits: Optional[Limits] = None,
                 summary_target=None):
        self.dataset = dataset
        self.model = model
        self.limits = limits = limits or Limits()
        self.decoder = get_decoder("auto", integrity="strict")  # damaged: an error, not pixels
        self.labels = LabelIndex(dataset)
        self.health = Health(dataset)
        common = {"url": dataset.url, "storage_options": dataset.storage_options}
        size = dataset.reader.size
        self.jobs = {"verify": Job("verify", verify_job, {**common, "decode": False}, size)}
        if summary_target is not None:
            self.jobs["summary"] = Job("summary", summary_target, common, size)
        slots = limits.decode_slots or 2 * node_share()[0]
        self._slots = threading.BoundedSemaphore(max(1, slots))
        self._pictures = ByteCache(limits.cache_bytes)
        self._batches: "collections.OrderedDict" = collections.OrderedDict()
        self._batches_lock = threading.Lock()
        self._static = _static_files()
        self._verify_taken = None
        self._routes = [
            ("GET", r"/", self._index),
            ("GET", r"/static/(app\.js|style\.css)", self._static_file),
            ("GET", r"/favicon\.ico", lambda q: Response(204, "image/x-icon", b"")),
            ("GET", r"/api/info", self._info),
            ("GET", r"/api/page", self._page),
            ("GET", r"/api/find", self._find),
            ("GET", r"/api/record/(\d{1,19})", self._record),
            ("GET", r"/api/labels", self._labels),
            ("GET", r"/api/health", self._health),
            ("GET", r"/api/jobs/(summary|verify)", self._job_state),
            ("POST", r"/api/jobs/(summary|verify)", self._job_start),
            ("GET", r"/thumb/(\d{1,19})\.jpg", self._thumb),
            ("GET", r"/picture/(\d{1,19})\.png", self._picture),
            ("GET", r"/api/draws/(\d{1,19})", self._draws),
            ("GET", r"/draw/(\d{1,19})/(\d{1,19})\.png", self._draw),
            ("GET", r"/api/batch/(\d{1,19})/(\d{1,19})", self._batch),
            ("GET", r"/batch/(\d{1,19})/(\d{1,19})/(\d{1,19})\.png", self._batch_png),
            ("GET", r"/batch/(\d{1,19})/(\d{1,19})\.npy", self._batch_npy),
        ]
        self._routes = [(m, re.compile(p + r"\Z"), f) for m, p, f in self._routes]

    def close(self):
        """Stop the jobs and the label scan, close the loader and the file."""
        for job in self.jobs.values():
            job.close()
        self.labels.close()
        self.model.close()
        self.dataset.close()

    # -- dispatch --------------------------------------------------------------------------

    def respond(self, method, path, query, headers=None):
        allowed = set()
        for route_method, pattern, function in self._routes:
            found = pattern.match(path)
            if found is None:
                continue
            if route_method != method:
                allowed.add(route_method)
                continue
            try:
                return function(query, *found.groups())
            except HttpError:
                raise
            except KeyError as exc:
                raise HttpError(404, _message(exc)) from None
            except Busy as exc:
                raise HttpError(503, str(exc)) from None
            except FileNotFoundError as exc:
                raise HttpError(410, f"{self.dataset.url} is gone: {exc}") from None
        if allowed:
            raise HttpError(405, f"{path} answers {', '.join(sorted(allowed))} only")
        raise HttpError(404, f"no page at {path[:200]}: the viewer's pages are under /")

    def _slot(self):
        return _Slot(self._slots, self.limits.decode_wait)

    def _cached(self, body, content_type, query):
        fresh = query.get("v") == self.dataset.token
        headers = {"Cache-Control": "private, max-age=86400" if fresh else "no-store"}
        return Response(200, content_type, body, headers)

    def _position(self, text):
        return self.dataset.check_position(int(text))

    # -- the page's files ------------------------------------------------------------------

    def _index(self, query):
        return Response(200, STATIC_FILES["index.html"], self._static["index.html"],
                        {"Cache-Control": "no-cache"})

    def _static_file(self, query, name):
        return Response(200, STATIC_FILES[name], self._static[name], {"Cache-Control": "no-cache"})

    # -- the file --------------------------------------------------------------------------

    def _info(self, query):
        d, layout = self.dataset, self.dataset.layout
        face = None if layout is None else {
            "images": layout.images, "identities": layout.identities,
            "image_keys": [1, layout.first_identity],
            "identity_keys": [layout.first_identity, layout.end_identity]}
        return json_response({
            "url": d.url, "token": d.token, "records": len(d), "bytes": d.reader.size,
            "index_url": d.reader.index_url, "sums": d.reader.sums is not None,
            "layout": face, "recipe": self.model.describe(), "decoder": self.decoder.name,
            "jobs": sorted(self.jobs),
            "limits": {"page": self.limits.page, "page_default": self.limits.page_default,
                       "thumb": self.limits.thumb, "thumb_default": self.limits.thumb_default,
                       "picture": self.limits.picture,
                       "picture_default": self.limits.picture_default,
                       "draws": self.limits.draws, "draws_default": self.limits.draws_default,
                       "auto_summary_bytes": self.limits.auto_summary_bytes}})

    def _page(self, query):
        order = query.get("order", "record")
        start = _int(query, "start", 0, 0, 1 << 62)
        count = _int(query, "count", self.limits.page_default, 1, self.limits.page)
        groups = None
        if order == "record":
            total = len(self.dataset)
            positions = np.arange(min(start, total), min(total, start + count), dtype=np.int64)
        elif order == "label":
            if not self._labels_ready():
                return json_response({"order": order, "pending": self.labels.state()}, 202)
            positions, groups, total = self.labels.page(start, count)
        else:
            raise HttpError(400, f"order={order!r}: expected 'record' or 'label'")
        records = self._facts(positions)
        if groups is not None:
            for record, group in zip(records, groups.tolist()):
                record["group"] = None if group != group else group  # NaN: unreadable
        return json_response({"order": order, "start": start, "count": count, "total": total,
                              "of": "identity" if self.dataset.layout is not None else "label",
                              "records": records})

    def _labels_ready(self):
        """True when the by-label order is there; else start it (a 503 naming why when it
        failed: it is not tried again)."""
        if self.labels.ready:
            return True
        state = self.labels.state()
        if state["state"] == "failed":
            raise HttpError(503, f"the by-label order is not available: {state['error']}")
        self.labels.start()
        return False

    def _facts(self, positions):
        reader = self.dataset.reader
        plan = reader.prefetch(positions)  # a remote file: one coalesced fetch for the page
        try:
            records = [self.dataset.facts(int(p)) for p in positions]
        finally:
            plan.cancel()
        offsets = [r["offset"] for r in records]
        for record in records:
            if "error" in record and record["error"]["kind"] != "not-image":
                self.health.saw(record["position"], record["error"])
        marks = self.health.marks([r["position"] for r in records], offsets)
        for record in records:
            record["marks"] = marks.get(record["position"], [])
        return records

    def _find(self, query):
        text = (query.get("q") or "").strip()
        if not text:
            raise HttpError(400, "nothing to find: give a key, #position or label:N")
        if text.startswith("#") or text.lower().startswith("pos:"):
            number = text[1:] if text.startswith("#") else text[4:]
            try:
                position = self.dataset.check_position(int(number))
            except ValueError:
                raise HttpError(400, f"{text!r}: a position is a whole number, e.g. #42") \
                    from None
            return json_response({"order": "record", "position": position, "index": position})
        if text.lower().startswith(("label:", "id:")):
            value = text.split(":", 1)[1]
            try:
                label = float(value)
            except ValueError:
                raise HttpError(400, f"{text!r}: a label is a number, e.g. label:3") from None
            if not self._labels_ready():
                return json_response({"order": "label", "pending": self.labels.state()}, 202)
            index = self.labels.first_of(label)
            positions, _, _ = self.labels.page(index, 1)
            return json_response({"order": "label", "index": index,
                                  "position": int(positions[0])})
        position = self.dataset.position_of_key(text)
        return json_response({"order": "record", "position": position, "index": position})

    def _record(self, query, position):
        position = self._position(position)
        facts = self._facts([position])[0]
        facts["sample"] = None
        if facts["role"] == "image" and "error" not in facts:
            try:
                facts["sample"] = self.model.sample_of(position)
            except KeyError:
                pass
        return json_response(facts)

    def _labels(self, query):
        if query.get("start") == "1":
            self.labels.start()
        return json_response(self.labels.state())

    def _health(self, query):
        self._job("verify")
        return json_response(self.health.listing())

    def _job_state(self, query, name):
        if name not in self.jobs:
            raise HttpError(404, f"no {name} job here")
        return json_response(self._job(name))

    def _job(self, name):
        """The state of job ``name``; a finished verify's problems go to ``health``."""
        state = self.jobs[name].state()
        if name == "verify" and state["state"] == "done" and \
                state["result"] is not self._verify_taken:
            self.health.took_verify(state["result"])
            self._verify_taken = state["result"]
        return state

    def _job_start(self, query, name):
        if name not in self.jobs:
            raise HttpError(404, f"no {name} job here")
        changes = {"decode": query.get("decode") == "1"} if name == "verify" else {}
        started = self.jobs[name].start(**changes)
        return json_response({"started": started, **self.jobs[name].state()},
                             202 if started else 200)

    # -- pictures of records -----------------------------------------------------------------

    def _record_picture(self, position, box):
        """An RGB picture of the record's image fitting ``box`` (DCT-scaled decode); a
        record's error as a 422 naming it."""
        try:
            _, data = self.dataset.image_bytes(position)
            with self._slot():
                try:
                    return thumbnail(self.decoder, data, box)
                except DecodeError as exc:  # say which record, as the loaders do
                    raise _located(exc, self.dataset.url, position) from exc
        except _RECORD_ERRORS as exc:
            error = record_error(exc)
            if not isinstance(exc, NotAnImage):
                self.health.saw(position, error)
            raise HttpError(422, error["error"], **error) from None

    def _thumb(self, query, position):
        position = self._position(position)
        box = _int(query, "size", self.limits.thumb_default, 16, self.limits.thumb)
        key = ("thumb", position, box)
        body = self._pictures.get(key)
        if body is None:
            body = jpeg_bytes(self._record_picture(position, box), 85)
            self._pictures.put(key, body)
        return self._cached(body, "image/jpeg", query)

    def _picture(self, query, position):
        position = self._position(position)
        box = _int(query, "max", self.limits.picture_default, 16, self.limits.picture)
        key = ("picture", position, box)
        body = self._pictures.get(key)
        if body is None:
            body = png_bytes(self._record_picture(position, box))
            self._pictures.put(key, body)
        return self._cached(body, "image/png", query)

    # -- what the model gets -----------------------------------------------------------------

    def _model_error(self, exc):
        error = record_error(exc)
        position = error.get("record")
        if isinstance(position, int) and not isinstance(exc, (NotAnImage, LabelError)):
            self.health.saw(position, error)
        return HttpError(422, error["error"], **error)

    def _draws(self, query, position):
        position = self._position(position)
        count = _int(query, "n", self.limits.draws_default, 1, self.limits.draws)
        first = _int(query, "epoch", 0, 0, _MAX_EPOCH - count)
        try:
            self.dataset.image_bytes(position)  # not an image: NotAnImage, before the loader
            sample = self.model.sample_of(position)
            draws = [{"epoch": e, "plan": plan_json(self.model.plan(position, e)),
                      "url": f"/draw/{position}/{e}.png?v={self.dataset.token}"}
                     for e in range(first, first + count)]
        except _RECORD_ERRORS as exc:
            raise self._model_error(exc) from None
        config = self.model.config
        return json_response({"position": position, "sample": sample, "draws": draws,
                              "shape": list(config.data_shape), "dtype": config.dtype,
                              "layout": config.layout})

    def _draw(self, query, position, epoch):
        position = self._position(position)
        epoch = _bounded(epoch, "epoch", 0, _MAX_EPOCH)
        key = ("draw", position, epoch)
        body = self._pictures.get(key)
        if body is None:
            try:
                with self._slot():
                    picture, _, _ = self.model.draw(position, epoch)
            except _RECORD_ERRORS as exc:
                raise self._model_error(exc) from None
            body = png_bytes(picture)
            self._pictures.put(key, body)
        return self._cached(body, "image/png", query)

    def _delivered(self, epoch, index):
        """``(images, labels, pad, positions)`` of a batch, from the cache or the loader."""
        epoch = _bounded(epoch, "epoch", 0, _MAX_EPOCH)
        index = _bounded(index, "batch", 0, 1 << 40)
        with self._batches_lock:
            if (epoch, index) in self._batches:
                self._batches.move_to_end((epoch, index))
                return self._batches[(epoch, index)]
        try:
            batch = self.model.batch(epoch, index)
        except _RECORD_ERRORS as exc:
            raise self._model_error(exc) from None
        with self._batches_lock:
            self._batches[(epoch, index)] = batch
            while len(self._batches) > self.limits.batches_kept:
                self._batches.popitem(last=False)
        return batch

    def _batch(self, query, epoch, index):
        images, labels, pad, positions = self._delivered(epoch, index)
        epoch, index, token = int(epoch), int(index), self.dataset.token
        keys = [self.dataset.key_of(int(p)) for p in positions]
        return json_response({
            "epoch": epoch, "batch": index, "batches": self.model.batches(),
            "size": len(images), "pad": pad, "positions": positions.tolist(), "keys": keys,
            "labels": labels.tolist(), "shape": list(images.shape), "dtype": str(images.dtype),
            "images": [f"/batch/{epoch}/{index}/{slot}.png?v={token}"
                       for slot in range(len(images))],
            "npy": f"/batch/{epoch}/{index}.npy?v={token}", "recipe": self.model.describe()})

    def _batch_png(self, query, epoch, index, slot):
        images = self._delivered(epoch, index)[0]
        slot = _bounded(slot, "slot", 0, len(images) - 1)
        return self._cached(png_bytes(viewable(images[slot], self.model.config)), "image/png",
                            query)

    def _batch_npy(self, query, epoch, index):
        images = self._delivered(epoch, index)[0]
        out = io.BytesIO()
        np.save(out, images, allow_pickle=False)
        return self._cached(out.getvalue(), "application/octet-stream", query)


class _Slot:
    """``with`` a place of the decode semaphore, or 503 after ``wait`` seconds."""

    def __init__(self, semaphore, wait):
        self.semaphore, self.wait = semaphore, wait

    def __enter__(self):
        if not self.semaphore.acquire(timeout=self.wait):
            raise HttpError(503, "the viewer is busy decoding: try again",
                            retry_after=1)
        return self

    def __exit__(self, *exc):
        self.semaphore.release()


def _located(exc, path, record):
    """The decoder's DecodeError ``exc`` naming ``path`` and ``record``, its other attributes
    kept; where errors say whose fault they are (``fault``), a failed whole-image decode is the
    record's bytes' (``errors.DECODE``) unless the decoder said otherwise (a limit)."""
    located = DecodeError(exc.reason, path=path, record=record)
    for name, value in vars(exc).items():
        if name not in ("reason", "path", "record", "args"):
            setattr(located, name, value)
    decode_fault = getattr(errors, "DECODE", None)
    if decode_fault is not None and getattr(located, "fault", None) is None:
        located.fault = decode_fault
    return located


def _message(exc):
    return exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)


def _bounded(text, name, low, high):
    value = int(text)
    if not low <= value <= high:
        raise HttpError(400 if value < low or name != "slot" else 404,
                        f"{name}={value} is outside {low}..{high}")
    return value


def _int(query, name, default, low, high):
    """Query field ``name`` as an int in ``low..high`` (``default`` when absent); 400 else."""
    text = query.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise HttpError(400, f"{name}={text[:40]!r} is not a whole number") from None
    if not low <= value <= high:
        raise HttpError(400, f"{name}={value} is outside {low}..{high} (the limit for one "
                             "request)")
    return value
