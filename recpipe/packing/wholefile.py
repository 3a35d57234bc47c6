"""``verify``, ``index`` and ``extract`` of one ``.rec`` on a Dask cluster, with the same output
as on one machine.

- ``verify_on_cluster``: ``verify(..., spans=...)``: each byte-range chunk (``chunks``) is
  walked by a task with ``verify.SpanChecks.part`` (framing, checksums, decoding), and the
  parts are merged in file order before ``verify`` checks the index, clears the quarantine
  and, with ``write_sums``, publishes the sidecar (``io.sums``' own builder);
- ``index_on_cluster``: each task lists the record heads (and header ids) of its span; the
  ``.idx`` is written by ``rebuild.write_index`` as on one machine;
- ``extract_on_cluster``: ``extract_records`` with its chunk tasks (record ranges of its own
  plan, cut from the ``.idx``, each published with its marker) run as Dask tasks.

Chunk results wait in a work folder beside the output (or in ``ClusterOptions.work_dir``), so an
interrupted run continues where it stopped; outputs are published atomically once every chunk
succeeded, then the folder is removed. Local paths are made absolute for the workers; every
file must be reachable from every worker.
"""

import contextlib
import copy
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ..errors import RecordFormatError
from ..io.sidecars.index import resolve_index_url
from ..io.sidecars.rebuild import index_target, record_id, write_index
from ..io.format.scan import scan_records
from ..io.sources import open_source
from ..io.health.verify import verify
from .chunks import (ChunkResult, ChunkTaskError, DaskChunks, LocalChunks, WorkFolder,
                     chunk_bytes_for, file_version, map_chunks, timeout_for, work_url_for)
from .cluster import absolute_url, cluster_info, dask_client, run_tasks
from .lifeline import single_thread_opencv

__all__ = ["ClusterOptions", "ClusterRun", "extract_on_cluster", "index_on_cluster",
           "verify_on_cluster"]

log = logging.getLogger(__name__)


@dataclass
class ClusterOptions:
    """Where and how a whole-file job runs: ``dask`` ("local" starts a ``LocalCluster`` of
    ``workers`` processes; a scheduler address; a ``distributed.Client``; None: the chunks run
    one after the other in this process), ``chunk_bytes`` (None: up to 256 MiB, at least two
    chunks per worker thread), ``work_dir`` (the folder the work folder is made in; None:
    beside the output)."""

    dask: Any = "local"
    workers: Optional[int] = None
    chunk_bytes: Optional[int] = None
    work_dir: Optional[str] = None

    def __post_init__(self):
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers={self.workers} must be >= 1")
        if self.chunk_bytes is not None and self.chunk_bytes < 1:
            raise ValueError(f"chunk size {self.chunk_bytes} must be >= 1 byte")


@dataclass
class ClusterRun:
    """What a run on the cluster did: the cluster (scheduler, workers, threads; None in this
    process), its chunks (planned, kept from an interrupted run, walked again from a corrected
    start, left out because the walk before covered them), the chunk size and each chunk
    task's receipt (bytes ``start``..``stop``, ``end``, ``records``, ``seconds``,
    ``cpu_seconds``)."""

    cluster: Optional[dict] = None
    chunk_bytes: int = 0
    chunks: int = 0
    resumed: int = 0
    repaired: int = 0
    skipped: int = 0
    seconds: dict = field(default_factory=dict)
    receipts: list = field(default_factory=list, repr=False)

    def take(self, stats, merge_seconds=0.0):
        """The stats of a ``ChunkRun`` (and the seconds spent following and merging)."""
        for name in ("chunks", "resumed", "repaired", "skipped"):
            setattr(self, name, stats[name])
        self.receipts = list(stats["receipts"])
        self.seconds = {"plan": stats.get("plan_seconds", 0.0),
                        "map": stats.get("map_seconds", 0.0), "merge": merge_seconds}

    def to_dict(self):
        return {"cluster": self.cluster, "chunk_bytes": self.chunk_bytes, "chunks": self.chunks,
                "resumed": self.resumed, "repaired": self.repaired, "skipped": self.skipped,
                "seconds": self.seconds}


@contextlib.contextmanager
def _runner(options, size, run, decodes=False):
    """The chunk runner of ``options`` and the chunk size for a file of ``size`` bytes."""
    if options.dask is None:
        run.chunk_bytes = chunk_bytes_for(size, 1, options.chunk_bytes)
        yield LocalChunks()
        return
    with dask_client(options.dask, options.workers) as client:
        info = cluster_info(client)
        log.info("Dask cluster %s: %d workers, %d threads; dashboard: %s", info["scheduler"],
                 info["workers"], info["threads"], info["dashboard"])
        if decodes and str(options.dask) == "local":
            client.run(single_thread_opencv)
        run.cluster = info
        run.chunk_bytes = chunk_bytes_for(size, info["threads"], options.chunk_bytes)
        yield DaskChunks(client, info)


# --- verify -----------------------------------------------------------------------------------

class _VerifyTask:
    """A chunk task of ``verify``: the empty ``SpanChecks`` part of its span (copied before
    each walk: a task may run twice)."""

    def __init__(self, part):
        self.part = part

    def __call__(self, source, span):
        part = copy.deepcopy(self.part)
        facts, arrays = part.walk(source, span.start, span.stop)
        return ChunkResult(facts, arrays)


class _VerifySpans:
    """``verify``'s ``spans``: the checks in chunk tasks, merged in file order."""

    def __init__(self, options, url, index_url, storage_options, run):
        self.options = options
        self.url = url
        self.index_url = index_url
        self.storage_options = storage_options
        self.run = run
        self.chunks = None

    def __call__(self, checks, source, progress):
        checks.prepare(source)
        work = WorkFolder(work_url_for(self.url, "verify", self.options.work_dir),
                          self.storage_options)
        heads = []
        with _runner(self.options, source.size, self.run, checks.checker is not None) as runner:
            self.chunks = map_chunks(lambda span: _VerifyTask(checks.part(*span)), source,
                                     runner=runner, work=work,
                                     job={"job": "verify", **checks.key()},
                                     chunk_bytes=self.run.chunk_bytes, url=self.url,
                                     index_url=self.index_url,
                                     storage_options=self.storage_options, locate=absolute_url,
                                     progress=progress)
            merging = time.perf_counter()
            for result, first in _in_order(self.chunks):
                heads.append(checks.merge(result.meta, result.arrays, first))
        self.run.take(self.chunks.stats, time.perf_counter() - merging)
        return np.concatenate(heads) if heads else np.zeros(0, dtype=np.int64)


def verify_on_cluster(url, index_url=None, *, cluster=None, decoder=None, storage_options=None,
                      limit=1000, progress=None, sums=True, write_sums=False,
                      accept_current_bytes=False):
    """``verify`` (same arguments, same report and sidecar) with the file walked in byte-range
    chunk tasks on ``cluster`` (``ClusterOptions``). Returns ``(VerifyReport, ClusterRun)``."""
    options = cluster or ClusterOptions()
    run = ClusterRun()
    spans = _VerifySpans(options, str(url), index_url, storage_options, run)
    report = verify(url, index_url, decoder=decoder, storage_options=storage_options,
                    limit=limit, progress=progress, sums=sums, write_sums=write_sums,
                    accept_current_bytes=accept_current_bytes, spans=spans)
    if spans.chunks is not None:
        spans.chunks.finish()  # the report is made and the sidecar published
    return report, run


# --- index ------------------------------------------------------------------------------------

class _IndexTask:
    """A chunk task of ``index``: the heads of the records of its span, their header ids, and
    its unreadable byte ranges."""

    def __init__(self, need_ids):
        self.need_ids = need_ids

    def __call__(self, source, span):
        offsets, ids, bad, end = [], [], [], span.start
        for item in scan_records(source, keep_payload=self.need_ids, start=span.start,
                                 stop=span.stop):
            end = item.end
            if item.error is not None:
                error = item.error
                bad.append([item.offset, item.end, error.reason, error.offset, error.record])
                continue
            offsets.append(item.offset)
            if self.need_ids:
                ids.append(record_id(item.payload))
        return ChunkResult({"end": end, "records": len(offsets), "bad": bad},
                           {"offsets": np.array(offsets, dtype=np.int64),
                            "ids": np.array(ids, dtype=np.int64)})


def index_on_cluster(url, index_url=None, *, cluster=None, positions=False, skip_bad=False,
                     storage_options=None, progress=None):
    """``rebuild_index`` (same arguments, same ``.idx``) with the file walked in byte-range chunk
    tasks on ``cluster`` (``ClusterOptions``). Returns ``(IndexRebuild, ClusterRun)``."""
    options = cluster or ClusterOptions()
    url = str(url)
    index_url = index_target(url, index_url)
    run = ClusterRun()
    offsets, ids, skipped = [], [], 0
    work = WorkFolder(work_url_for(index_url, "index", options.work_dir), storage_options)
    task = _IndexTask(not positions)
    with open_source(url, storage_options) as source, \
            _runner(options, source.size, run) as runner:
        chunks = map_chunks(lambda span: task, source, runner=runner, work=work,
                            job={"job": "index", "ids": not positions},
                            chunk_bytes=run.chunk_bytes, url=url, index_url=None,
                            storage_options=storage_options, locate=absolute_url,
                            progress=progress)
        merging = time.perf_counter()
        for result, first in _in_order(chunks):
            for start, end, reason, offset, record in result.meta["bad"]:
                if not skip_bad:  # the first bad range, as one walk raises it
                    raise RecordFormatError(reason, path=url, offset=offset,
                                            record=None if record is None else record + first)
                log.warning("%s: skipping bytes %d..%d: %s", url, start, end, reason)
                skipped += 1
            offsets.append(result.arrays["offsets"])
            ids.append(result.arrays["ids"])
    run.take(chunks.stats, time.perf_counter() - merging)
    result = write_index(index_url, _joined(offsets), _joined(ids), positions=positions,
                         skipped=skipped, storage_options=storage_options)
    chunks.finish()
    return result, run


def _in_order(chunks):
    """``(result, first_record)`` of each chunk in file order."""
    first = 0
    for result in chunks.results():
        yield result, first
        first += result.meta["records"]


def _joined(arrays):
    return np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)


# --- extract ----------------------------------------------------------------------------------

_readers_lock = threading.Lock()
_readers: dict = {}  # in a worker: (src, index, options, version) -> (reader, positions)


def _open_for_extract(src, index_url, storage_options, version):
    """The ``RecordReader`` of ``src`` and the positions ``extract_records`` extracts, kept
    open in this worker process for the next chunk of the same file version (the index is
    read once per worker, not once per chunk)."""
    from ..io.reader import RecordReader
    from .extract import extract_positions

    with open_source(src, storage_options) as source:
        found = file_version(source)
    if found != version:
        raise RuntimeError(f"{src} changed since the extract was planned ({version}, now "
                           f"{found}): run the command again")
    key = (src, index_url, repr(storage_options), version)
    with _readers_lock:
        if key not in _readers:
            for reader, _ in _readers.values():
                reader.close()
            _readers.clear()
            reader = RecordReader(src, index_url, storage_options)
            _readers[key] = (reader, extract_positions(reader))
        return _readers[key]


@dataclass(frozen=True)
class _ExtractTask:
    src: str
    index_url: str
    out: str
    format: str
    storage_options: Optional[dict]
    version: str
    chunk: tuple  # (number, start, stop) of extract_records' plan
    folders: object = None  # the plan's ClassFolders


def _extract_task(task):
    """One chunk of an extract (in a worker): its receipt (``images``, ``bytes``, seconds)."""
    from .extract import extract_chunk

    started, cpu = time.perf_counter(), time.process_time()
    reader, positions = _open_for_extract(task.src, task.index_url, task.storage_options,
                                          task.version)
    number, start, stop = task.chunk
    walking = time.perf_counter()
    images, nbytes = extract_chunk(reader, positions, task.out, number, start, stop,
                                   format=task.format, storage_options=task.storage_options,
                                   folders=task.folders)
    return {"number": number, "images": images, "bytes": nbytes,
            "walk_seconds": time.perf_counter() - walking,
            "seconds": time.perf_counter() - started, "cpu_seconds": time.process_time() - cpu}


def extract_on_cluster(src, out, *, cluster=None, index_url=None, format="folder",
                       shard_size=None, storage_options=None, progress=None, label_map=None,
                       overwrite=False):
    """``extract_records`` (same arguments, same files, markers and list) with its chunks
    extracted by Dask tasks on ``cluster`` (``ClusterOptions``; ``dask`` must be set): the
    ``.idx`` (every worker reads it) plans the chunks. Returns ``(ExtractSummary,
    ClusterRun)``."""
    from .extract import DEFAULT_SHARD_BYTES, extract_records

    options = cluster or ClusterOptions()
    if options.dask is None:
        raise ValueError("extract_on_cluster needs a Dask cluster (ClusterOptions.dask)")
    src = str(src)
    index_path = resolve_index_url(src, index_url, storage_options)
    if not index_path:
        raise ValueError(f"extract --dask needs the .idx of {src} (every worker reads it to "
                         f"find its records): write it with `recpipe index {src} --dask ...`")
    run = ClusterRun()
    with open_source(src, storage_options) as source:
        version = file_version(source)
    with dask_client(options.dask, options.workers) as client:
        run.cluster = cluster_info(client)
        if str(options.dask) == "local":
            client.run(single_thread_opencv)

        def run_chunks(todo, folders):
            tasks = [_ExtractTask(absolute_url(src), absolute_url(index_path), absolute_url(out),
                                  format, storage_options, version, tuple(chunk), folders)
                     for chunk in todo]

            def done(i, receipt):
                if receipt is not None:
                    run.receipts.append(receipt)
                    if progress is not None:
                        progress(receipt["bytes"])

            deadline = timeout_for(shard_size or DEFAULT_SHARD_BYTES)
            mapping = time.perf_counter()
            _, failures = run_tasks(client, _extract_task, tasks, name="extract",
                                    deadline=deadline, on_done=done, retries=1, what="chunk")
            if failures:
                raise ChunkTaskError([(todo[i][0], f"records {todo[i][1]}..{todo[i][2]}", error)
                                      for i, error in failures], out)
            run.seconds["map"] = time.perf_counter() - mapping

        summary = extract_records(src, out, index_url=index_path, format=format,
                                  shard_size=shard_size or DEFAULT_SHARD_BYTES,
                                  storage_options=storage_options, progress=None,
                                  label_map=label_map, overwrite=overwrite,
                                  chunk_runner=run_chunks)
    run.resumed = summary.resumed_chunks
    run.chunks = summary.chunks
    return summary, run
