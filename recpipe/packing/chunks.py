"""Whole-file jobs in byte-range chunks: a ``.rec`` split at record boundaries, each chunk a task
(on a Dask cluster), each chunk's result kept durably, the results merged in file order.

``verify``, ``index`` and (through its own chunk plan) ``extract`` run on a cluster with this
(``wholefile``). The steps:

- **Plan** (``plan_spans``): cut the file into spans ``[start, stop)`` of about ``chunk_bytes``
  starting at record heads: the ``.idx`` offsets when there is an index, else the framing scan
  (``find_next_head``: the next 4-byte-aligned magic word with a head's cflag). Every candidate
  is read as a whole record before it is taken (``is_record_head``).
- **Map** (``map_chunks``): one task per span (``chunk_task``) walks the records of its span
  exactly as ``scan_records`` walks the file (``start``/``stop``) and saves its result (a
  ``ChunkResult``: JSON facts and numpy arrays, no pickle) in the work folder
  (``WorkFolder``) beside the output, keyed by the file's version and the job's options: a run
  interrupted, or a task lost with its worker, is continued by running the same command again,
  and a changed file is never resumed.
- **Follow** (``ChunkRun.results``): the results in file order, each checked to start where
  the walk before it stopped. A walk from byte 0 is deterministic, so a span whose start is
  a position of that walk gives exactly that walk's items; a start that is not one (an aligned
  magic inside a payload of a file whose writer did not escape it, damage, a wrong ``.idx``)
  shows as the walk before it stopping elsewhere, and the span is walked again from there
  (a "repair" task). The merged results are therefore those of one walk of the whole file,
  whatever the boundaries.

Nothing is published until every chunk succeeded: the caller publishes (atomically) after
``results`` was consumed, then removes the work folder (``ChunkRun.finish``).
"""

import io
import json
import logging
import math
import os
import re
import time
import zipfile
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Protocol

import numpy as np

from ..errors import RecordFormatError
from ..io.atomic import publish
from ..io.sidecars.index import resolve_index_url
from ..io.sidecars.opening import load_index_table
from ..io.format.scan import SlidingBuffer, find_next_head, read_record
from ..io.sources import open_source, source_identity, url_to_fs

__all__ = ["CHUNK_TIMEOUT_RATE", "ChunkCall", "ChunkResult", "ChunkRun", "ChunkTaskError",
           "DEFAULT_CHUNK_BYTES", "DaskChunks", "FileChangedError", "LocalChunks",
           "MIN_CHUNK_BYTES", "Span", "WorkFolder", "chunk_bytes_for", "chunk_task",
           "file_version", "is_record_head", "map_chunks", "plan_spans", "timeout_for",
           "work_url_for"]

log = logging.getLogger(__name__)

DEFAULT_CHUNK_BYTES = 256 << 20  # a chunk task's bytes when the caller does not say
MIN_CHUNK_BYTES = 1 << 20  # default chunks are never smaller (per-task costs)
SPANS_PER_THREAD = 2  # default chunks: at least this many per worker thread
CHUNK_TIMEOUT_RATE = 1 << 20  # a chunk may take its bytes / this rate (seconds) ...
CHUNK_TIMEOUT_SLACK = 120.0  # ... plus this (scheduling, opening the file, saving)
_INDEX_CANDIDATES = 8  # .idx offsets tried at a boundary before the framing scan
_FORMAT = 1  # of plan.json and the chunk results


class Span(NamedTuple):
    """Bytes ``[start, stop)`` of the file; ``start`` is where a chunk's walk begins."""

    start: int
    stop: int


class FileChangedError(RuntimeError):
    """The file a chunk task opened is not the version the run was planned on."""


class ChunkTaskError(OSError):
    """Chunk tasks failed (on a cluster: a worker could not read or write, or was lost too
    often); ``failures``: ``[(number, "bytes a..b" or "records a..b", "Type: message")]``. The
    chunks that completed are kept: running the same command again continues."""

    def __init__(self, failures, kept_in):
        self.failures = list(failures)
        self.kept_in = kept_in
        shown = "; ".join(f"chunk {n} ({where}): {e}" for n, where, e in self.failures[:5])
        more = f" (and {len(self.failures) - 5} more)" if len(self.failures) > 5 else ""
        super().__init__(f"{len(self.failures)} chunk task(s) failed: {shown}{more}; the "
                         f"completed chunks are kept in {kept_in}: run the same command again "
                         "to continue")


def file_version(source):
    """What names one version of an open file, as every worker sees it: a local file's size
    and modification time (its path may differ between machines sharing it), a remote
    object's URL, size and ETag (or modification time)."""
    descriptor = getattr(source, "descriptor", None)
    if descriptor is not None:
        st = os.fstat(descriptor())
        return f"local|{st.st_size}|{st.st_mtime_ns}"
    return source_identity(source)


# --- plan -------------------------------------------------------------------------------------

def chunk_bytes_for(size, threads, chunk_bytes=None):
    """``chunk_bytes`` when given; else ``DEFAULT_CHUNK_BYTES``, made smaller (down to
    ``MIN_CHUNK_BYTES``) so that every worker thread gets ``SPANS_PER_THREAD`` chunks."""
    if chunk_bytes:
        if chunk_bytes < 1:
            raise ValueError(f"chunk size {chunk_bytes} must be >= 1 byte")
        return int(chunk_bytes)
    share = math.ceil(size / max(1, SPANS_PER_THREAD * threads))
    return max(MIN_CHUNK_BYTES, min(DEFAULT_CHUNK_BYTES, share))


def is_record_head(source, pos, window=None, follow=1):
    """True when a whole record (every part head and length within the file) reads at ``pos``,
    and ``follow`` more records after it (or the file ends): a magic word inside a payload
    followed by a plausible length rarely passes, and one that does is caught when the chunks
    are followed (``ChunkRun.results``)."""
    if pos % 4 or pos < 0 or pos >= source.size:
        return False
    window = window or SlidingBuffer(source, 1 << 16)
    try:
        for _ in range(1 + follow):
            _, pos = read_record(window, pos, keep_payload=False)
            if pos >= source.size:
                break
    except RecordFormatError:
        return False
    return True


def _index_offsets(source, url, index_url, storage_options):
    """The sorted distinct offsets of the ``.idx`` (None when there is none or it does not
    parse): candidates for the boundaries."""
    try:
        index_path = resolve_index_url(url, index_url, storage_options)
        if not index_path:
            return None
        table = load_index_table(index_path, storage_options, rec_url=url)
    except (OSError, RecordFormatError) as e:
        log.info("%s: boundaries from the framing scan (the index is not usable: %s)", url, e)
        return None
    offsets = np.unique(np.asarray(table.offsets, dtype=np.int64))
    return offsets[(offsets > 0) & (offsets < source.size) & (offsets % 4 == 0)]


def _boundary(source, target, limit, offsets, window):
    """The first record head at or after ``target`` and before ``limit``, or None: from the
    ``.idx`` offsets when they give one, else by the framing scan."""
    if offsets is not None:
        at = int(np.searchsorted(offsets, target))
        for pos in offsets[at:at + _INDEX_CANDIDATES].tolist():
            if pos >= limit:
                return None
            if is_record_head(source, pos, window):
                return pos
    pos = target
    while pos < limit:
        found = find_next_head(source, pos, limit)
        if found is None:
            return None
        if is_record_head(source, found, window):
            return found
        pos = found + 4
    return None


def plan_spans(source, chunk_bytes, *, url=None, index_url=None, storage_options=None):
    """Spans of about ``chunk_bytes`` covering the file, each starting at a record head (see the
    module docstring); ``index_url`` as for ``verify`` (None: the ``.idx`` beside, False:
    none)."""
    size = source.size
    if size <= chunk_bytes:
        return [Span(0, size)]
    offsets = None
    if index_url is not False:
        offsets = _index_offsets(source, url or source.url, index_url, storage_options)
    window = SlidingBuffer(source, 1 << 16)
    starts = [0]
    for k in range(1, math.ceil(size / chunk_bytes)):
        target = max(k * chunk_bytes, starts[-1] + 4)
        found = _boundary(source, target, min((k + 1) * chunk_bytes, size), offsets, window)
        if found is not None and found > starts[-1]:
            starts.append(found)
    return [Span(a, b) for a, b in zip(starts, starts[1:] + [size])]


# --- results and the work folder --------------------------------------------------------------

class ChunkResult:
    """What a chunk task found: ``meta`` (JSON: ``start``, ``end`` - where its walk stopped -,
    ``records``, and the job's facts) and ``arrays`` (name -> numpy array). Stored as an
    ``.npz`` read back without pickle."""

    def __init__(self, meta, arrays=None):
        self.meta = dict(meta)
        self.arrays = dict(arrays or {})

    @property
    def start(self):
        return self.meta["start"]

    @property
    def end(self):
        return self.meta["end"]

    def to_bytes(self):
        buffer = io.BytesIO()
        meta = np.frombuffer(json.dumps(self.meta).encode("utf-8"), dtype=np.uint8)
        np.savez(buffer, __meta__=meta, **self.arrays)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data):
        """The result stored in ``data``; ValueError when it is not one (damaged, or holding
        Python objects: never unpickled)."""
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as stored:
                meta = json.loads(stored["__meta__"].tobytes().decode("utf-8"))
                arrays = {name: stored[name] for name in stored.files if name != "__meta__"}
        except (zipfile.BadZipFile, EOFError, KeyError, UnicodeDecodeError) as e:
            raise ValueError(f"not a chunk result: {type(e).__name__}: {e}") from None
        if not isinstance(meta, dict):
            raise ValueError("not a chunk result: its facts are not a JSON object")
        return cls(meta, arrays)


def work_url_for(output_url, job, folder=None):
    """The work folder of ``job`` writing ``output_url``: a hidden folder beside it, or in
    ``folder`` when given."""
    output_url = str(output_url).rstrip("/")
    head, _, name = output_url.rpartition("/")
    if folder:
        head = str(folder).rstrip("/")
    return f"{head}/.{name}.{job}-chunks" if head else f".{name}.{job}-chunks"


# what a work folder holds: its plan, chunk results, and their temporary names (atomic.publish)
_WORK_FILE = re.compile(r"^\.?(plan\.json|chunk-\d{6}\.npz)(\.[0-9a-f]{12}\.tmp)?$")


class WorkFolder:
    """The per-chunk results of one job on one version of one file: ``plan.json`` (the file,
    its version, the job's options and the spans) and ``chunk-NNNNNN.npz``, each published
    atomically by the task that made it."""

    def __init__(self, url, storage_options=None):
        self.url = str(url).rstrip("/")
        self.storage_options = storage_options

    def _fs(self):
        return url_to_fs(self.url, self.storage_options)

    def chunk_url(self, number):
        return f"{self.url}/chunk-{number:06d}.npz"

    def start(self, plan):
        """The spans and the chunk numbers already done: those of an earlier run of the same
        job on the same version of the file (``plan`` without ``spans``), else none (what is
        there is removed, and ``plan`` saved)."""
        fs, path = self._fs()
        earlier = self._read_plan(fs, path)
        if earlier is not None and {k: v for k, v in earlier.items() if k != "spans"} == plan:
            spans = [Span(int(a), int(b)) for a, b in earlier["spans"]]
            done = self._done(fs, path, len(spans))
            log.info("%s: continuing an interrupted run (%d of %d chunks done)", self.url,
                     len(done), len(spans))
            return spans, done
        if earlier is not None or fs.exists(path):
            log.info("%s holds the chunks of another file, version or job: starting over",
                     self.url)
            self.remove()
        return None, set()

    def save_plan(self, plan, spans):
        data = dict(plan, spans=[[s.start, s.stop] for s in spans])
        publish(f"{self.url}/plan.json", json.dumps(data).encode("utf-8"), self.storage_options)

    def _read_plan(self, fs, path):
        try:
            with fs.open(f"{path}/plan.json", "rb") as f:
                plan = json.loads(f.read(1 << 26).decode("utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:  # damaged: start over
            log.warning("%s/plan.json is unreadable (%s): starting over", self.url, e)
            return {}
        return plan if isinstance(plan, dict) else {}

    def _done(self, fs, path, count):
        fs.invalidate_cache(path)
        names = {entry["name"].rstrip("/").rsplit("/", 1)[-1]
                 for entry in fs.ls(path, detail=True) if entry.get("type") == "file"}
        return {n for n in range(count) if f"chunk-{n:06d}.npz" in names}

    def save(self, number, result):
        publish(self.chunk_url(number), result.to_bytes(), self.storage_options)

    def load(self, number):
        """The stored result of chunk ``number``, or None when it is missing or unreadable."""
        fs, _ = self._fs()
        url = self.chunk_url(number)
        try:
            _, path = url_to_fs(url, self.storage_options)
            with fs.open(path, "rb") as f:
                result = ChunkResult.from_bytes(f.read())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:  # a damaged result: computed again
            log.warning("%s is unreadable (%s): computing that chunk again", url, e)
            return None
        facts = result.meta
        if facts.get("number") != number or not all(
                isinstance(facts.get(k), int) for k in ("start", "end", "records")):
            log.warning("%s is not chunk %d's result: computing that chunk again", url, number)
            return None
        return result

    def remove(self):
        """Remove the plan, the results and their temporary files, then the folder if that
        left it empty: never anything else that is there."""
        fs, path = self._fs()
        try:
            fs.invalidate_cache(path)
            entries = fs.ls(path, detail=True)
        except FileNotFoundError:
            return
        for entry in entries:
            name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
            if entry.get("type") == "file" and _WORK_FILE.match(name):
                fs.rm(entry["name"])
            else:
                log.warning("%s: leaving %s (not a chunk result)", self.url, name)
        try:
            fs.rmdir(path)
        except (FileNotFoundError, OSError):  # not empty, or no folders (object stores)
            pass


# --- tasks ------------------------------------------------------------------------------------

class ChunkCall(NamedTuple):
    """One chunk task: ``walk(source, span) -> ChunkResult`` over ``span`` of ``url`` (opened
    with ``storage_options``; its messages name ``display_url``), which must be ``version``;
    the result is saved as chunk ``number`` in the work folder ``work_url``."""

    walk: Callable
    url: str
    display_url: str
    storage_options: Optional[dict]
    version: str
    number: int
    span: Span
    work_url: str


def chunk_task(call):
    """Run one chunk (in a worker): walk its span, save the result, return a receipt (``meta``
    with the chunk's seconds and CPU seconds)."""
    started, cpu = time.perf_counter(), time.process_time()
    with open_source(call.url, call.storage_options) as source:
        found = file_version(source)
        if found != call.version:
            raise FileChangedError(f"{call.display_url} changed since the run was planned "
                                   f"({call.version}, now {found}): run the command again")
        if call.url != call.display_url:
            source.url = call.display_url  # messages name the file as the user did
        walking = time.perf_counter()
        result = call.walk(source, call.span)
        walked = time.perf_counter() - walking
    result.meta.update(number=call.number, start=call.span.start, stop=call.span.stop)
    WorkFolder(call.work_url, call.storage_options).save(call.number, result)
    receipt = {k: result.meta[k] for k in ("number", "start", "stop", "end", "records")}
    receipt.update(walk_seconds=walked, seconds=time.perf_counter() - started,
                   cpu_seconds=time.process_time() - cpu)
    return receipt


class ChunkRunner(Protocol):
    """Where chunk tasks run (``LocalChunks`` here, ``wholefile.DaskChunks`` on a cluster)."""

    def run(self, calls: List[ChunkCall], on_done) -> List[tuple]:
        """Run ``chunk_task`` on every call; ``on_done(call, receipt)`` as each finishes;
        returns the failures ``[(call, "Type: message")]``."""

    def run_one(self, call: ChunkCall) -> dict:
        """Run one call now and return its receipt (raises on failure)."""


class LocalChunks:
    """Chunk tasks run one after the other in this process (tests, small files)."""

    workers = 1
    threads = 1

    def run(self, calls, on_done):
        for call in calls:
            on_done(call, chunk_task(call))
        return []

    def run_one(self, call):
        return chunk_task(call)


# --- the run ----------------------------------------------------------------------------------

class ChunkRun:
    """One job's chunks on one file: planned, run (``map_chunks``), then followed in file
    order (``results``); ``finish`` removes the work folder once the caller has published.
    ``stats``: chunks, resumed, repaired and skipped ones, each chunk task's receipt, and the
    seconds spent planning (and saving the plan) and running the tasks."""

    def __init__(self, runner, work, calls, done):
        self.runner = runner
        self.work = work
        self.calls = calls
        self.stats: Dict[str, Any] = {"chunks": len(calls), "resumed": len(done),
                                      "repaired": 0, "skipped": 0, "receipts": []}

    def results(self):
        """The chunk results in file order, each starting where the walk before it stopped
        (spans that do not are walked again from there; spans that walk passed over are
        left out)."""
        expected = 0
        for call in self.calls:
            span = call.span
            result = self.work.load(call.number)
            if result is None:  # removed or damaged since it was run
                result = self._rerun(call, span)
            while result is not None and result.start != expected:
                if expected >= span.stop:  # the walk before it went past the whole span
                    log.info("chunk %d (bytes %d..%d) lies inside a record (or unreadable "
                             "range) that the walk before it covered", call.number, span.start,
                             span.stop)
                    self.stats["skipped"] += 1
                    result = None
                    break
                log.warning("chunk %d starts at byte %d, but the walk before it stops at %d "
                            "(not a record boundary: a magic word inside a payload, damage, or "
                            "a wrong .idx); walking it again from there", call.number,
                            result.start, expected)
                self.stats["repaired"] += 1
                span = Span(expected, span.stop)
                result = self._rerun(call, span)
            if result is None:
                continue
            expected = result.end
            yield result
        last = self.calls[-1].span.stop if self.calls else 0
        if expected != last:
            raise RuntimeError(f"the chunks' walk ended at byte {expected}, not {last}")

    def _rerun(self, call, span):
        call = call._replace(span=span)
        self.stats["receipts"].append(self.runner.run_one(call))
        result = self.work.load(call.number)
        if result is None:
            raise RuntimeError(f"chunk {call.number} ran but its result is not in {self.work.url}")
        return result

    def finish(self):
        """Remove the work folder (after the merged output was published)."""
        self.work.remove()


def map_chunks(walk, source, *, runner, work, job, chunk_bytes, url=None, index_url=None,
               storage_options=None, locate=str, progress=None):
    """Run ``walk`` (``walk(span) -> callable(source, span) -> ChunkResult``, picklable) over
    the chunks of ``source`` on ``runner``; returns the ``ChunkRun`` to follow. ``job``: a
    JSON-able description of what the results depend on besides the file (options); ``work``:
    the ``WorkFolder``; ``locate``: the file's URL as workers must open it; ``progress(bytes)``
    as chunks finish (resumed ones at once). Raises ``ChunkTaskError`` when chunk tasks failed
    (the others are kept)."""
    started = time.perf_counter()
    url = str(url or source.url)
    version = file_version(source)
    plan = json.loads(json.dumps({"format": _FORMAT, "file": url, "version": version,
                                  "job": job}))  # as it reads back
    spans, done = work.start(plan)
    if spans is None:
        spans = plan_spans(source, chunk_bytes, url=url, index_url=index_url,
                           storage_options=storage_options)
        work.save_plan(plan, spans)
    calls = [ChunkCall(walk(span), locate(url), url, storage_options, version, number, span,
                       locate(work.url))
             for number, span in enumerate(spans)]
    run = ChunkRun(runner, work, calls, done)
    run.stats["plan_seconds"] = time.perf_counter() - started
    if progress is not None:
        resumed = sum(c.span.stop - c.span.start for c in calls if c.number in done)
        if resumed:
            progress(resumed)
    todo = [call for call in calls if call.number not in done]
    log.info("%s: %d chunk task(s) of about %d bytes (%d kept from an earlier run)", url,
             len(todo), chunk_bytes, len(done))

    def finished(call, receipt):
        if receipt is not None:
            run.stats["receipts"].append(receipt)
            if progress is not None:
                progress(call.span.stop - call.span.start)

    mapping = time.perf_counter()
    failures = runner.run(todo, finished) if todo else []
    run.stats["map_seconds"] = time.perf_counter() - mapping
    if failures:
        raise ChunkTaskError([(call.number, f"bytes {call.span.start}..{call.span.stop}", error)
                              for call, error in sorted(failures, key=lambda f: f[0].number)],
                             work.url)
    return run


def timeout_for(chunk_bytes):
    """Seconds a chunk task may take (``CHUNK_TIMEOUT_RATE`` and ``CHUNK_TIMEOUT_SLACK``)."""
    return CHUNK_TIMEOUT_SLACK + chunk_bytes / CHUNK_TIMEOUT_RATE


class DaskChunks:
    """Chunk tasks on a Dask cluster (``cluster.run_tasks``): each wait for the next one to
    finish bounded by ``timeout_for`` the largest chunk. A task may run twice (a worker lost
    while it ran, or one retry after it raised): its result is the same."""

    def __init__(self, client, info=None):
        self.client = client
        self.info = info or {}

    def run(self, calls, on_done):
        from .cluster import run_tasks

        deadline = timeout_for(max(call.span.stop - call.span.start for call in calls))
        _, failures = run_tasks(self.client, chunk_task, calls, name="chunk", deadline=deadline,
                                on_done=lambda i, r: on_done(calls[i], r), retries=1,
                                what="chunk")
        return [(calls[i], error) for i, error in failures]

    def run_one(self, call):
        receipts = []
        failures = self.run([call], lambda c, receipt: receipts.append(receipt))
        if failures:
            raise ChunkTaskError([(call.number, f"bytes {call.span.start}..{call.span.stop}",
                                   failures[0][1])], call.work_url)
        return receipts[0]
