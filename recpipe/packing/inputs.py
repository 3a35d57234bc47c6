"""Reading untrusted input files: inside the image root, regular files, bounded size.

A ``.lst`` or an image folder is input from someone else: a line ``../../etc/passwd``, an
absolute path or a symlink must not pack files from outside the image root; ``/dev/zero`` must
not be read until memory runs out, and a FIFO named ``x.jpg`` must not block forever.
``InputLimits`` says what is allowed; ``read_input`` enforces it and raises ``UnsafeInput`` (an
``OSError``: the item is reported and counted like an unreadable file).
"""

import os
import stat
from dataclasses import dataclass

__all__ = ["DEFAULT_MAX_FILE_BYTES", "InputLimits", "UnsafeInput", "check_inside", "read_input",
           "remote_size_ok"]

DEFAULT_MAX_FILE_BYTES = 1 << 30  # 1 GiB: far above any real image


class UnsafeInput(OSError):
    """An input path or file that the limits refuse."""


@dataclass(frozen=True)
class InputLimits:
    """``allow_outside_root``: accept paths that leave the image root (``..``, absolute paths,
    symlinks pointing out); ``max_file_bytes``: refuse bigger files."""

    allow_outside_root: bool = False
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES

    def __post_init__(self):
        if self.max_file_bytes < 1:
            raise ValueError(f"max_file_bytes={self.max_file_bytes} must be >= 1")


def check_inside(root, relpath, *, local):
    """Raise UnsafeInput unless ``relpath`` (joined to ``root``) stays inside ``root``.
    Local paths are resolved (symlinks followed); remote ones must be relative, without ``..``."""
    if local:
        base = os.path.realpath(root)
        target = os.path.realpath(os.path.join(root, relpath))
        if target != base and not target.startswith(base.rstrip(os.sep) + os.sep):
            raise UnsafeInput(f"{relpath!r} resolves to {target}, outside the image root {base} "
                              "(use --allow-outside-root to accept it)")
        return
    parts = relpath.split("/")
    if relpath.startswith("/") or "://" in relpath or ".." in parts:
        raise UnsafeInput(f"{relpath!r} leaves the image root {root} "
                          "(use --allow-outside-root to accept it)")


def read_input(path, limits):
    """The bytes of local file ``path``: a regular file of at most ``limits.max_file_bytes``."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)  # a FIFO opens at once
    fd = os.open(path, flags)
    owned = True  # closed here unless the file object took it
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeInput(f"{path}: not a regular file ({_kind(info.st_mode)})")
        if info.st_size > limits.max_file_bytes:
            raise UnsafeInput(f"{path}: {info.st_size} bytes, over the {limits.max_file_bytes}-"
                              "byte limit per file")
        with os.fdopen(fd, "rb") as f:
            owned = False
            data = f.read(limits.max_file_bytes + 1)
    finally:
        if owned:
            os.close(fd)
    if len(data) > limits.max_file_bytes:
        raise UnsafeInput(f"{path}: grew past the {limits.max_file_bytes}-byte limit while read")
    return data


def _kind(mode):
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


def remote_size_ok(fs, path, limits):
    """Raise UnsafeInput when the remote object ``path`` is bigger than the limit."""
    size = fs.size(path)
    if size is not None and size > limits.max_file_bytes:
        raise UnsafeInput(f"{path}: {size} bytes, over the {limits.max_file_bytes}-byte limit "
                          "per file")

