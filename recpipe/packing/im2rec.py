"""im2rec's packing mode: turn every ``<prefix>*.lst`` into a ``.rec`` + ``.idx``, like MXNet's im2rec.

Semantics copied from ``mxnet/tools/im2rec.py`` (``shared/docs/recordio-compat.md`` section 3):

- every regular file in the prefix's directory (or in ``prefix`` itself when it is a directory)
  whose absolute path starts with the prefix and ends with ``.lst`` is packed into
  ``<lst stem>.rec`` / ``<lst stem>.idx`` beside it;
- record *k* is ``.lst`` line *k* (order kept in parallel mode too); header
  ``IRHeader(0, label(s), id=lst index, 0)``; ``.idx`` key = lst index;
- pass-through stores the file bytes as they are; otherwise the image is decoded with
  ``cv2.imread`` semantics (``cv2.imdecode`` of the file bytes with the same flag: both apply the
  EXIF orientation), center-cropped, resized and re-encoded by ``recpipe.packing.encode.transcode``.

Unlike im2rec, an image that cannot be read or decoded (or a ``.lst`` line that does not parse)
is logged with its path and reason and skipped, and returned in ``PackResult.skipped``; outputs
go through ``RecordWriter``, so a run that fails or is interrupted publishes nothing.
"""

import collections
import contextlib
import logging
import os
import struct
from typing import Deque, List, NamedTuple, Optional

from ..image.opencv import load_cv2
from ..io.header import pack
from ..io.index import read_list
from ..io.writer import RecordWriter
from .encode import make_header, transcode
from .inputs import InputLimits, read_input
from .lifeline import init_worker
from .transform import ImageOptions

__all__ = [
    "PackOptions",
    "Skipped",
    "PackResult",
    "find_list_files",
    "output_paths",
    "encode_entry",
    "iter_encoded",
    "pack_list",
    "pack_prefix",
]

log = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 8
DEFAULT_TASK_TIMEOUT = 600.0
LOG_EVERY = 1000


def PackOptions(**options):  # noqa: N802 - reads as the options type it builds
    """im2rec's record options (``pass_through``, ``resize``, ...) with im2rec's defaults: the
    packer's ``ImageOptions``, always decoding at full size like im2rec."""
    return ImageOptions(exact=True, **options)


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


def encode_entry(entry, root, options):
    """The record payload for one ``.lst`` entry. Raises OSError/ValueError/cv2.error if bad."""
    path = os.path.join(root, entry.path)
    header = make_header(entry.index, entry.labels, options.pack_label)
    data = read_input(path, InputLimits(allow_outside_root=True))  # regular files, bounded size
    if options.pass_through:
        return pack(header, data)
    return transcode(data, header, color=options.color, center=options.center_crop,
                     resize=options.resize, quality=options.quality, encoding=options.encoding,
                     path=path)


def _bad_input_errors():
    cv2 = load_cv2()
    return (OSError, ValueError, struct.error, OverflowError, cv2.error)


def _reason(error):
    reason = getattr(error, "reason", None) or getattr(error, "strerror", None) or str(error)
    return f"{type(error).__name__}: {str(reason).strip()}"


def _try_encode(entry, root, options, errors):
    try:
        return encode_entry(entry, root, options), None
    except errors as e:
        return None, _reason(e)


def _encode_batch(batch, root, options):
    errors = _bad_input_errors()
    return [_try_encode(entry, root, options, errors) for entry in batch]


def _batched(entries, size):
    for start in range(0, len(entries), size):
        yield entries[start:start + size]


def _serial_results(entries, root, options):
    errors = _bad_input_errors()
    for entry in entries:
        yield _try_encode(entry, root, options, errors)


def _parallel_results(entries, root, options, num_workers, batch_size, timeout):
    import multiprocessing

    context = multiprocessing.get_context("forkserver")
    pool = context.Pool(num_workers, initializer=init_worker, initargs=(os.getpid(),))
    try:
        pending: Deque[tuple] = collections.deque()
        batches = _batched(entries, batch_size)
        for batch in batches:
            pending.append((batch, pool.apply_async(_encode_batch, (batch, root, options))))
            if len(pending) >= 2 * num_workers:
                yield from _collect(pending.popleft(), root, timeout)
        while pending:
            yield from _collect(pending.popleft(), root, timeout)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def _collect(submitted, root, timeout):
    batch, async_result = submitted
    try:
        return async_result.get(timeout)
    except _timeout_error() as e:
        raise TimeoutError(
            f"no result after {timeout:g} s for images {os.path.join(root, batch[0].path)} .. "
            f"{os.path.join(root, batch[-1].path)} (a worker hung or died)") from e


def _timeout_error():
    import multiprocessing

    return multiprocessing.TimeoutError


def iter_encoded(entries, root, options, *, num_workers=1, batch_size=DEFAULT_BATCH_SIZE,
                 timeout=DEFAULT_TASK_TIMEOUT):
    """Yield ``(payload, reason)`` per entry, in order: ``reason`` is None unless it failed.

    ``num_workers > 1`` encodes in that many worker processes (forkserver, so the parent's
    threads and OpenCV state are never forked); results still come back in ``entries`` order.
    Close the generator (``contextlib.closing``) to stop the workers early.
    """
    root = os.path.abspath(root)
    if num_workers > 1 and len(entries) > 1:
        return _parallel_results(list(entries), root, options, num_workers, batch_size, timeout)
    return _serial_results(entries, root, options)


def _list_skips(lst_path, bad_lines):
    return [Skipped(lst_path, f"line {line} of the list does not parse") for line in bad_lines]


def pack_list(lst_path, root, options=PackOptions(), *, num_workers=1, progress=None,
              timeout=DEFAULT_TASK_TIMEOUT):
    """Pack one ``.lst`` into ``<stem>.rec`` / ``<stem>.idx``; return a ``PackResult``.

    ``progress(done, total)`` is called after each list entry. Bad images are skipped (logged,
    listed in the result); any other error leaves no output published.
    """
    root = os.path.abspath(root)
    entries, bad_lines = read_list(lst_path)
    skipped = _list_skips(lst_path, bad_lines)
    for skip in skipped:
        log.warning("skipped %s: %s", skip.path, skip.reason)
    rec_path, idx_path = output_paths(lst_path)
    results = iter_encoded(entries, root, options, num_workers=num_workers, timeout=timeout)
    with contextlib.closing(results), RecordWriter(rec_path, idx_path) as writer:
        for done, (entry, (payload, reason)) in enumerate(zip(entries, results), 1):
            if reason is None:
                writer.write(payload, key=entry.index)
            else:
                skip = Skipped(os.path.join(root, entry.path), reason, entry.index)
                log.warning("skipped %s (list index %d): %s", skip.path, entry.index, reason)
                skipped.append(skip)
            if progress is not None:
                progress(done, len(entries))
            if done % LOG_EVERY == 0:
                log.info("%s: %d/%d images", lst_path, done, len(entries))
        written = writer.count
    log.info("packed %s: %d records, %d skipped", rec_path, written, len(skipped))
    return PackResult(lst_path, rec_path, idx_path, written, skipped)


def pack_prefix(prefix, root, options=PackOptions(), *, num_workers=1, progress=None,
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
