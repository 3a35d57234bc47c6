"""im2rec's packing mode: turn every ``<prefix>*.lst`` into a ``.rec`` + ``.idx``, like MXNet's
im2rec.

Semantics copied from ``mxnet/tools/im2rec.py`` (``shared/docs/recordio-compat.md`` section 3):

- every regular file in the prefix's directory (or in ``prefix`` itself when it is a directory)
  whose absolute path starts with the prefix and ends with ``.lst`` is packed into
  ``<lst stem>.rec`` / ``<lst stem>.idx`` beside it;
- record *k* is ``.lst`` line *k* (order kept in parallel mode too); header
  ``IRHeader(0, label(s), id=lst index, 0)``; ``.idx`` key = lst index;
- pass-through stores the file bytes as they are; otherwise the image is decoded with
  ``cv2.imread`` semantics (``cv2.imdecode`` of the file bytes with the same flag: both apply the
  EXIF orientation), center-cropped, resized and re-encoded (``recpipe.packing.encode``).

im2rec is a preset of ``PackOptions`` (``im2rec_options``: pixels exactly im2rec's, every image
re-encoded unless ``pass_through``, list order kept, no sources sidecar or label file, nothing
kept from a run that stops) packed by the one pack engine, ``recpipe.packing.packer.pack_dataset``
(its worker processes with ``num_workers > 1``). Unlike im2rec, an image that cannot be read or
decoded (or a ``.lst`` line that does not parse) is logged with its path and reason and skipped,
and returned in ``PackResult.skipped``; outputs are published as one commit (``.rec``, ``.idx``
and the ``.sums`` checksum sidecar), so a run that fails or is interrupted publishes nothing.
"""

import logging
import os
from typing import List, NamedTuple, Optional

from ..io.sidecars.index import read_list
from ..packing.inputs import InputLimits
from ..packing.options import PackOptions
from ..packing.packer import output_prefix, pack_dataset

__all__ = [
    "IM2REC",
    "PackResult",
    "Skipped",
    "find_list_files",
    "im2rec_options",
    "output_paths",
    "pack_list",
    "pack_prefix",
]

log = logging.getLogger(__name__)

DEFAULT_TASK_TIMEOUT = 600.0

# im2rec's settings over the pack engine's (``PackOptions`` fields)
IM2REC = {
    "exact": True,  # OpenCV's decode at full size: im2rec's pixels
    "keep_jpeg": False,  # every image re-encoded unless pass_through, as im2rec does
    "shuffle": False,  # record k is line k
    "sources": False,  # no X.sources.jsonl
    "labels_file": False,  # no X.labels.json
    "restart": "off",  # no restart markers: the JPEGs are im2rec's bytes
    "resumable": False,  # a run that stops leaves nothing behind
    "on_error": "skip",
    "limits": InputLimits(allow_outside_root=True),  # .lst paths may leave the root
    "workers": 0,
}


def im2rec_options(**changes) -> PackOptions:
    """im2rec's ``PackOptions`` (``IM2REC``) with ``changes`` (its command-line settings:
    ``pass_through``, ``resize``, ``center_crop``, ``quality``, ``color``, ``encoding``,
    ``pack_label``), validated now."""
    return PackOptions.from_kwargs(**{**IM2REC, **changes})


class Skipped(NamedTuple):
    """An input left out of the output: the image (or ``.lst``) path, why, and its lst index."""

    path: str
    reason: str
    # the .lst column's name; it shadows tuple.index on purpose
    index: Optional[int] = None  # type: ignore[assignment]


class PackResult(NamedTuple):
    """One packed ``.lst``: where the records went, how many, and what was skipped."""

    lst_path: str
    rec_path: str
    idx_path: str
    written: int
    skipped: List[Skipped]


def find_list_files(prefix):
    """The ``.lst`` files im2rec packs for ``prefix``, sorted; ``[]`` when there are none."""
    prefix = os.path.abspath(prefix)
    working_dir = prefix if os.path.isdir(prefix) else os.path.dirname(prefix)
    paths = [os.path.join(working_dir, name) for name in sorted(os.listdir(working_dir))]
    return [path for path in paths
            if path.startswith(prefix) and path.endswith(".lst") and os.path.isfile(path)]


def output_paths(lst_path):
    """``(rec_path, idx_path)`` im2rec writes for ``lst_path``."""
    stem = os.path.splitext(lst_path)[0]
    return stem + ".rec", stem + ".idx"


def _list_skips(lst_path, bad_lines):
    return [Skipped(lst_path, f"line {line} of the list does not parse") for line in bad_lines]


def _skipped(summary, root):
    """The items ``summary`` reports as failed, as ``Skipped`` (path joined to ``root``)."""
    return [Skipped(os.path.join(root, error["path"]), error["reason"], error.get("index"))
            for error in summary.errors]


def pack_list(lst_path, root, options=None, *, num_workers=1, progress=None,
              timeout=DEFAULT_TASK_TIMEOUT):
    """Pack one ``.lst`` into ``<stem>.rec`` / ``<stem>.idx``; return a ``PackResult``.

    ``options``: a ``PackOptions`` (default ``im2rec_options()``); ``num_workers > 1`` encodes in
    that many worker processes, each image waited for at most ``timeout`` seconds.
    ``progress(done, total)`` is called after each list entry. Bad images are skipped (logged,
    listed in the result); any other error leaves no output published.
    """
    root = os.path.abspath(root)
    options = (im2rec_options() if options is None else options).replace(
        root=root, workers=num_workers if num_workers > 1 else 0, item_timeout=float(timeout))
    _, bad_lines = read_list(lst_path)
    skipped = _list_skips(lst_path, bad_lines)
    for skip in skipped:
        log.warning("skipped %s: %s", skip.path, skip.reason)
    rec_path, idx_path = output_paths(lst_path)
    report = None if progress is None else (lambda done, total, _bytes: progress(done, total))
    summary = pack_dataset(lst_path, output_prefix(rec_path), options, progress=report)
    skipped += _skipped(summary, root)
    log.info("packed %s: %d records, %d skipped", rec_path, summary.written, len(skipped))
    return PackResult(lst_path, rec_path, idx_path, summary.written, skipped)


def pack_prefix(prefix, root, options=None, *, num_workers=1, progress=None,
                on_list=None, timeout=DEFAULT_TASK_TIMEOUT):
    """im2rec's packing mode: pack every ``.lst`` matching ``prefix``; return the PackResults.

    ``on_list(lst_path)`` is called before each list is packed. Raises FileNotFoundError when no
    list matches (im2rec only prints a message).
    """
    lst_paths = find_list_files(prefix)
    if not lst_paths:
        raise FileNotFoundError(f"no .lst file matches the prefix {os.path.abspath(prefix)}")
    results = []
    for lst_path in lst_paths:
        if on_list is not None:
            on_list(lst_path)
        results.append(pack_list(lst_path, root, options, num_workers=num_workers,
                                 progress=progress, timeout=timeout))
    return results
