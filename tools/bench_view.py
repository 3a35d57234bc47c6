"""``recpipe view`` at face scale: time to the first thumbnail page and per-page latency on a
17.1M-record file, against the same measurements on a 10,000-record file in the same run.

The files are ``tools/bench_index.py``'s synthetic ones (a 17.1M-line ``.idx``, records 7 KiB
apart, beside a sparse ``.rec`` whose first 256 records are real), with blocks of 128 real
112x112 JPEG records written at seeded places through the file, so that pages deep in it have
pictures to decode. Each round starts a fresh ``recpipe view FILE --recipe faces`` process and
acts as the page does (the page's JSON, then its 48 thumbnails over 6 connections):

- ``up``: process start to the address printed; ``first page``: process start to the last
  thumbnail of page 0 received (the index cache warm, as on every open after the first;
  ``--cold`` also times one start with no index cache);
- ``page``: a page of 48 at a real block deep in the file, JSON and thumbnails (median, p90);
- ``jump``: ``/api/find`` of a random key; ``record``: a record's facts, its picture and 8 draws
  of the recipe (the first one builds the ImageLoader); ``batch``: batch K (128 faces) of
  epoch 0 as JSON plus its 128 PNGs.

Rounds alternate 17.1M and 10K files; ratios are 17.1M over 10K (1.0x: the index size does not
show). Quarantine and index caches go to a temporary folder (the user's are not touched).

    python tools/bench_view.py                  # 17.1M records, 2 rounds each
    python tools/bench_view.py --rounds 3 --cold --json
    python tools/bench_view.py --labels         # the label scan of the 17.1M file, peak RSS
"""

import argparse
import concurrent.futures
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import bench_index  # noqa: E402  (tools/bench_index.py: the synthetic face-scale files)

BLOCK = 128       # real records per block (one batch of the faces recipe, unshuffled)
BLOCKS = 12
PAGE = 48
CONNECTIONS = 6   # what a browser opens to one host


def _jpegs(count=16):
    import cv2

    rng = np.random.default_rng(0)
    out = []
    for i in range(count):
        noise = rng.integers(0, 256, (14, 14, 3), dtype=np.uint8)
        img = cv2.resize(noise, (112, 112), interpolation=cv2.INTER_CUBIC)
        out.append(cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes())
    return out


def block_starts(records, blocks=BLOCKS, seed=0):
    """Seeded block starts (multiples of BLOCK) spread through the file, past the first 256."""
    rng = np.random.default_rng(seed)
    slots = (records - 256) // BLOCK
    chosen = rng.choice(slots, size=min(blocks, slots), replace=False)
    return sorted(int(256 // BLOCK + 1 + s) * BLOCK for s in chosen
                  if (256 // BLOCK + 1 + s) * BLOCK + BLOCK <= records)


def make(folder, records):
    """``bench_index.make``'s file with real blocks written in; returns (rec, block starts)."""
    import recpipe
    from recpipe.io.format.framing import frame

    rec = bench_index.make(folder, records)
    starts = block_starts(records)
    jpegs = _jpegs()
    with open(rec, "r+b") as f:
        for start in starts:
            for i in range(start, start + BLOCK):
                payload = recpipe.pack(recpipe.IRHeader(0, float(i % 100), i, 0), jpegs[i % 16])
                framed = frame(payload + b"\0" * (bench_index.SPACING - 8 - len(payload)))
                assert len(framed) == bench_index.SPACING
                f.seek(i * bench_index.SPACING)
                f.write(framed)
    return rec, starts


def _get(url, timeout=120):
    with urllib.request.urlopen(url, timeout=timeout) as reply:
        return reply.read()


def _page(base, start, pool, token):
    """The page's JSON then its thumbnails, ``CONNECTIONS`` at a time; seconds."""
    t0 = time.perf_counter()
    page = json.loads(_get(f"{base}api/page?order=record&start={start}&count={PAGE}"))
    urls = [f"{base}thumb/{r['position']}.jpg?size=128&v={token}" for r in page["records"]
            if "error" not in r]
    list(pool.map(_get, urls))
    assert len(urls) == PAGE, f"page {start}: {PAGE - len(urls)} unreadable records"
    return time.perf_counter() - t0


def _start(rec, env):
    t0 = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "recpipe", "view", rec, "--recipe", "faces",
                                "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if select.select([process.stdout], [], [], 1.0)[0]:
            line = process.stdout.readline()
            if " at http://" in line:
                return process, line.rsplit(" at ", 1)[1].strip(), t0
        if process.poll() is not None:
            raise RuntimeError(f"recpipe view failed: {process.stderr.read()}")
    process.kill()
    raise RuntimeError("recpipe view did not start in 300 s")


def one_round(rec, starts, env, seed):
    """One fresh viewer process: the timings of one round (seconds)."""
    rng = np.random.default_rng(seed)
    process, base, t0 = _start(rec, env)
    out = {"up": time.perf_counter() - t0}
    try:
        with concurrent.futures.ThreadPoolExecutor(CONNECTIONS) as pool:
            info = json.loads(_get(base + "api/info"))
            _page(base, 0, pool, info["token"])
            out["first_page"] = time.perf_counter() - t0
            pages = [s + int(rng.integers(0, BLOCK - PAGE)) for s in starts]
            out["page"] = [_page(base, p, pool, info["token"])
                           for p in rng.permutation(pages).tolist()]
            records = int(info["records"])
            out["jump"] = []
            for key in rng.integers(0, records, 10).tolist():
                t = time.perf_counter()
                assert json.loads(_get(f"{base}api/find?q={key}"))["position"] == key
                out["jump"].append(time.perf_counter() - t)
            out["record"] = []
            for position in (starts[0] + 5, starts[1] + 9, starts[2] + 17):
                t = time.perf_counter()
                _get(f"{base}api/record/{position}")
                _get(f"{base}picture/{position}.png")
                draws = json.loads(_get(f"{base}api/draws/{position}?n=8"))["draws"]
                list(pool.map(lambda d: _get(base + d["url"].lstrip("/")), draws))
                out["record"].append(time.perf_counter() - t)
            out["batch"] = []
            for start in starts[:3]:
                t = time.perf_counter()
                batch = json.loads(_get(f"{base}api/batch/0/{start // BLOCK}"))
                assert batch["size"] == BLOCK, batch
                list(pool.map(lambda u: _get(base + u.lstrip("/")), batch["images"]))
                out["batch"].append(time.perf_counter() - t)
    finally:
        process.terminate()
        process.communicate(timeout=60)
    return out


def _peak_rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def label_scan(rec, env):
    """Seconds and the server's peak RSS for the label histogram / by-label order of ``rec``
    (every record's head read once, in the server's background thread)."""
    process, base, _ = _start(rec, env)
    try:
        before = _peak_rss_mb(process.pid)
        t0 = time.perf_counter()
        state = json.loads(_get(base + "api/labels?start=1"))
        while state["state"] in ("idle", "running"):
            time.sleep(0.5)
            state = json.loads(_get(base + "api/labels"))
        seconds = time.perf_counter() - t0
        assert state["state"] == "ready", state
        t1 = time.perf_counter()
        json.loads(_get(base + f"api/page?order=label&start={state['records'] // 2}&count={PAGE}"))
        page = time.perf_counter() - t1
        return {"seconds": seconds, "by_label_page": page, "rss_mb_before": before,
                "rss_mb_after": _peak_rss_mb(process.pid), "distinct": state["distinct"]}
    finally:
        process.terminate()
        process.communicate(timeout=60)


def _summary(rounds):
    def stat(values):
        values = sorted(values)
        return {"median": statistics.median(values),
                "p90": values[min(len(values) - 1, int(0.9 * len(values)))], "n": len(values)}

    keys = ("up", "first_page", "page", "jump", "record", "batch")
    pooled = {k: [v for r in rounds for v in (r[k] if isinstance(r[k], list) else [r[k]])]
              for k in keys}
    out = {k: stat(v) for k, v in pooled.items()}
    out["record_first"] = stat([r["record"][0] for r in rounds])
    out["record_later"] = stat([v for r in rounds for v in r["record"][1:]])
    out["batch_first"] = stat([r["batch"][0] for r in rounds])
    out["batch_later"] = stat([v for r in rounds for v in r["batch"][1:]])
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=17_100_000)
    parser.add_argument("--baseline", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cold", action="store_true",
                        help="also time one start with no index cache")
    parser.add_argument("--labels", action="store_true",
                        help="only time the label scan (histogram, by-label order) of the "
                             "big file, with the server's peak RSS")
    parser.add_argument("--dir", default="/tmp/recpipe-bench-view")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    big, big_starts = make(os.path.join(args.dir, "big"), args.records)
    small, small_starts = make(os.path.join(args.dir, "small"), args.baseline)
    scratch = tempfile.mkdtemp(prefix="recpipe-bench-view-")
    env = dict(os.environ, RECPIPE_QUARANTINE_DIR=os.path.join(scratch, "quarantine"),
               RECPIPE_CACHE_DIR=os.path.join(scratch, "cache"))
    results = {"records": args.records, "baseline": args.baseline, "rounds": args.rounds}
    if args.labels:
        try:
            found = label_scan(big, env)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        print(json.dumps(found, indent=2) if args.json else
              f"label scan of {args.records} records: {found['seconds']:.1f} s, a by-label page "
              f"then {found['by_label_page'] * 1e3:.0f} ms; server peak RSS "
              f"{found['rss_mb_before']:.0f} MB before, {found['rss_mb_after']:.0f} MB after")
        return
    try:
        if args.cold:
            shutil.rmtree(env["RECPIPE_CACHE_DIR"], ignore_errors=True)
            results["cold"] = one_round(big, big_starts, env, seed=99)
        runs = {"big": [], "small": []}
        one_round(big, big_starts, env, seed=98)  # the index cache, written once
        for r in range(args.rounds):
            for name, rec, starts in (("big", big, big_starts), ("small", small, small_starts)):
                runs[name].append(one_round(rec, starts, env, seed=r))
        results["big"], results["small"] = _summary(runs["big"]), _summary(runs["small"])
        results["ratio"] = {k: results["big"][k]["median"] / results["small"][k]["median"]
                            for k in results["big"]}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    if "cold" in results:
        cold = results["cold"]
        print(f"cold start ({args.records} records, no index cache): up {cold['up']:.2f} s, "
              f"first page {cold['first_page']:.2f} s")
    print(f"{'':14} {args.records:>14} {args.baseline:>14} {'ratio':>7}")  # medians
    for key in ("up", "first_page", "page", "jump", "record_first", "record_later",
                "batch_first", "batch_later"):
        b, s = results["big"][key], results["small"][key]
        print(f"{key:14} {b['median'] * 1e3:8.1f} ms med {s['median'] * 1e3:8.1f} ms med "
              f"{results['ratio'][key]:6.2f}x   (p90 {b['p90'] * 1e3:.1f} / "
              f"{s['p90'] * 1e3:.1f} ms, n {b['n']})")


if __name__ == "__main__":
    main()
