"""Whole-file jobs on a Dask LocalCluster against one process.

For each job - ``verify --decode --write-sums``, ``index``, ``extract`` - and each data set
(the photos packed pass-through, 112 px faces), the one-machine call (``verify``,
``rebuild_index``, ``extract_records`` with its default 4 threads) and the same job in chunk
tasks on LocalClusters of 1 and 2 worker processes (one thread each;
``recpipe.packing.wholefile``), alternated. The clusters are started once, before the rounds
(their start is timed apart). Every output is checked against the one-process run's (same
report, sidecar, index, files), after the clock stops.

Reported: wall seconds, the ratio one process / cluster, CPU seconds (this process plus the
workers' tasks), and per chunk: bytes, walk seconds (the job's own work in the task), task
overhead (open, version check, saving the result), the driver's plan and merge seconds; then
the scaling model for N workers made of those per-chunk figures. ``trim_ab`` instead times
``verify --decode``'s walk in workers started with Dask's ``MALLOC_TRIM_THRESHOLD_=65536``
and as ``--dask local`` starts them (glibc's own settings), and in this process.
"""

import contextlib
import json
import os
import shutil
import statistics
import time

from .. import data
from ..format import figure, fmt, fmt_ratio, ratio
from ..harness import Ratio, Skip, Suite, Table, suite

MODES = ("one process", "dask 1 worker", "dask 2 workers")


def _clear(rec):
    sums = rec[:-4] + ".sums"
    if os.path.exists(sums):
        os.remove(sums)


def job_verify(rec, scratch, cluster, chunk):
    from recpipe.decode.decoders import get_decoder
    from recpipe.io.health.verify import verify
    from recpipe.packing.wholefile import verify_on_cluster

    _clear(rec)
    if cluster is None:
        report, run = verify(rec, decoder=get_decoder("auto"), write_sums=True), None
    else:
        report, run = verify_on_cluster(rec, decoder=get_decoder("auto"), write_sums=True,
                                        cluster=cluster)

    def output():
        with open(rec[:-4] + ".sums", "rb") as f:
            return json.dumps(report.to_dict(), sort_keys=True), f.read()
    return output, run


def job_index(rec, scratch, cluster, chunk):
    from recpipe.io.sidecars.rebuild import rebuild_index
    from recpipe.packing.wholefile import index_on_cluster

    out = os.path.join(scratch, "x.idx")
    run = None
    if cluster is None:
        rebuild_index(rec, out)
    else:
        _, run = index_on_cluster(rec, out, cluster=cluster)

    def output():
        with open(out, "rb") as f:
            return f.read()
    return output, run


def job_extract(rec, scratch, cluster, chunk):
    from recpipe.packing.extract import extract_records
    from recpipe.packing.wholefile import extract_on_cluster

    out = os.path.join(scratch, "extract")
    shutil.rmtree(out, ignore_errors=True)
    run = None
    if cluster is None:
        extract_records(rec, out, shard_size=chunk)
    else:
        _, run = extract_on_cluster(rec, out, shard_size=chunk, cluster=cluster)

    def output():
        files = {}
        for root, _, names in os.walk(out):
            for name in names:
                with open(os.path.join(root, name), "rb") as f:
                    files[os.path.relpath(os.path.join(root, name), out)] = f.read()
        return files
    return output, run


JOBS = {"verify --decode --write-sums": job_verify, "index": job_index, "extract": job_extract}


def chunk_figures(run, size, wall):
    """One cluster run's per-chunk figures (medians over its chunks)."""
    receipts = run.receipts
    nbytes = [r.get("stop", 0) - r.get("start", 0) or r.get("bytes", 0) for r in receipts]
    driver = {k: run.seconds.get(k, 0.0) for k in ("plan", "map", "merge")}
    return {"chunks": run.chunks, "bytes_per_chunk": statistics.median(nbytes),
            "tail_s": max(0.0, wall - sum(driver.values())),
            "cpu_s_per_mb": sum(r["cpu_seconds"] for r in receipts) / max(sum(nbytes) / 1e6,
                                                                          1e-9),
            "walk_s": statistics.median(r["walk_seconds"] for r in receipts),
            "overhead_s": statistics.median(r["seconds"] - r["walk_seconds"] for r in receipts),
            "task_cpu_s": statistics.median(r["cpu_seconds"] for r in receipts),
            "plan_s": driver["plan"], "map_s": driver["map"], "merge_s": driver["merge"],
            "file_bytes": size}


def model(figures, size, workers, chunk_bytes):
    """Predicted wall seconds of a file of ``size`` bytes on ``workers`` one-thread workers,
    each with a core of its own: plan (per chunk) + waves of chunk tasks (the task's CPU per
    byte plus the per-task overhead) + the driver's merge and tail (per byte). Storage
    bandwidth is not in it: cap by size / B."""
    per_byte = figures["cpu_s_per_mb"] / 1e6
    chunks = max(1, -(-size // chunk_bytes))
    task = chunk_bytes * per_byte + figures["overhead_s"]
    waves = -(-chunks // workers)
    scale = size / figures["file_bytes"]
    plan = figures["plan_s"] / max(1, figures["chunks"]) * chunks
    return plan + waves * task + (figures["merge_s"] + figures["tail_s"]) * scale


def _walk_photos(rec):
    """``verify --decode``'s walk of the whole file in this process: (wall, CPU) seconds."""
    from recpipe.decode.decoders import get_decoder
    from recpipe.packing.wholefile import ClusterOptions, verify_on_cluster

    wall, cpu = time.perf_counter(), time.process_time()
    verify_on_cluster(rec, decoder=get_decoder("auto"), sums=False,
                      cluster=ClusterOptions(dask=None, chunk_bytes=1 << 40))
    return {"wall_s_inside": time.perf_counter() - wall, "cpu_s_inside": time.process_time() - cpu}


@suite
class WholeFile(Suite):
    name = "wholefile"
    title = "Whole-file jobs (verify, index, extract) on a Dask cluster against one process"
    grid = {"data": ("photos", "faces"), "job": tuple(JOBS)}
    options = {"faces": 20000, "photos": 1000, "chunk": "8MB", "trim_ab": False}
    quick = {"data": ("photos",), "job": ("index",), "faces": 300, "photos": 100,
             "chunk": "1MB"}
    repeats = 3
    warmup = 0  # the one-process run before the rounds is the warm-up and the reference

    def prepare(self):
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise Skip("dask[distributed] is not installed (recpipe[dask])") from None
        from recpipe.packing.cluster import dask_client
        from recpipe.packing.packer import parse_size

        o = self.options
        self.chunk = parse_size(o["chunk"])
        folder = self.work / "data"
        folder.mkdir(parents=True, exist_ok=True)
        self.recs = {}
        if "photos" in o["data"] or o["trim_ab"]:
            self.recs["photos"] = self._copy(data.photos_rec(self.work.parent / "data",
                                                             o["photos"]), folder)
        if "faces" in o["data"]:
            self.recs["faces"] = self._copy(data.faces_rec(self.work.parent / "data",
                                                           o["faces"]), folder)
        self.scratch = str(self.work / "scratch")
        os.makedirs(self.scratch, exist_ok=True)
        self.stack = contextlib.ExitStack()
        self.started = {}
        if o["trim_ab"]:
            return self._prepare_trim()
        self.clusters = {}
        for n in (1, 2):  # as `--dask local --workers n` starts them
            t = time.perf_counter()
            self.clusters[n] = self.stack.enter_context(dask_client("local", n))
            self.clusters[n].wait_for_workers(n)
            self.started[n] = time.perf_counter() - t
        return {"description": "; ".join(data.describe_rec(rec, name)["description"]
                                         for name, rec in self.recs.items()),
                "cluster_start_s": self.started}

    @staticmethod
    def _copy(rec, folder):
        """A private copy (the jobs write sidecars beside it)."""
        target = os.path.join(str(folder), os.path.basename(rec))
        if not os.path.exists(target):
            for ext in (".rec", ".idx"):
                shutil.copyfile(rec[:-4] + ext, target[:-4] + ext)
        return target

    def _prepare_trim(self):
        import dask
        import distributed

        from recpipe.packing.cluster import dask_client

        saved = dict(os.environ)
        with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_":
                              65536}):
            cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1,
                                               dashboard_address="127.0.0.1:0")
        os.environ.clear()
        os.environ.update(saved)
        self.stack.enter_context(cluster)
        self.trim_clients = {"Dask's default (65536)": self.stack.enter_context(
                                 distributed.Client(cluster)),
                             "--dask local (unset)": self.stack.enter_context(
                                 dask_client("local", 1))}
        return {"description": data.describe_rec(self.recs["photos"], "photos")["description"]
                + "; trim A/B of verify --decode's walk"}

    def contenders(self, point):
        rec = self.recs[point["data"]]
        if self.options["trim_ab"]:
            if point != {"data": self.options["data"][0], "job": self.options["job"][0]}:
                return {}
            rec = self.recs["photos"]
            found = {name: (lambda c=client: c.submit(_walk_photos, rec, pure=False).result())
                     for name, client in self.trim_clients.items()}
            found["this process"] = lambda: _walk_photos(rec)
            return found
        from recpipe.packing.wholefile import ClusterOptions

        job, size = JOBS[point["job"]], os.path.getsize(rec)
        output, _ = job(rec, self.scratch, None, self.chunk)
        reference = output()  # untimed: the warm-up and what every run must reproduce
        modes = {"one process": None,
                 "dask 1 worker": ClusterOptions(dask=self.clusters[1], chunk_bytes=self.chunk),
                 "dask 2 workers": ClusterOptions(dask=self.clusters[2],
                                                  chunk_bytes=self.chunk)}

        def timed(cluster):
            wall, cpu = time.perf_counter(), time.process_time()
            output, run = job(rec, self.scratch, cluster, self.chunk)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            task_cpu = sum(r.get("cpu_seconds", 0.0) for r in run.receipts) if run else 0.0
            if output() != reference:
                raise RuntimeError(f"{point}: another output than the one process's")
            figures = {"job_wall_s": wall, "job_cpu_s": cpu + task_cpu}
            if run is not None:
                figures.update({f"chunk.{k}": v for k, v in chunk_figures(run, size,
                                                                          wall).items()})
            return figures
        return {mode: (lambda c=cluster: timed(c)) for mode, cluster in modes.items()}

    def ratios(self, point):
        return [Ratio(f"one process / {m}", m, "one process", metric="job_wall_s", invert=True)
                for m in MODES[1:]]

    def facts(self, point):
        return {"bytes": os.path.getsize(self.recs[point["data"]])}

    def close(self):
        if getattr(self, "stack", None):
            self.stack.close()

    @classmethod
    def tables(cls, result):
        if result["options"].get("trim_ab"):
            p = result["points"][0]
            rows = [[name, fmt(figure(p, name, "wall_s_inside"), 2),
                     fmt(figure(p, name, "cpu_s_inside"), 2)] for name in p["contenders"]]
            return [Table("verify --decode's walk in workers with and without Dask's "
                          "MALLOC_TRIM_THRESHOLD_", ["where", "wall s", "CPU s"], rows)]
        rows, chunks, models = [], [], []
        for p in result["points"]:
            key = f"{p['params']['data']}: {p['params']['job']}"
            rows.append([key] + [fmt(figure(p, m, "job_wall_s"), 2) for m in MODES]
                        + [fmt_ratio(ratio(p, "one process / dask 2 workers")),
                           fmt(figure(p, "one process", "job_cpu_s"), 2),
                           fmt(figure(p, "dask 2 workers", "job_cpu_s"), 2)])
            c = {k[len("chunk."):]: figure(p, "dask 2 workers", k) for k in
                 p["contenders"].get("dask 2 workers", {}).get("summary", {})
                 if k.startswith("chunk.")}
            if not c:
                continue
            one = figure(p, "one process", "job_cpu_s") / (p["facts"]["bytes"] / 1e6)
            chunks.append([key, int(c["chunks"]), fmt(c["bytes_per_chunk"] / 1e6, 1),
                           fmt(c["walk_s"], 3), fmt(c["task_cpu_s"], 3), fmt(c["overhead_s"], 3),
                           fmt(c["cpu_s_per_mb"], 4), fmt(one, 4), fmt(c["plan_s"], 2),
                           fmt(c["merge_s"], 2), fmt(c["tail_s"], 2)])
            models.append([key] + [fmt(model(c, 100e9, n, 256 << 20) / 3600, 2)
                                   for n in (1, 2, 8, 32, 128)])
        started = result["dataset"].get("cluster_start_s", {})
        notes = ("LocalCluster start (timed apart): " + ", ".join(
            f"{n} worker(s) {s:.1f} s" for n, s in started.items()) + ".") if started else ""
        return [Table("Whole-file jobs: one process against LocalClusters (wall s, medians)",
                      ["data: job"] + [f"{m} s" for m in MODES]
                      + ["one / dask 2", "CPU s one", "CPU s dask 2"], rows, notes=notes),
                Table("Per chunk, dask 2 workers (medians; CPU s/MB: the tasks', and one "
                      "process's)", ["data: job", "chunks", "MB", "walk s", "task CPU s",
                                     "overhead s", "CPU s/MB", "one CPU s/MB", "plan s",
                                     "merge s", "tail s"], chunks),
                Table("Model: 100 GB of this data in 256 MiB chunks on N one-thread workers "
                      "(hours)", ["data: job", "N=1", "N=2", "N=8", "N=32", "N=128"], models,
                      notes="Made of the per-chunk figures above (each worker a core of its "
                            "own; storage bandwidth not modelled).")]
