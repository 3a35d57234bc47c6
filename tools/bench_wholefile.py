"""Whole-file jobs on a Dask LocalCluster against one process (issue 37, item 3).

For each job - ``verify --decode --write-sums``, ``index``, ``extract`` - and each data set, the
one-machine call (``verify``, ``rebuild_index``, ``extract_records`` with its default 4 threads)
and the same job in chunk tasks on LocalClusters of 1 and 2 worker processes (one thread each;
``recpipe.packing.wholefile``), in ONE script run, alternated (the order rotates each round) and
repeated. The clusters are started once, before the rounds (their start is timed apart). Every
output is checked against the one-process run's (same report, sidecar, index, files).

Reported: wall seconds (median), the ratio one process / cluster, CPU seconds (this process plus
the workers' tasks; each output is read and compared after the clock stops), and per chunk:
bytes, records, walk seconds (the job's own work in the task), task overhead (open, version
check, saving the result: task seconds - walk seconds), and the driver's seconds (plan, waiting
for the tasks, following and merging); then the scaling model for N workers made of those
per-chunk figures (BENCHMARKS.md, whole-file jobs).

    python tools/bench_wholefile.py --rounds 3            # table; --json for the raw figures
"""

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

PHOTOS = next((p for p in (os.path.join(HERE, "..", "..", "shared", "data", "photos"),
                            "/work/shared/data/photos") if os.path.isdir(p)),
              os.path.join(HERE, "..", "..", "shared", "data", "photos"))


def make_photos_rec(folder):
    """``folder/photos.rec``: the shared photos packed as they are (one file, .idx)."""
    from recpipe.packing.packer import pack_dataset

    rec = os.path.join(folder, "photos.rec")
    if not os.path.exists(rec):
        pack_dataset(PHOTOS, os.path.join(folder, "photos"), pass_through=True, shuffle=False)
    return rec


def make_faces_rec(folder, count):
    spec = importlib.util.spec_from_file_location("bench_faces",
                                                  os.path.join(HERE, "bench_faces.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_faces(folder, count, photos=PHOTOS)


def _clear(rec):
    sums = rec[:-4] + ".sums"
    if os.path.exists(sums):
        os.remove(sums)


def job_verify(rec, scratch, cluster):
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


def job_index(rec, scratch, cluster):
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


def job_extract(rec, scratch, cluster):
    from recpipe.packing.extract import extract_records
    from recpipe.packing.wholefile import extract_on_cluster

    out = os.path.join(scratch, "extract")
    shutil.rmtree(out, ignore_errors=True)
    run = None
    if cluster is None:
        extract_records(rec, out, shard_size=CHUNK)
    else:
        _, run = extract_on_cluster(rec, out, shard_size=CHUNK, cluster=cluster)
    def output():
        files = {}
        for root, _, names in os.walk(out):
            for name in names:
                with open(os.path.join(root, name), "rb") as f:
                    files[os.path.relpath(os.path.join(root, name), out)] = f.read()
        return files

    return output, run


JOBS = {"verify --decode --write-sums": job_verify, "index": job_index, "extract": job_extract}
CHUNK = 8 << 20


def timed(job, rec, scratch, cluster):
    """The job's wall and CPU seconds (this process and the tasks'), then its output (read
    after the clock stopped)."""
    wall, cpu = time.perf_counter(), time.process_time()
    output, run = job(rec, scratch, cluster)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    task_cpu = sum(r.get("cpu_seconds", 0.0) for r in run.receipts) if run else 0.0
    return {"wall": wall, "cpu": cpu + task_cpu, "run": run}, output()


def chunk_figures(runs, size, walls):
    """Per-chunk medians over the cluster runs of one job (``walls``: their wall seconds)."""
    receipts = [r for run in runs for r in run.receipts]
    walks = [r["walk_seconds"] for r in receipts]
    overhead = [r["seconds"] - r["walk_seconds"] for r in receipts]
    nbytes = [r.get("stop", 0) - r.get("start", 0) or r.get("bytes", 0) for r in receipts]
    seconds = {k: statistics.median(run.seconds.get(k, 0.0) for run in runs)
               for k in ("plan", "map", "merge")}
    # the driver after the merge: the index check, the sidecar, the .lst (verify, extract)
    tail = statistics.median(w - sum(run.seconds.get(k, 0.0) for k in ("plan", "map", "merge"))
                             for w, run in zip(walls, runs))
    return {"chunks": runs[0].chunks, "bytes_per_chunk": statistics.median(nbytes),
            "tail_s": max(0.0, tail),
            "cpu_s_per_mb": sum(r["cpu_seconds"] for r in receipts) / max(sum(nbytes) / 1e6,
                                                                          1e-9),
            "walk_s": statistics.median(walks), "overhead_s": statistics.median(overhead),
            "cpu_s": statistics.median(r["cpu_seconds"] for r in receipts),
            "walk_mb_per_s": sum(nbytes) / 1e6 / max(sum(walks), 1e-9),
            "driver_s": seconds, "file_bytes": size}


def model(figures, size, workers, chunk_bytes):
    """Predicted wall seconds of a file of ``size`` bytes on ``workers`` one-thread workers,
    each with a core of its own: plan (per chunk) + waves of chunk tasks (the task's CPU per
    byte - on a core of its own a task's wall is its CPU - plus the per-task overhead) + the
    driver's merge and tail (per byte). Storage bandwidth is not in it: cap by size / B."""
    per_byte = figures["cpu_s_per_mb"] / 1e6
    chunks = max(1, -(-size // chunk_bytes))
    task = chunk_bytes * per_byte + figures["overhead_s"]
    waves = -(-chunks // workers)
    scale = size / figures["file_bytes"]
    plan = figures["driver_s"]["plan"] / max(1, figures["chunks"]) * chunks
    return plan + waves * task + (figures["driver_s"]["merge"] + figures["tail_s"]) * scale


def _walk_photos(rec):
    """``verify --decode``'s walk of the whole file in this process: (wall, CPU) seconds."""
    from recpipe.decode.decoders import get_decoder
    from recpipe.packing.wholefile import ClusterOptions, verify_on_cluster

    wall, cpu = time.perf_counter(), time.process_time()
    verify_on_cluster(rec, decoder=get_decoder("auto"), sums=False,
                      cluster=ClusterOptions(dask=None, chunk_bytes=1 << 40))
    return time.perf_counter() - wall, time.process_time() - cpu


def trim_ab(rec, rounds):
    """The same walk in a 1-worker cluster started with Dask's MALLOC_TRIM_THRESHOLD_=65536
    and in one started as ``--dask local`` starts it (glibc's own settings), alternated."""
    import dask
    import distributed

    from recpipe.packing.cluster import dask_client

    saved = dict(os.environ)
    with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": 65536}):
        dask_default = distributed.LocalCluster(n_workers=1, threads_per_worker=1,
                                                dashboard_address="127.0.0.1:0")
    os.environ.clear()
    os.environ.update(saved)
    seen = {"Dask's default (65536)": [], "--dask local (unset)": [], "this process": []}
    with dask_default, distributed.Client(dask_default) as default, \
            dask_client("local", 1) as ours:
        for k in range(rounds):
            seen["Dask's default (65536)"].append(
                default.submit(_walk_photos, rec, pure=False).result())
            seen["--dask local (unset)"].append(ours.submit(_walk_photos, rec, pure=False).result())
            seen["this process"].append(_walk_photos(rec))
    for name, runs in seen.items():
        print(f"{name:24} wall {statistics.median(w for w, _ in runs):5.2f}s  "
              f"CPU {statistics.median(c for _, c in runs):5.2f}s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--faces", type=int, default=20000, help="faces in faces.rec")
    parser.add_argument("--dir", default="/tmp/recpipe-bench-wholefile")
    parser.add_argument("--chunk", default="8MB", help="chunk bytes of the cluster runs")
    parser.add_argument("--only", default="", help="comma-separated jobs to run")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--table", metavar="FILE", help="print the tables of a --json output")
    parser.add_argument("--trim-ab", action="store_true",
                        help="only: verify --decode's walk in workers with and without Dask's "
                             "MALLOC_TRIM_THRESHOLD_")
    args = parser.parse_args()
    if args.table:
        with open(args.table) as f:
            saved = json.load(f)
        print_tables(saved["started_s"], saved["results"])
        return

    from recpipe.packing.cluster import dask_client
    from recpipe.packing.packer import parse_size
    from recpipe.packing.wholefile import ClusterOptions

    global CHUNK
    CHUNK = parse_size(args.chunk)
    os.makedirs(args.dir, exist_ok=True)
    if args.trim_ab:
        trim_ab(make_photos_rec(args.dir), args.rounds)
        return
    data = {"photos": make_photos_rec(args.dir), "faces": make_faces_rec(args.dir, args.faces)}
    scratch = os.path.join(args.dir, "scratch")
    os.makedirs(scratch, exist_ok=True)
    clusters, started = {}, {}
    stack = contextlib.ExitStack()
    for n in (1, 2):  # as `--dask local --workers n` starts them
        t = time.perf_counter()
        clusters[n] = stack.enter_context(dask_client("local", n))
        clusters[n].wait_for_workers(n)
        started[n] = time.perf_counter() - t
    modes = {"one process": None,
             "dask 1 worker": ClusterOptions(dask=clusters[1], chunk_bytes=CHUNK),
             "dask 2 workers": ClusterOptions(dask=clusters[2], chunk_bytes=CHUNK)}
    results = {}
    jobs = [j for j in JOBS if not args.only or any(o in j for o in args.only.split(","))]
    with stack:
        for name, rec in data.items():
            size = os.path.getsize(rec)
            for job in jobs:
                timings = {mode: [] for mode in modes}
                _, reference = timed(JOBS[job], rec, scratch, None)  # warm-up; the reference
                order = list(modes)
                for k in range(args.rounds):
                    for mode in order[k % len(order):] + order[:k % len(order)]:
                        figures, output = timed(JOBS[job], rec, scratch, modes[mode])
                        assert output == reference, f"{name} {job} {mode}: another output"
                        timings[mode].append((figures, None))
                        print(f"{name} {job} {mode}: {figures['wall']:.2f}s", file=sys.stderr)
                entry = {"bytes": size}
                for mode, runs in timings.items():
                    entry[mode] = {"wall_s": statistics.median(f["wall"] for f, _ in runs),
                                   "cpu_s": statistics.median(f["cpu"] for f, _ in runs)}
                    if modes[mode] is not None:
                        entry[mode]["chunk"] = chunk_figures([f["run"] for f, _ in runs], size,
                                                             [f["wall"] for f, _ in runs])
                results[f"{name}: {job}"] = entry
    if args.json:
        print(json.dumps({"started_s": started, "results": results}, indent=2))
        return
    print_tables(started, results)


def print_tables(started, results):
    """The tables of a run (``--table FILE`` prints them from a ``--json`` run's output)."""
    modes = ("one process", "dask 1 worker", "dask 2 workers")
    started = {int(k): v for k, v in started.items()}
    print(f"LocalCluster start: 1 worker {started[1]:.1f}s, 2 workers {started[2]:.1f}s")
    print(f"{'data: job':40} {'one s':>7} {'dask1 s':>8} {'dask2 s':>8} {'one/dask2':>9} "
          f"{'CPU one':>8} {'CPU dask2':>9}")
    for key, entry in results.items():
        one, d1, d2 = (entry[m] for m in modes)
        print(f"{key:40} {one['wall_s']:7.2f} {d1['wall_s']:8.2f} {d2['wall_s']:8.2f} "
              f"{one['wall_s'] / d2['wall_s']:9.2f} {one['cpu_s']:8.2f} {d2['cpu_s']:9.2f}")
    print("\nper chunk (dask 2 workers, medians; CPU s/MB: the tasks', and one process's):")
    print(f"{'data: job':40} {'chunks':>6} {'MB':>5} {'walk s':>7} {'task CPU':>8} "
          f"{'ovh s':>6} {'CPU s/MB':>8} {'one':>6} {'plan s':>6} {'merge s':>7} {'tail s':>6}")
    for key, entry in results.items():
        c = entry["dask 2 workers"]["chunk"]
        one = entry["one process"]["cpu_s"] / (entry["bytes"] / 1e6)
        print(f"{key:40} {c['chunks']:6d} {c['bytes_per_chunk'] / 1e6:5.1f} {c['walk_s']:7.3f} "
              f"{c['cpu_s']:8.3f} {c['overhead_s']:6.3f} {c['cpu_s_per_mb']:8.4f} {one:6.4f} "
              f"{c['driver_s']['plan']:6.2f} {c['driver_s']['merge']:7.2f} {c['tail_s']:6.2f}")
    print("\nmodel: 100 GB of this data in 256 MiB chunks on N one-thread workers (hours)")
    for key, entry in results.items():
        c = entry["dask 2 workers"]["chunk"]
        hours = [model(c, 100e9, n, 256 << 20) / 3600 for n in (1, 2, 8, 32, 128)]
        print(f"{key:40} " + " ".join(f"N={n}: {h:6.2f}" for n, h in
                                      zip((1, 2, 8, 32, 128), hours)))


if __name__ == "__main__":
    main()
