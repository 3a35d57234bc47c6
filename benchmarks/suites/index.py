"""Face-scale indexes: opening a 17.1M-record ``.idx`` (Glint360K's size) and planning an epoch.

A synthetic ``.idx`` (records 7 KiB apart, keys 0..N-1 as im2rec and InsightFace write them)
beside a sparse ``.rec`` (``benchmarks.data.index_files``); each run is a fresh process:

- ``first open``: ``RecordReader`` opening it with no index cache (the text is parsed);
- ``later open``: opening it again (the memory-mapped cache);
- ``loader``: a shuffled ``ImageLoader`` built and its first epoch planned (``iter``);

and, once: one process looking keys up, then 4 forked processes doing the same: their summed
proportional set size (``/proc/PID/smaps_rollup``) against the one process's.

Targets (issue 33: the ``.idx`` parsed in C): first open <= 1 s at 17.1M records (2.5 s at
42M), later <= 0.5 s, loader and its shuffled epoch plan <= 1 s, every process <= 400 MB peak
RSS at 17.1M, 4 forked processes <= 1.5x the PSS of one.

    python -m benchmarks index --set records=42000000    # WebFace42M's size, if memory allows
"""

import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

from .. import data
from ..format import figure, fmt
from ..harness import REPO, Suite, Table, suite

TARGETS = {"first open": 1.0, "later open": 0.5, "loader": 1.0}
FIRST_OPEN_TARGET_42M = 2.5


def targets_for(records):
    """The seconds each measure may take at ``records`` records."""
    if records >= 40_000_000:
        return dict(TARGETS, **{"first open": FIRST_OPEN_TARGET_42M})
    return TARGETS
RSS_TARGET_MB = 400
PSS_RATIO_TARGET = 1.5
MODES = {"first open": "first", "later open": "later", "loader": "loader"}


def _rss_mb():
    """Peak RSS of this process (VmHWM: unlike ru_maxrss it does not count the RSS of the
    process this one was forked from before exec)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _pss_mb(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _lookups(reader, count=200_000, seed=0):
    """Key lookups and spans as a DataLoader worker makes them; touches the whole table."""
    rng = np.random.default_rng(seed)
    n = len(reader)
    total = 0
    for key in rng.integers(0, n, count).tolist():
        start, end = reader.span(reader.position_of_key(key))
        total += end - start
    total += int(reader.table.offsets.sum() % 7)
    total += int(reader.table.ends(reader.size)[::4096].sum() % 7)
    return total


def child(mode, rec):
    """One measurement in this (fresh) process."""
    from recpipe.io.sidecars.index_cache import cache_path
    from recpipe.io.reader import RecordReader

    idx = rec[:-4] + ".idx"
    if mode in ("first", "later"):
        if mode == "first" and os.path.exists(cache_path(idx)):
            os.unlink(cache_path(idx))
        start = time.perf_counter()
        reader = RecordReader(rec)
        seconds = time.perf_counter() - start
        records = len(reader)
        reader.close()
        return {"seconds": seconds, "rss_mb": _rss_mb(), "records": records}
    if mode == "loader":
        from recpipe.decode.loader import ImageLoader

        start = time.perf_counter()
        loader = ImageLoader(rec, 128, (3, 112, 112), shuffle=True, threads=1, seed=3,
                             rand_mirror=True, lookahead=False)
        epoch = iter(loader)
        seconds = time.perf_counter() - start
        batches = len(epoch)
        loader.close()
        return {"seconds": seconds, "rss_mb": _rss_mb(), "batches": batches}
    if mode == "pss":
        return _pss(rec)
    raise ValueError(mode)


def _pss(rec):
    from recpipe.io.reader import RecordReader

    reader = RecordReader(rec)
    _lookups(reader)
    one = _pss_mb(os.getpid())
    children, pipes = [], []
    for i in range(4):
        read, write = os.pipe()
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            _lookups(reader, seed=i + 1)
            os.write(write, b"x")
            os.read(go_r, 1)  # stay alive until measured
            os._exit(0)
        os.close(write)
        children.append(pid)
        pipes.append((read, go_w))
    for read, _ in pipes:
        os.read(read, 1)
    forked = [_pss_mb(pid) for pid in children]
    parent = _pss_mb(os.getpid())
    for read, go in pipes:
        os.write(go, b"x")
        os.close(read)
        os.close(go)
    for pid in children:
        os.waitpid(pid, 0)
    return {"one_mb": one, "forked_mb": forked, "parent_after_mb": parent,
            "ratio": sum(forked) / one, "rss_mb": _rss_mb()}


def run_child(mode, rec):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    done = subprocess.run([sys.executable, "-m", "benchmarks.suites.index", mode, rec],
                          capture_output=True, text=True, timeout=600, cwd=str(REPO), env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{mode} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@suite
class Index(Suite):
    name = "index"
    title = "Face-scale indexes: opening a 17.1M-record .idx and planning an epoch"
    grid = {"records": (17_100_000,)}
    quick = {"records": (100_000,)}
    repeats = 3
    warmup = 1  # the first run writes the index cache the later opens read

    def prepare(self):
        self.recs = {n: data.index_files(self.work.parent / "data", n)
                     for n in self.options["records"]}
        return {"description": "synthetic face-scale files: a .idx of N lines (records 7 KiB "
                               "apart, keys 0..N-1) beside a sparse .rec whose first 256 records "
                               "are real 112x112 JPEGs (N = records)"}

    def contenders(self, point):
        rec = self.recs[point["records"]]
        return {name: (lambda mode=mode: run_child(mode, rec)) for name, mode in MODES.items()}

    def facts(self, point):
        rec = self.recs[point["records"]]
        return {"idx_mb": os.path.getsize(rec[:-4] + ".idx") / 1e6,
                "pss": run_child("pss", rec)}

    @classmethod
    def tables(cls, result):
        rows, pss_rows = [], []
        for p in result["points"]:
            n = f"{p['params']['records']:,}"
            for name, limit in targets_for(p['params']['records']).items():
                spread = figure(p, name, "seconds", "spread")
                rows.append([n, name, fmt(figure(p, name, "seconds"), 3),
                             f"{spread[0]:.3f}-{spread[1]:.3f}" if spread else "",
                             f"<= {limit:g} s", fmt(figure(p, name, "rss_mb"), 0),
                             f"<= {RSS_TARGET_MB}"])
            pss = p["facts"].get("pss", {})
            if pss:
                pss_rows.append([n, fmt(p["facts"]["idx_mb"], 0), fmt(pss["one_mb"], 0),
                                 ", ".join(f"{v:.0f}" for v in pss["forked_mb"]),
                                 f"{pss['ratio']:.2f}x", f"<= {PSS_RATIO_TARGET}x"])
        return [Table("Opening a face-scale index and planning a shuffled epoch (seconds, fresh "
                      "processes)", ["records", "measure", "median s", "range s", "target",
                                     "peak RSS MB", "RSS target"], rows),
                Table("Memory shared by forked readers (DataLoader workers): PSS after 200k "
                      "key lookups each", ["records", ".idx MB", "one process PSS MB",
                                           "4 forked PSS MB", "sum / one", "target"],
                      pss_rows)]


if __name__ == "__main__":  # a child measurement: python -m benchmarks.suites.index MODE REC
    print(json.dumps(child(sys.argv[1], sys.argv[2])))
