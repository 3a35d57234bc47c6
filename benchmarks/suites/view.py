"""``recpipe view`` at face scale: time to the first thumbnail page and per-page latency on a
17.1M-record file, against the same measurements on a 10,000-record file in the same run.

The files are ``benchmarks.data.index_files``' synthetic ones (a 17.1M-line ``.idx``, records
7 KiB apart, beside a sparse ``.rec``), with blocks of 128 real 112x112 JPEG records written at
seeded places, so that pages deep in the file have pictures to decode. Each run starts a fresh
``recpipe view FILE --recipe faces`` process and acts as the page does (the page's JSON, then
its 48 thumbnails over 6 connections):

- ``up``: process start to the address printed; ``first page``: process start to the last
  thumbnail of page 0 (the index cache warm, as on every open after the first);
- ``page``: a page of 48 at a real block deep in the file, JSON and thumbnails;
- ``jump``: ``/api/find`` of a random key; ``record``: a record's facts, its picture and 8 draws
  of the recipe (the first one builds the ImageLoader); ``batch``: batch K (128 faces) of epoch
  0 as JSON plus its 128 PNGs.

Ratios are the big file's over the small one's, paired by round (1.0x: the index size does not
show). ``cold`` also times one start with no index cache; ``labels`` the label scan of the big
file (histogram and by-label order) with the server's peak RSS. Quarantine and index caches go
to a temporary folder (the user's are not touched).
"""

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

from .. import data
from ..format import figure, fmt, fmt_ratio, ratio
from ..harness import Ratio, Suite, Table, suite

BLOCK = 128       # real records per block (one batch of the faces recipe, unshuffled)
BLOCKS = 12
PAGE = 48
CONNECTIONS = 6   # what a browser opens to one host
METRICS = ("up", "first_page", "page", "page_p90", "jump", "record_first", "record_later",
           "batch_first", "batch_later")


def _jpegs(count=16):
    import cv2

    rng = np.random.default_rng(0)
    out = []
    for _ in range(count):
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
    """``data.index_files``' file with real blocks written in; returns (rec, block starts)."""
    import recpipe
    from recpipe.io.format import frame

    rec = data.index_files(folder, records)
    starts = block_starts(records)
    jpegs = _jpegs()
    with open(rec, "r+b") as f:
        for start in starts:
            for i in range(start, start + BLOCK):
                payload = recpipe.pack(recpipe.IRHeader(0, float(i % 100), i, 0), jpegs[i % 16])
                framed = frame(payload + b"\0" * (data.SPACING - 8 - len(payload)))
                f.seek(i * data.SPACING)
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
    if len(urls) != PAGE:
        raise RuntimeError(f"page {start}: {PAGE - len(urls)} unreadable records")
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
    process.communicate(timeout=60)
    raise RuntimeError("recpipe view did not start in 300 s")


def _stop(process):
    process.terminate()
    try:
        process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate(timeout=60)


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
                if json.loads(_get(f"{base}api/find?q={key}"))["position"] != key:
                    raise RuntimeError(f"find {key}: another position")
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
                if batch["size"] != BLOCK:
                    raise RuntimeError(f"batch {start // BLOCK}: {batch['size']} faces")
                list(pool.map(lambda u: _get(base + u.lstrip("/")), batch["images"]))
                out["batch"].append(time.perf_counter() - t)
    finally:
        _stop(process)
    pages = sorted(out["page"])
    return {"up": out["up"], "first_page": out["first_page"],
            "page": statistics.median(pages), "page_p90": pages[min(len(pages) - 1,
                                                                    int(0.9 * len(pages)))],
            "jump": statistics.median(out["jump"]), "record_first": out["record"][0],
            "record_later": statistics.median(out["record"][1:]),
            "batch_first": out["batch"][0], "batch_later": statistics.median(out["batch"][1:])}


def _peak_rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def label_scan(rec, env):
    """Seconds and the server's peak RSS for the label histogram / by-label order of ``rec``."""
    process, base, _ = _start(rec, env)
    try:
        before = _peak_rss_mb(process.pid)
        t0 = time.perf_counter()
        state = json.loads(_get(base + "api/labels?start=1"))
        while state["state"] in ("idle", "running"):
            time.sleep(0.5)
            state = json.loads(_get(base + "api/labels"))
        seconds = time.perf_counter() - t0
        t1 = time.perf_counter()
        json.loads(_get(base + f"api/page?order=label&start={state['records'] // 2}&count={PAGE}"))
        return {"seconds": seconds, "by_label_page": time.perf_counter() - t1,
                "rss_mb_before": before, "rss_mb_after": _peak_rss_mb(process.pid),
                "distinct": state.get("distinct"), "state": state["state"]}
    finally:
        _stop(process)


@suite
class View(Suite):
    name = "view"
    title = "recpipe view at face scale: a 17.1M-record file against a 10,000-record one"
    options = {"records": 17_100_000, "baseline": 10_000, "cold": True, "labels": False}
    quick = {"records": 50_000, "baseline": 5_000, "cold": False}
    repeats = 2
    warmup = 1  # the index caches, written once

    def prepare(self):
        o = self.options
        self.big = make(self.work / "big", o["records"])
        self.small = make(self.work / "small", o["baseline"])
        self.scratch = tempfile.mkdtemp(prefix="recpipe-bench-view-")
        self.env = dict(os.environ, RECPIPE_QUARANTINE_DIR=os.path.join(self.scratch, "q"),
                        RECPIPE_CACHE_DIR=os.path.join(self.scratch, "cache"))
        self.cold = one_round(*self.big, self.env, seed=99) if o["cold"] else None
        self.rounds = 0
        return {"description": f"synthetic face-scale files of {o['records']:,} and "
                               f"{o['baseline']:,} records (a .idx of that many lines beside a "
                               f"sparse .rec) with {BLOCKS} blocks of {BLOCK} real 112x112 JPEGs "
                               "written at seeded places"}

    def contenders(self, point):
        def run(files):
            self.rounds += 1
            return one_round(*files, self.env, seed=self.rounds // 2)
        return {f"{self.options['records']:,} records": lambda: run(self.big),
                f"{self.options['baseline']:,} records": lambda: run(self.small)}

    def ratios(self, point):
        big = f"{self.options['records']:,} records"
        small = f"{self.options['baseline']:,} records"
        return [Ratio(f"big/small {m}", big, small, metric=m) for m in METRICS]

    def facts(self, point):
        facts = {"cold": self.cold}
        if self.options["labels"]:
            facts["labels"] = label_scan(self.big[0], self.env)
        return facts

    def close(self):
        if getattr(self, "scratch", None):
            shutil.rmtree(self.scratch, ignore_errors=True)

    @classmethod
    def tables(cls, result):
        p, o = result["points"][0], result["options"]
        big, small = f"{o['records']:,} records", f"{o['baseline']:,} records"
        rows = [[m.replace("_", " "), fmt(_ms(figure(p, big, m)), 1),
                 fmt(_ms(figure(p, small, m)), 1), fmt_ratio(ratio(p, f"big/small {m}"))]
                for m in METRICS]
        notes = ""
        cold = p["facts"].get("cold")
        if cold:
            notes = (f"Cold start of the big file (no index cache): up {cold['up']:.2f} s, "
                     f"first page {cold['first_page']:.2f} s. ")
        labels = p["facts"].get("labels")
        if labels:
            notes += (f"Label scan of the big file: {labels['seconds']:.1f} s, a by-label page "
                      f"then {labels['by_label_page'] * 1e3:.0f} ms; server peak RSS "
                      f"{labels['rss_mb_before']:.0f} MB before, {labels['rss_mb_after']:.0f} MB "
                      "after.")
        return [Table("recpipe view's latencies (ms, medians) on a face-scale file and a small "
                      "one", ["measure", big, small, "big / small"], rows, notes=notes)]


def _ms(seconds):
    return None if seconds is None else seconds * 1e3
