"""Face-scale indexes: opening a 17.1M-record ``.idx`` (Glint360K's size) and planning an epoch.

Makes a synthetic ``.idx`` (records 7 KiB apart, keys 0..N-1 as im2rec and InsightFace write
them) beside a sparse ``.rec`` (only the first records are real), then measures, each in a fresh
process:

- ``first``: ``RecordReader`` opening it with no index cache (the text is parsed);
- ``later``: opening it again (the memory-mapped cache);
- ``loader``: a shuffled ``ImageLoader`` built and its first epoch planned (``iter``);
- ``pss``: one process looking keys up, then 4 forked processes doing the same: their summed
  proportional set size (``/proc/PID/smaps_rollup``) against the one process's.

Targets: first open <= 1 s at 17.1M records (2.5 s at 42M), later <= 0.5 s, loader and its
shuffled epoch plan <= 1 s, every process <= 400 MB RSS at 17.1M, 4 forked processes <= 1.5x
the PSS of one.

    python experiments/2026-11-28-idx-in-c/bench_index_trees.py                     # 17.1M records
    python experiments/2026-11-28-idx-in-c/bench_index_trees.py --records 42000000  # WebFace42M
    python experiments/2026-11-28-idx-in-c/bench_index_trees.py --json

``--trees before=/path/to/old/checkout,after=.`` measures source trees against each other in one
run: ``--rounds`` rounds, the trees' order alternating from one round to the next, each mode in a
fresh process of this script importing that tree's recpipe; the
report gives every round's figure and the median per tree.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# recpipe from this checkout, or (a child of --trees) from the tree named in BENCH_TREE
sys.path.insert(0, os.environ.get("BENCH_TREE") or os.path.dirname(os.path.dirname(HERE)))

SPACING = 7168
REAL_RECORDS = 256
TARGETS = {"first": 1.0, "later": 0.5, "loader": 1.0}
FIRST_TARGET_42M = 2.5
RSS_TARGET_MB = 400
PSS_RATIO_TARGET = 1.5


def make(folder, records):
    """``folder/faces.rec`` (sparse) + ``faces.idx``; reused when already there."""
    import cv2

    import recpipe

    rec, idx = os.path.join(folder, "faces.rec"), os.path.join(folder, "faces.idx")
    if os.path.exists(idx) and os.path.getsize(rec) == records * SPACING:
        return rec
    os.makedirs(folder, exist_ok=True)
    with open(idx + ".tmp", "w") as f:
        for start in range(0, records, 1 << 20):
            keys = range(start, min(records, start + (1 << 20)))
            f.write("".join(f"{k}\t{k * SPACING}\n" for k in keys))
    os.replace(idx + ".tmp", idx)
    jpeg = cv2.imencode(".jpg", np.full((112, 112, 3), 128, np.uint8))[1].tobytes()
    with open(rec, "wb") as f:
        f.truncate(records * SPACING)
        for i in range(min(REAL_RECORDS, records)):
            payload = recpipe.pack(recpipe.IRHeader(0, float(i % 100), i, 0), jpeg)
            framed = recpipe.io.frame(payload + b"\0" * (SPACING - 8 - len(payload)))
            assert len(framed) == SPACING  # records back to back, as in a real file
            f.seek(i * SPACING)
            f.write(framed)
    return rec


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
    try:
        from recpipe.io.sidecars.index_cache import cache_path
    except ImportError:  # a tree from before the io wings
        from recpipe.io.index_cache import cache_path
    from recpipe.io.reader import RecordReader

    idx = rec[:-4] + ".idx"
    if mode == "first":
        for path in (cache_path(idx),):
            if os.path.exists(path):
                os.unlink(path)
        start = time.perf_counter()
        reader = RecordReader(rec)
        seconds = time.perf_counter() - start
        assert len(reader) > 0
        reader.close()
        return {"seconds": seconds, "rss_mb": _rss_mb(), "records": len(reader)}
    if mode == "later":
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


def run_child(mode, rec, tree=None):
    """``mode`` measured in a fresh process: of this tree, or of the checkout at ``tree``
    (this script importing that tree's recpipe)."""
    env = None
    if tree is not None:
        env = dict(os.environ, BENCH_TREE=os.path.abspath(tree))
    done = subprocess.run([sys.executable, __file__, "--child", mode, "--rec", rec],
                          capture_output=True, text=True, timeout=600, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{mode} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def compare(records, folder, trees, rounds):
    """``{tree: {mode: [seconds per round]}}``: the trees alternating in order each round."""
    rec = make(folder, records)
    found = {name: {mode: [] for mode in ("first", "later", "loader")} for name in trees}
    names = list(trees)
    for round_ in range(rounds):
        for name in (names if round_ % 2 == 0 else names[::-1]):
            for mode in ("first", "later", "loader"):
                found[name][mode].append(run_child(mode, rec, trees[name]))
    return found


def report_comparison(records, found):
    print(f"{records:,} records: seconds per round (trees alternating), median; peak RSS")
    for name, modes in found.items():
        cells = []
        for mode, runs in modes.items():
            seconds = [r["seconds"] for r in runs]
            rss = max(r["rss_mb"] for r in runs)
            cells.append(f"{mode} {' / '.join(f'{s:.3f}' for s in seconds)} "
                         f"(median {np.median(seconds):.3f} s, {rss:.0f} MB)")
        print(f"  {name:8} " + "; ".join(cells))


def measure(records, folder):
    rec = make(folder, records)
    results = {"records": records, "idx_mb": os.path.getsize(rec[:-4] + ".idx") / 1e6}
    for mode in ("first", "later", "loader", "pss"):
        results[mode] = run_child(mode, rec)
    targets = dict(TARGETS)
    if records >= 40_000_000:
        targets["first"] = FIRST_TARGET_42M
    checks = {f"{mode} <= {limit} s": results[mode]["seconds"] <= limit
              for mode, limit in targets.items()}
    checks[f"RSS <= {RSS_TARGET_MB} MB"] = all(results[m]["rss_mb"] <= RSS_TARGET_MB
                                               for m in ("first", "later", "loader"))
    checks[f"4 forked PSS <= {PSS_RATIO_TARGET}x one"] = results["pss"]["ratio"] <= PSS_RATIO_TARGET
    results["checks"] = checks
    return results


def report(results):
    print(f"{results['records']:,} records, .idx {results['idx_mb']:.0f} MB")
    for mode in ("first", "later", "loader"):
        r = results[mode]
        print(f"  {mode:7} {r['seconds']:7.3f} s   peak RSS {r['rss_mb']:6.0f} MB")
    p = results["pss"]
    print(f"  pss     one process {p['one_mb']:.0f} MB; 4 forked: "
          f"{', '.join(f'{v:.0f}' for v in p['forked_mb'])} MB -> {p['ratio']:.2f}x one")
    for name, ok in results["checks"].items():
        print(f"  {'PASS' if ok else 'FAIL'}  {name}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, action="append",
                        help="index size (repeatable; default 17100000)")
    parser.add_argument("--dir", default="/tmp/recpipe-bench-index")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--trees", help="NAME=PATH,... source trees measured against each other")
    parser.add_argument("--rounds", type=int, default=3, help="rounds with --trees (default 3)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--rec", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.rec)))
        return 0
    if args.trees:
        trees = dict(item.split("=", 1) for item in args.trees.split(","))
        compared = {}
        for records in args.records or [17_100_000]:
            compared[records] = compare(records, os.path.join(args.dir, str(records)), trees,
                                        args.rounds)
            if not args.json:
                report_comparison(records, compared[records])
        if args.json:
            print(json.dumps(compared, indent=2))
        return 0
    all_results = []
    for records in args.records or [17_100_000]:
        results = measure(records, os.path.join(args.dir, str(records)))
        all_results.append(results)
        if not args.json:
            report(results)
    if args.json:
        print(json.dumps(all_results, indent=2))
    return 0 if all(all(r["checks"].values()) for r in all_results) else 1


if __name__ == "__main__":
    sys.exit(main())
