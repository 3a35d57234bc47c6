"""``retrofit_restarts``: restart markers added to the JPEGs of a ``.rec`` already packed, without
packing it again (``recpipe retrofit``).

Every record is read (checked against the ``.sums`` sidecar when there is one), its image given
restart markers losslessly (``image.restart.add_restarts``: the DCT coefficients written back,
checked, so every decoder gives the same pixels; progressive JPEGs, PNGs and records that are
not images are copied as they are), and the record header, labels, index key and record order
are kept. The new ``.rec``, ``.idx``, ``.sums`` and, when the source had one, the
``.sources.jsonl`` sidecar (same source files, new offsets) are written under temporary names
and published as one commit (``packing.shards.ShardWriter``): over the source (the default) or
under another name. Nothing is published when anything fails.

The images are transcoded by ``threads`` threads (libjpeg runs without the GIL), a bounded
batch of records at a time.
"""

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Callable, Optional

from ..errors import RecordFormatError
from ..image.restart import RestartPolicy, add_restarts, restarts_available
from ..io.format import frame
from ..io.format.header import unpack
from ..io.sidecars.names import index_url_for
from ..io.reader import RecordReader
from ..io.sidecars.record_sources import RecordSources
from .jobs import default_workers
from .shards import ShardWriter, SourceFile

__all__ = ["RetrofitSummary", "retrofit_restarts"]

log = logging.getLogger(__name__)

_BATCH = 256  # records in flight at a time


@dataclass
class RetrofitSummary:
    """What ``retrofit_restarts`` did: ``restarted`` images given markers, ``unchanged`` records
    copied as they were (not a JPEG that can take them), bytes of the ``.rec`` before and after."""

    src: str
    out: str
    restart: str
    records: int = 0
    restarted: int = 0
    unchanged: int = 0
    input_bytes: int = 0
    output_bytes: int = 0
    sources: bool = False  # a sources sidecar was carried over
    seconds: float = 0.0

    def to_dict(self):
        return asdict(self)


def _rec_url(out):
    out = str(out)
    return out if out.endswith(".rec") else out + ".rec"


def _with_markers(payload, policy):
    """``payload`` with its image given restart markers, or None (left as it is)."""
    try:
        _, image = unpack(payload)
    except Exception:  # noqa: BLE001 - not an image record: copied as it is
        return None
    restarted = add_restarts(image, policy)
    if restarted is None:
        return None
    return bytes(payload[:len(payload) - len(image)]) + restarted


def _check_order(reader):
    offsets = reader.offsets.array
    if len(offsets) > 1 and not (offsets[1:] > offsets[:-1]).all():
        raise ValueError(f"{reader.url}: its index does not list the records in file order: "
                         "retrofit writes them in file order, so the index order would change; "
                         "rebuild the index (recpipe index --force) or pack again")


def _source_of(sources, offset, key, url):
    entry = sources.lookup(offset, key)
    if entry is None:
        raise ValueError(f"{sources.url} has no entry for the record at byte {offset} of {url}: "
                         "pass sources=False (--no-sources) to write the file without it")
    return SourceFile(entry.path, entry.size, entry.sha256)


def retrofit_restarts(src: str, out: Optional[str] = None, *, restart="auto",
                      threads: Optional[int] = None, sources: bool = True,
                      storage_options: Optional[dict] = None,
                      progress: Optional[Callable[[int, int], None]] = None) -> RetrofitSummary:
    """Give the JPEGs of ``src`` (a ``.rec`` beside its ``.idx``) restart markers, losslessly.

    ``out``: where to publish (a ``.rec`` URL or prefix); None replaces ``src`` and its
    companions. ``restart``: ``"auto"`` or MCU rows per interval (``image.restart``).
    ``sources=False`` leaves a ``.sources.jsonl`` sidecar out. ``progress(done, total)`` is
    called after each batch of records. Returns a ``RetrofitSummary``.
    """
    started = time.perf_counter()
    policy = RestartPolicy.parse(restart)
    if policy is None:
        raise ValueError("restart='off' adds no markers: give 'auto' or a number of MCU rows")
    if not restarts_available():
        raise ImportError("retrofit needs recpipe's libjpeg extension (recpipe._batch): install "
                          "the libjpeg-turbo headers and reinstall recpipe")
    out_rec = _rec_url(out) if out is not None else str(src)
    summary = RetrofitSummary(str(src), out_rec, RestartPolicy.name(policy))
    threads = threads or max(1, default_workers())
    with RecordReader(str(src), storage_options=storage_options, key_type=str) as reader:
        _check_order(reader)
        total = len(reader)
        summary.input_bytes = reader.size
        sidecar = RecordSources.open(str(src), storage_options, rec_size=reader.size) \
            if sources else None
        try:
            if sidecar is not None and sidecar.records != total:
                raise ValueError(f"{sidecar.url} lists {sidecar.records} records, {src} has "
                                 f"{total}: pass sources=False (--no-sources) to leave it out")
            writer = ShardWriter(out_rec, index_url_for(out_rec), storage_options,
                                 sources_root=sidecar.root if sidecar is not None else None)
            try:
                _rewrite(reader, writer, sidecar, policy, threads, summary, progress)
                writer.publish()
            except BaseException:
                writer.abandon(keep=False)
                raise
        finally:
            if sidecar is not None:
                sidecar.close()
    summary.sources = sidecar is not None
    summary.seconds = time.perf_counter() - started
    return summary


def _rewrite(reader, writer, sidecar, policy, threads, summary, progress):
    total, keys = len(reader), reader.keys
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="recpipe-retrofit") as pool:
        for first in range(0, total, _BATCH):
            positions = range(first, min(first + _BATCH, total))
            payloads = [_read_whole(reader, position) for position in positions]
            converted = list(pool.map(lambda payload: _with_markers(payload, policy), payloads))
            for position, payload, new in zip(positions, payloads, converted):
                offset = int(reader.offsets[position])
                key = _key(keys[position])
                source = _source_of(sidecar, offset, key, reader.url) if sidecar else None
                writer.write(payload if new is None else new, key, source)
                summary.records += 1
                summary.restarted += new is not None
                summary.unchanged += new is None
            if progress is not None:
                progress(summary.records, total)
    summary.output_bytes = writer.offset


def _key(text):
    """An index key as read (text), as an int when it is one: the sources sidecar writes keys
    as JSON, and ``recpipe pack`` writes integer keys."""
    try:
        number = int(text)
    except ValueError:
        return text
    return number if str(number) == text else text


def _read_whole(reader, position):
    """The payload at ``position``, which must fill its span: bytes between two indexed records
    (records the index does not list) would be lost."""
    payload = reader.read(position)
    start, end = reader.span(position)
    if len(frame(payload)) != end - start:
        raise RecordFormatError(
            f"{end - start - len(frame(payload))} bytes after record {position} are not listed "
            f"by the index (unindexed records?): retrofit keeps only indexed records; rebuild "
            f"the index (recpipe index --force) first", path=reader.url, offset=start,
            record=position)
    return payload
