"""Provenance: one JSON line per delivered batch, enough to rebuild that batch exactly.

``ImageLoader(..., provenance=PATH)`` appends to PATH (JSON lines, one ``write`` each, flushed):

- once per loader, before its first batch, a ``"loader"`` line: the ``.rec``/``.idx`` URLs
  (a local path made absolute; ``url_given`` keeps it as typed), the options
  (``LoaderOptions`` as JSON, without ``keys``), ``decoder`` (the backend ``"auto"`` resolved
  to), ``native`` (whether runs went to ``recpipe._batch``), ``label_rule`` (a description
  of the loader's label rule, or null), ``options`` (a digest of what changes pixels, labels
  or record selection: threads, prefetch, timeout... are left out) and ``file`` (a digest of
  the files' identity, the parts themselves under ``file_parts``: for the ``.rec`` and the
  ``.idx`` the size and hashes of the first and last 64 KiB, for the ``.rec`` also a digest
  of its ``.sums`` sidecar when there is one; a few range reads, never the whole file, and
  the same for a copy: ``recpipe.replay(..., rec=)`` takes a moved file);
- per batch handed out: ``epoch``, ``batch`` (its index in the epoch), ``positions`` (the record
  positions of its samples), ``samples`` (their sample numbers, which key the augmentation's
  random stream, ``recpipe.decode.augment.rng``; only when they differ from the positions, e.g.
  in InsightFace's layout), ``labels`` (the delivered labels, ``"f4:<base64>"``, only under a
  ``label_rule``: they do not come from the file), ``pad``, ``seed``, ``aug_seed`` and the
  ``options``/``file`` digests.

Every ``LoaderOptions`` field is accounted for (``tests/decode/test_provenance_options.py``
checks it): in the loader line's options (``recorded_fields()``: replay applies them), carried by
each batch line (``PER_BATCH_FIELDS``), or without effect on what is delivered
(``NO_EFFECT_FIELDS``).

Index arrays are compact: ``[[start, stop], ...]`` when they are runs of consecutive numbers,
else ``"u4:<base64 of little-endian uint32>"`` (``u8:`` past 2**32). A shuffled batch of 128
costs about 800 bytes. The consumer thread writes, when ``__next__`` hands a batch out.
``recpipe.decode.replay`` reads the log back.
"""

import base64
import dataclasses
import hashlib
import json
import logging
import os

import numpy as np

from ..io.sources import local_path, url_to_fs
from ..io.sidecars.sums import sums_url_for

__all__ = ["NO_EFFECT_FIELDS", "PER_BATCH_FIELDS", "ProvenanceLog", "absolute_url",
           "check_log_path", "decode_indices", "decode_labels", "describe_label_rule",
           "encode_indices", "encode_labels", "file_fingerprint", "fingerprint_digest",
           "identity_changes", "options_digest", "options_from_json", "options_to_json",
           "recorded_fields"]

log = logging.getLogger(__name__)

EDGE_BYTES = 64 << 10  # hashed at each end of a file for its identity
# LoaderOptions fields that change neither which records a batch holds, nor its pixels, nor
# its labels (left out of the options digest)
NO_EFFECT_FIELDS = {
    "threads": "decode threads: the output is the same whatever their number",
    "prefetch": "batches decoded ahead of the consumer",
    "timeout": "how long the consumer waits for a sample",
    "trace": "timing spans",
    "lookahead": "when the next epoch starts decoding",
    "provenance": "where this log goes",
}
# fields whose effect each batch line carries: not replayed from the options
PER_BATCH_FIELDS = {
    "keys": "the records served: each line's positions and sample numbers",
    "label_rule": "a function: each line's labels (the loader line describes the rule)",
}


def recorded_fields():
    """The ``LoaderOptions`` fields the loader line's options carry and replay applies: all
    but ``NO_EFFECT_FIELDS`` and ``PER_BATCH_FIELDS``."""
    from .options import LoaderOptions

    return {f.name for f in dataclasses.fields(LoaderOptions)} - set(NO_EFFECT_FIELDS) \
        - set(PER_BATCH_FIELDS)


def encode_indices(values):
    """A compact JSON form of a 1-d array of non-negative integers (see the module docstring)."""
    values = np.asarray(values, dtype=np.int64).ravel()
    if len(values) == 0:
        return []
    breaks = np.flatnonzero(np.diff(values) != 1) + 1
    if len(breaks) < 4:  # a few runs: [[start, stop], ...]
        starts = np.concatenate(([0], breaks))
        stops = np.concatenate((breaks, [len(values)]))
        return [[int(values[a]), int(values[b - 1]) + 1] for a, b in zip(starts, stops)]
    kind = "u4" if values.max() < (1 << 32) else "u8"
    raw = values.astype("<" + kind).tobytes()
    return f"{kind}:{base64.b64encode(raw).decode('ascii')}"


def encode_labels(labels):
    """``"f4:<base64 of little-endian float32>"`` of a batch's labels (any shape)."""
    raw = np.ascontiguousarray(labels, dtype="<f4").tobytes()
    return f"f4:{base64.b64encode(raw).decode('ascii')}"


def decode_labels(encoded, count, label_width):
    """The float32 labels ``encode_labels`` encoded: ``(count,)`` or ``(count, label_width)``;
    ValueError when the text is not that."""
    kind, _, text = encoded.partition(":") if isinstance(encoded, str) else ("", "", "")
    if kind != "f4":
        raise ValueError(f"not encoded labels: {str(encoded)[:20]!r}")
    values = np.frombuffer(_b64decode(text, "labels"), dtype="<f4").astype(np.float32)
    if len(values) != count * label_width:
        raise ValueError(f"labels hold {len(values)} values, expected {count} x {label_width}")
    return values if label_width == 1 else values.reshape(count, label_width)


def _b64decode(text, what):
    try:
        return base64.b64decode(text, validate=True)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{what}: not valid base64 ({exc})") from None


def decode_indices(encoded):
    """The int64 array ``encode_indices`` encoded; ValueError saying what is wrong when
    ``encoded`` is not such an encoding (bad base64, a length that is no whole number of
    values, a run that is not ``[start, stop]`` with ``0 <= start < stop``)."""
    if isinstance(encoded, str):
        kind, _, text = encoded.partition(":")
        if kind not in ("u4", "u8"):
            raise ValueError(f"not an encoded index array: {encoded[:20]!r}")
        raw = _b64decode(text, "index array")
        size = int(kind[1])
        if len(raw) == 0 or len(raw) % size:
            raise ValueError(f"index array: {len(raw)} bytes is not a whole number of "
                             f"{size}-byte values")
        return np.frombuffer(raw, dtype="<" + kind).astype(np.int64)
    if not isinstance(encoded, list):
        raise ValueError(f"not an index array: {str(encoded)[:40]!r}")
    if not encoded:
        return np.zeros(0, dtype=np.int64)
    for run in encoded:
        if not (isinstance(run, list) and len(run) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) for v in run)
                and 0 <= run[0] < run[1]):
            raise ValueError(f"index run {run!r}: expected [start, stop] with "
                             "0 <= start < stop")
    return np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in encoded])


def options_to_json(options):
    """``LoaderOptions`` as a JSON-able dict (``keys``, ``provenance`` and ``label_rule``, a
    function, left out)."""
    data = dataclasses.asdict(options.replace(keys=None, label_rule=None))
    for name in ("keys", "provenance", "label_rule"):
        data.pop(name, None)
    return data


def options_from_json(data):
    """The ``LoaderOptions`` of ``options_to_json`` (fields this version lacks are ignored;
    JSON lists back to the tuples they were)."""
    from .augment import AugmentConfig
    from .options import LoaderOptions

    names = {f.name for f in dataclasses.fields(LoaderOptions)} - {"augment"}
    augment_names = {f.name for f in dataclasses.fields(AugmentConfig)}
    augment = AugmentConfig(**{k: tuple(v) if isinstance(v, list) else v
                               for k, v in data["augment"].items() if k in augment_names})
    return LoaderOptions(augment=augment, **{k: v for k, v in data.items() if k in names})


def describe_label_rule(rule):
    """A JSON description of a ``label_rule`` (None for none): its type, and for an
    ``IdLabels`` table its source and a digest of its ids and values."""
    from .labels import IdLabels

    if rule is None:
        return None
    kind = type(rule)
    described = {"type": f"{kind.__module__}.{kind.__qualname__}"}
    name = getattr(rule, "__qualname__", None)
    if name is not None:
        described["name"] = f"{getattr(rule, '__module__', '?')}.{name}"
    if isinstance(rule, IdLabels):
        digest = hashlib.sha256(np.ascontiguousarray(rule.ids, dtype="<u8").tobytes())
        digest.update(np.ascontiguousarray(rule.values, dtype="<f4").tobytes())
        described.update(source=str(rule.source), width=rule.label_width,
                         table=digest.hexdigest()[:16])
    return described


def _digest(data):
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def options_digest(options, decoder=None):
    """A digest of the options that decide a batch's records, pixels and labels (``decoder``:
    the backend name ``"auto"`` resolved to, when known)."""
    data = options_to_json(options)
    for name in NO_EFFECT_FIELDS:
        data.pop(name, None)
    data["label_rule"] = describe_label_rule(options.label_rule)
    if decoder is not None:
        data["decoder_resolved"] = decoder
    return _digest(data)


def absolute_url(url, storage_options=None):
    """``url`` for the log: a local path made absolute (replay works from any folder), any
    other URL as given."""
    path = local_path(url, storage_options)
    return os.path.abspath(path) if path is not None else str(url)


def _hash(data):
    return hashlib.sha256(data).hexdigest()[:16]


def _edges(fs, path, size):
    """Hashes of the first and the last ``EDGE_BYTES`` of a file of ``size`` bytes (two range
    reads, never the whole file)."""
    head = fs.cat_file(path, 0, min(size, EDGE_BYTES)) if size else b""
    tail = fs.cat_file(path, size - EDGE_BYTES, size) if size > EDGE_BYTES else head
    return _hash(head), _hash(tail)


def _one_file(url, storage_options, sums_url=None):
    fs, path = url_to_fs(url, storage_options)
    size = int(fs.info(path).get("size") or 0)
    head, tail = _edges(fs, path, size)
    part = {"url": absolute_url(url, storage_options), "size": size, "head": head,
            "tail": tail}
    sums = _sums_digest(sums_url, storage_options) if sums_url else None
    if sums is not None:
        part["sums"] = sums
    return part


def _sums_digest(url, storage_options):
    """A digest of the ``.sums`` sidecar at ``url`` (None when there is none): its size and
    edges, which hold the record count and the sidecar's own CRC32C over all of it, so the
    CRC of every record. Two range reads."""
    fs, path = url_to_fs(url, storage_options)
    try:
        size = int(fs.info(path).get("size") or 0)
    except FileNotFoundError:
        return None
    head, tail = _edges(fs, path, size)
    return f"{size}:{_hash((head + tail).encode())}"


def file_fingerprint(url, index_url=None, storage_options=None):
    """The identity of the ``.rec`` (and its ``.idx``): absolute URL, size, hashes of the first
    and last 64 KiB and, for the ``.rec``, the digest of its ``.sums`` sidecar when there is
    one. Cheap on any size of file (a few range reads); a copy or a moved file has the same
    identity (the URL aside), a rewritten one almost never."""
    parts = {"rec": _one_file(url, storage_options, sums_url_for(url))}
    if index_url:
        parts["idx"] = _one_file(index_url, storage_options)
    return parts


def fingerprint_digest(parts):
    """The digest of ``file_fingerprint`` parts (URLs left out: a moved file is the same file)."""
    return _digest({name: {k: v for k, v in part.items() if k != "url"}
                    for name, part in parts.items()})


def identity_changes(then, now):
    """What differs between two ``file_fingerprint`` results (URLs aside): a list of
    ``"rec size: 10 then, 12 now"`` strings, empty when ``now`` is the file ``then`` was. A
    sidecar digest counts only when both have one; logs written before the tail hash was kept
    compare size and head (their modification time is ignored: a copy has another)."""
    changes = []
    for name in sorted(set(then) | set(now)):
        if name not in then or name not in now:
            changes.append(f"{name}: {'one' if name in then else 'none'} then, "
                           f"{'one' if name in now else 'none'} now")
            continue
        fields = ["size", "head", "tail"]
        if "sums" in then[name] and "sums" in now[name]:
            fields.append("sums")
        changes += [f"{name} {field}: {then[name][field]!r} then, {now[name].get(field)!r} now"
                    for field in fields
                    if field in then[name] and then[name][field] != now[name].get(field)]
    return changes


def check_log_path(path):
    """Raise, naming ``path``, unless a provenance log can be appended there: its folder exists,
    is a folder and is writable, and ``path``, when it exists, is a writable file
    (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError). The loader
    checks this when it is created, before it reads the ``.rec``, rather than at its first
    batch."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    where = f"provenance={path!r}"
    if not os.path.exists(folder):
        raise FileNotFoundError(f"{where}: the folder {folder} does not exist (create it, or "
                                "give a log path in an existing folder)")
    if not os.path.isdir(folder):
        raise NotADirectoryError(f"{where}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(f"{where}: the folder {folder} is not writable")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{where}: {os.path.abspath(path)} is a folder, not a log file")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise PermissionError(f"{where}: {os.path.abspath(path)} is not writable")


class ProvenanceLog:
    """Appends a loader's provenance lines to ``path`` (see the module docstring); ``decoder``
    is the backend name the loader decodes with, ``native`` whether its runs go to
    ``recpipe._batch``."""

    def __init__(self, path, options, reader, storage_options=None, *, decoder=None,
                 native=False):
        self.path = os.fspath(path)
        self.options = options
        self.reader = reader
        self.storage_options = storage_options
        self.decoder = decoder
        self.native = bool(native)
        self.log_labels = options.label_rule is not None
        self.options_digest = options_digest(options, decoder)
        self.file_parts = None
        self.file_digest = None
        self._file = None
        self._fixed = {}

    def _open(self):
        self.file_parts = file_fingerprint(self.reader.url, self.reader.index_url,
                                           self.storage_options)
        self.file_digest = fingerprint_digest(self.file_parts)
        o = self.options
        self._fixed = {"seed": o.seed, "aug_seed": o.augment_seed,
                       "options": self.options_digest, "file": self.file_digest}
        self._file = open(self.path, "a", encoding="utf-8")
        self._write({"kind": "loader", "url": self.file_parts["rec"]["url"],
                     "index_url": self.file_parts["idx"]["url"] if "idx" in self.file_parts
                     else None, "url_given": str(self.reader.url), "pid": os.getpid(),
                     "options": self.options_digest, "file": self.file_digest,
                     "file_parts": self.file_parts, "loader_options": options_to_json(o),
                     "decoder": self.decoder, "native": self.native,
                     "label_rule": describe_label_rule(o.label_rule)})

    def _write(self, entry):
        self._file.write(json.dumps(entry, separators=(",", ":")) + "\n")
        self._file.flush()

    def record(self, epoch, batch, positions, samples, pad, labels=None):
        """Append the line of batch ``batch`` of ``epoch`` (``samples``: the sample numbers,
        ``positions``: their records, ``labels``: the labels delivered, logged under a
        ``label_rule``)."""
        if self._file is None:
            self._open()
        entry = {"epoch": int(epoch), "batch": int(batch),
                 "positions": encode_indices(positions)}
        if not np.array_equal(positions, samples):
            entry["samples"] = encode_indices(samples)
        if self.log_labels and labels is not None:
            entry["labels"] = encode_labels(labels)
        entry["pad"] = int(pad)
        entry.update(self._fixed)
        self._write(entry)

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None
