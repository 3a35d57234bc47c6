"""What to pack: turning SRC (a folder of class subfolders, or an im2rec ``.lst``) into items.

A folder gives one label per class subfolder, in sorted folder order (im2rec ``--recursive``
numbering), and indexes in walk order (class by class, files sorted). A ``.lst`` gives its own
indexes, labels and paths, relative to ``root`` (default: the ``.lst``'s folder).
"""

import logging
import os
import posixpath
from typing import List, NamedTuple, Tuple

from fsspec.implementations.local import LocalFileSystem

from ..io.sidecars.index import read_list
from ..io.sources import url_to_fs

__all__ = ["PackItem", "DEFAULT_EXTENSIONS", "items_from_folder", "items_from_list", "list_root",
           "with_sizes", "load_items", "is_list_file", "join_url"]

log = logging.getLogger(__name__)

DEFAULT_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".webp")


class PackItem(NamedTuple):
    """One image to pack: its record index (header id and ``.idx`` key), labels and path
    relative to the root; ``size`` is the file size in bytes, or -1 when not looked up;
    ``mtime`` its modification time when listed from a local folder, else -1."""

    # the .lst column's name; it shadows tuple.index on purpose
    index: int  # type: ignore[assignment]
    labels: Tuple[float, ...]
    path: str
    size: int = -1
    mtime: float = -1.0


def join_url(root, path):
    """``root/path`` for a local folder or an fsspec URL; an absolute ``path`` (or a URL) is
    used as is, like ``os.path.join`` in im2rec."""
    if not root or path.startswith("/") or "://" in path:
        return path
    return f"{str(root).rstrip('/')}/{path}"


def is_list_file(src):
    return str(src).lower().endswith(".lst")


def _hidden(relpath):
    return any(part.startswith(".") for part in relpath.split("/"))


def _has_extension(name, extensions):
    return posixpath.splitext(name)[1].lower() in extensions


def items_from_folder(src, extensions=DEFAULT_EXTENSIONS, storage_options=None):
    """Return ``(items, classes)`` for a folder of class subfolders; ``classes`` maps
    class name -> label. Images directly in ``src`` are an error (they would have no class)."""
    fs, root = url_to_fs(src, storage_options)
    root = root.rstrip("/")
    local = isinstance(fs, LocalFileSystem)
    if not fs.isdir(root):
        raise FileNotFoundError(f"no such folder: {src}")
    entries = fs.ls(root, detail=True)
    names = sorted(posixpath.basename(e["name"].rstrip("/")) for e in entries
                   if e["type"] == "directory")
    class_names = [name for name in names if not name.startswith(".")]
    loose = sorted(posixpath.basename(e["name"]) for e in entries
                   if e["type"] != "directory" and _has_extension(e["name"], extensions))
    if loose:
        raise ValueError(
            f"{src}: {len(loose)} image(s) directly in the source folder (e.g. {loose[0]!r}); "
            f"expected one subfolder per class, or pass an im2rec .lst file")
    if not class_names:
        raise ValueError(f"{src}: no class subfolders found; expected SRC/<class>/<image>")
    items: List[PackItem] = []
    for label, name in enumerate(class_names):
        found = fs.find(f"{root}/{name}", detail=True)
        for path in sorted(found):
            relpath = path[len(root) + 1:] if path.startswith(root + "/") else path
            if _hidden(relpath) or not _has_extension(path, extensions):
                continue
            mtime = _listed_mtime(path, found[path]) if local else -1.0
            items.append(PackItem(len(items), (float(label),), relpath, int(found[path]["size"]),
                                  mtime))
    if not items:
        raise ValueError(f"{src}: no images with extensions {', '.join(extensions)}")
    return items, {name: label for label, name in enumerate(class_names)}


def items_from_list(lst, root=None, storage_options=None):
    """Items of an im2rec ``.lst``; paths stay relative to ``root`` (default: its folder)."""
    entries, skipped = read_list(lst, storage_options)
    if skipped:
        log.warning("%s: %d line(s) did not parse and are skipped (first: line %d)",
                    lst, len(skipped), skipped[0])
    if not entries:
        raise ValueError(f"{lst}: no usable entries")
    return [PackItem(e.index, tuple(e.labels), e.path) for e in entries]


def list_root(lst, root=None):
    """The folder a ``.lst``'s paths are relative to."""
    if root:
        return str(root)
    lst = str(lst)
    return lst.rsplit("/", 1)[0] if "/" in lst else "."


def with_sizes(items, root, storage_options=None):
    """``items`` with ``size`` filled in from the filesystem (missing files keep -1)."""
    fs, base = url_to_fs(root, storage_options)
    sized = []
    for item in items:
        try:
            size = int(fs.size(join_url(base, item.path)))
        except (FileNotFoundError, OSError):
            size = -1
        sized.append(item._replace(size=size))
    return sized


def load_items(src, root=None, *, extensions=DEFAULT_EXTENSIONS, need_sizes=False,
               storage_options=None):
    """Return ``(items, classes, root)`` for SRC; ``classes`` is None for a ``.lst``."""
    if is_list_file(src):
        root = list_root(src, root)
        items = items_from_list(src, root, storage_options)
        if need_sizes:
            items = with_sizes(items, root, storage_options)
        return items, None, root
    if root:
        raise ValueError("--root applies to a .lst source only")
    items, classes = items_from_folder(src, extensions, storage_options)
    return items, classes, str(src).rstrip("/")


def _listed_mtime(path, info):
    """The modification time of the file ``path`` names, as ``jobs`` checks it when the item
    is read (``os.stat``, following a symlink): fsspec lists a symlink's own time, which differs
    from its target's whenever the two were written in different clock ticks."""
    if info.get("islink"):
        try:
            return os.stat(path).st_mtime
        except OSError:
            return -1.0  # a dangling link: its read reports the error
    return float(info.get("mtime", -1.0))
