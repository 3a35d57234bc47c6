"""im2rec's ``--list`` mode: walk an image folder and write ``.lst`` files exactly as im2rec does.

Semantics copied from ``mxnet/tools/im2rec.py`` (see ``shared/docs/recordio-compat.md`` section 3):

- indices follow the sorted traversal order (``os.walk(root, followlinks=True)`` with directories
  and files sorted; non-recursive: sorted ``os.listdir(root)``), extensions compared lowercased;
- ``--recursive`` labels: the order in which a directory holding at least one image is first met
  (images directly in ``root`` belong to ``.``); non-recursive: label 0;
- the list is shuffled with ``random.seed(100); random.shuffle`` *after* indices are assigned;
- ``chunk_size = ceil(N / chunks)``; per chunk, ``train_ratio == 1.0`` writes ``prefix[_i].lst``
  only (the test ratio is ignored), otherwise ``_test`` (if ``test_ratio``), ``_val`` (if
  ``train_ratio + test_ratio < 1``) and ``_train`` lists, cut with ``int(chunk_size * ratio)``.
"""

import logging
import os
import random
from typing import Dict, List, NamedTuple, Tuple

from ..io.atomic import AtomicOutput
from ..io.sidecars.index import format_list_line

__all__ = [
    "DEFAULT_EXTS",
    "ImageItem",
    "ListResult",
    "list_images",
    "shuffle_like_im2rec",
    "split_lists",
    "write_list",
    "make_lists",
]

log = logging.getLogger(__name__)

DEFAULT_EXTS = (".jpeg", ".jpg", ".png")
SHUFFLE_SEED = 100


class ImageItem(NamedTuple):
    """One image found under the root: its ``.lst`` index, path relative to the root, label."""

    # the .lst column's name; it shadows tuple.index on purpose
    index: int  # type: ignore[assignment]
    path: str
    label: float


class ListResult(NamedTuple):
    """What ``make_lists`` did: the ``.lst`` files written (in im2rec's order), the images found,
    and for ``recursive`` the ``(directory relative to root, label)`` map im2rec prints."""

    paths: List[str]
    items: List[ImageItem]
    label_map: List[Tuple[str, int]]


def _is_image(directory, name, exts):
    suffix = os.path.splitext(name)[1].lower()
    return suffix in exts and os.path.isfile(os.path.join(directory, name))


def _walk_recursive(root, exts):
    items: List[ImageItem] = []
    labels: Dict[str, int] = {}
    for directory, dirs, files in os.walk(root, followlinks=True):
        dirs.sort()
        files.sort()
        for name in files:
            if not _is_image(directory, name, exts):
                continue
            label = labels.setdefault(directory, len(labels))
            items.append(ImageItem(len(items), os.path.relpath(os.path.join(directory, name), root),
                                   label))
    label_map = [(os.path.relpath(directory, root), label) for directory, label in labels.items()]
    return items, label_map


def _walk_flat(root, exts):
    names = [name for name in sorted(os.listdir(root)) if _is_image(root, name, exts)]
    return [ImageItem(i, name, 0) for i, name in enumerate(names)]


def list_images(root, recursive=False, exts=DEFAULT_EXTS):
    """Find the images under ``root`` as im2rec does; return ``(items, label_map)``.

    ``items`` are in traversal order with ``index`` = position; ``label_map`` lists
    ``(directory relative to root, label)`` in label order (empty when not recursive).
    """
    exts = tuple(exts)
    if recursive:
        return _walk_recursive(root, exts)
    return _walk_flat(root, exts), []


def shuffle_like_im2rec(items):
    """A new list in im2rec's shuffled order (``random.seed(100); random.shuffle``).

    A private ``random.Random`` gives the same sequence without touching the global generator.
    """
    shuffled = list(items)
    random.Random(SHUFFLE_SEED).shuffle(shuffled)
    return shuffled


def split_lists(items, chunks=1, train_ratio=1.0, test_ratio=0.0):
    """Cut ``items`` into im2rec's lists; return ``[(suffix, items), ...]`` in im2rec's write order.

    Suffixes are ``''`` or ``'_<chunk>'`` followed by ``''`` / ``'_test'`` / ``'_val'`` /
    ``'_train'``. Empty lists are kept: im2rec writes empty files for them.
    """
    if chunks < 1:
        raise ValueError(f"chunks must be at least 1, got {chunks}")
    chunk_size = (len(items) + chunks - 1) // chunks
    lists = []
    for i in range(chunks):
        chunk = items[i * chunk_size:(i + 1) * chunk_size]
        chunk_tag = "_%d" % i if chunks > 1 else ""
        n_train = int(chunk_size * train_ratio)
        n_test = int(chunk_size * test_ratio)
        if train_ratio == 1.0:
            lists.append((chunk_tag, chunk))
            continue
        if test_ratio:
            lists.append((chunk_tag + "_test", chunk[:n_test]))
        if train_ratio + test_ratio < 1.0:
            lists.append((chunk_tag + "_val", chunk[n_test + n_train:]))
        lists.append((chunk_tag + "_train", chunk[n_test:n_test + n_train]))
    return lists


def write_list(path, items):
    """Write ``items`` as a ``.lst`` file (published atomically), formatted exactly like im2rec."""
    with AtomicOutput(path) as out:
        for item in items:
            out.write(format_list_line(item.index, (item.label,), item.path).encode("utf-8"))
    log.info("wrote %s (%d images)", path, len(items))


def make_lists(prefix, root, *, recursive=False, exts=DEFAULT_EXTS, shuffle=True, chunks=1,
               train_ratio=1.0, test_ratio=0.0):
    """im2rec ``--list``: find images under ``root`` and write ``<prefix>[...].lst`` files.

    ``prefix`` and ``root`` are made absolute as im2rec does. Returns a ``ListResult``.
    """
    prefix = os.path.abspath(prefix)
    root = os.path.abspath(root)
    if not os.path.isdir(root):
        raise FileNotFoundError(f"image root is not a directory: {root}")
    items, label_map = list_images(root, recursive, exts)
    ordered = shuffle_like_im2rec(items) if shuffle else items
    paths = []
    for suffix, part in split_lists(ordered, chunks, train_ratio, test_ratio):
        path = prefix + suffix + ".lst"
        write_list(path, part)
        paths.append(path)
    log.info("listed %d images under %s into %d list file(s)", len(items), root, len(paths))
    return ListResult(paths, items, label_map)
