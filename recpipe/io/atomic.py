"""Outputs published atomically: written under a temporary name, renamed into place on commit."""

import logging
import os
import uuid

from fsspec.implementations.local import LocalFileSystem

from .sources import url_to_fs

__all__ = ["AtomicOutput", "Removal", "commit_group", "commit_pair", "publish", "temporary_name"]

log = logging.getLogger(__name__)


def temporary_name(path, tag=None):
    """A hidden sibling of ``path``: ``dir/.name.<tag>.tmp``."""
    head, name = path.rsplit("/", 1) if "/" in path else ("", path)
    tag = tag or uuid.uuid4().hex[:12]
    return f"{head}/.{name}.{tag}.tmp" if head else f".{name}.{tag}.tmp"


class AtomicOutput:
    """A binary file that appears at ``url`` only when ``commit()`` is called.

    Until then the bytes live at ``temp_path`` (a hidden sibling). ``discard()`` removes them.
    ``append=True`` continues an existing temporary file (local filesystems only), for resuming.
    Everything ``commit()`` and ``discard()`` need is resolved here: for a local file they make
    only ``os`` calls (no import, no thread), so they work while the interpreter shuts down.
    """

    def __init__(self, url, storage_options=None, *, temp_tag=None, append=False):
        self.url = str(url)
        self.fs, self.path = url_to_fs(url, storage_options)
        self.local = isinstance(self.fs, LocalFileSystem)
        self.temp_path = temporary_name(self.path, temp_tag)
        parent = self.path.rsplit("/", 1)[0] if "/" in self.path else ""
        if parent:
            self.fs.makedirs(parent, exist_ok=True)
        if self.local:
            self.file = open(self.temp_path, "ab" if append else "wb", buffering=1 << 20)
        else:
            if append:
                raise ValueError(f"cannot append to a temporary object on {self.url}")
            self.file = self.fs.open(self.temp_path, "wb")
        self.done = False

    def write(self, data):
        self.file.write(data)

    def flush(self):
        self.file.flush()
        if self.local:
            os.fsync(self.file.fileno())

    def prepare(self):
        """Finish the temporary file: flushed, on disk (local files) and closed."""
        if self.done or self.file.closed:
            return
        if self.local:
            self.flush()  # the bytes are on disk before the name appears
        self.file.close()

    def commit(self):
        """Close the file and move it to its final name."""
        if self.done:
            return
        self.prepare()
        if self.local:
            os.replace(self.temp_path, self.path)
        else:
            self.fs.mv(self.temp_path, self.path)
        self.done = True
        log.debug("published %s", self.url)

    def remove_target(self):
        """Remove what is published under the final name now, if anything."""
        self._remove(self.path)

    def _remove(self, path):
        # local files through ``os`` only: publishing runs no import and no fsspec lookup, so
        # that a writer dropped while the interpreter shuts down still publishes
        try:
            if self.local:
                os.remove(path)
            else:
                self.fs.rm(path)
        except FileNotFoundError:
            pass

    def discard(self):
        """Close the file and remove it; the final name is never touched."""
        if self.done:
            return
        self.done = True
        try:
            self.file.close()
        except OSError as exc:  # e.g. the final flush of a full disk: the bytes are dropped anyway
            log.debug("discarding %s: %s", self.temp_path, exc)
        self._remove(self.temp_path)

    def disown(self):
        """In a forked child: let go of the inherited temporary file without writing, publishing
        or removing anything (the parent owns it). Bytes still buffered here are sent to
        ``os.devnull``, so they are not written twice."""
        if self.done:
            return
        self.done = True
        if self.local:
            if not self.file.closed:
                null = os.open(os.devnull, os.O_WRONLY)
                try:
                    os.dup2(null, self.file.fileno())  # this process's descriptor only
                finally:
                    os.close(null)
        else:
            try:
                # fsspec files upload when closed or collected; theirs is a plain attribute
                self.file.closed = True  # type: ignore[misc]
            except AttributeError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.commit()
        else:
            self.discard()


class Removal:
    """A companion for ``commit_group`` that publishes nothing: whatever is at ``url`` is
    removed with the old companions, before the new data file takes its name (a sidecar of
    the old data file that the new one has none of). Its filesystem is resolved here, when
    made, so that removing needs no import (a writer closed at interpreter exit)."""

    def __init__(self, url, storage_options=None):
        self.url = str(url)
        self.fs, self.path = url_to_fs(url, storage_options)
        self.local = isinstance(self.fs, LocalFileSystem)

    def prepare(self):
        pass

    def remove_target(self):
        try:
            if self.local:  # through ``os`` only, as ``AtomicOutput``
                os.remove(self.path)
            else:
                self.fs.rm(self.path)
        except FileNotFoundError:
            pass

    def commit(self):
        pass

    def discard(self):
        pass

    def disown(self):
        pass


def commit_pair(data, index):
    """Publish a data file and its index (two ``AtomicOutput``) so that no reader ever sees a
    new one beside an old other: both are completed on disk first (a disk-full or any failure
    there discards both and leaves the old pair untouched), then the old index is removed, then
    the data file and the index take their names. A crash between those renames leaves the data
    file without an index (readers then scan it), never a mismatched pair."""
    commit_group(data, [index])


def commit_group(data, companions):
    """``commit_pair`` for a data file and any number of companions (its index, its checksum
    sidecar; None entries are ignored): all completed on disk, the old companions removed, then
    the data file and the companions renamed into place. A crash between the renames leaves the
    data file with some companions missing (readers then scan it, or check no sums), never a
    companion of another data file."""
    companions = [output for output in companions if output is not None]
    try:
        data.prepare()
        for output in companions:
            output.prepare()
        for output in companions:
            output.remove_target()
        data.commit()
        for output in companions:
            output.commit()
    except BaseException:
        data.discard()
        for output in companions:
            output.discard()
        raise


def publish(url, data, storage_options=None):
    """Write ``data`` (bytes) to ``url`` atomically: all of it appears, or nothing."""
    with AtomicOutput(url, storage_options) as output:
        output.write(data)
    return str(url)
