"""Restart markers (``recpipe pack --restart``): the train, val and faces recipes on files packed
with and without them, against bare full decode, a C loop of libjpeg and DALI's CPU pipeline;
and what the markers cost at pack time and in bytes.

Data: the photos packed three times: ``plain`` (``--restart off``: the bytes as they were),
``auto`` (``--restart auto``: intervals of about 4 MCUs, optimal Huffman tables) and ``rows``
(``--restart 1``: one MCU row an interval); 112 px face crops (``benchmarks.data.faces_rec``),
``plain`` and ``auto`` (``recpipe retrofit``); and large photos (``large``: 4 x 6 mosaics of the
shared ones, 1760x2640, quality 90), ``plain`` and ``auto``: where a DCT scale applies to the
crop. Every measurement is a runner of ``benchmarks/peers/`` in a subprocess timing steady-state
batches (untimed batches until a fetch waits): ``recpipe train`` (random-resized crop 224 +
mirror, uint8), ``recpipe val`` (resize 256 + centre crop 224), ``recpipe faces`` (112 px float32,
mirror, normalised), ``bare`` (threads decoding every image at full size), ``c_loop``
(``benchmarks/peers/jpeg_loop.c``) and ``dali`` (DALI's CPU pipeline, where installed). Two rates
each: images/s (wall) and images per CPU-second of the process and its threads (what compares
on a machine shared with other work); a ratio is the median of its per-round ratios.
"""

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from .. import data
from ..format import figure, fmt, fmt_ratio, ratio
from ..harness import Ratio, Skip, Suite, Table, suite
from .faces import build_c_loop
from .peers import PEERS, imports, peers_python, run_runner


def make_large(folder, count, tiles=(4, 6)):
    """``count`` large photos (about 1760x2640): mosaics of 4 x 6 of the shared photos (real
    photo texture at camera size; the shared set has no large photos), quality 90, 4:2:0."""
    import cv2

    done = os.path.join(folder, ".done")
    if os.path.exists(done):
        return folder
    paths = data.photo_paths()
    rng = np.random.default_rng(5)
    os.makedirs(os.path.join(folder, "c0"), exist_ok=True)
    for i in range(count):
        picks = rng.choice(len(paths), tiles[0] * tiles[1], replace=False)
        cells = [cv2.resize(cv2.imread(paths[k]), (440, 440), interpolation=cv2.INTER_AREA)
                 for k in picks]
        rows = [np.hstack(cells[r * tiles[1]:(r + 1) * tiles[1]]) for r in range(tiles[0])]
        cv2.imwrite(os.path.join(folder, "c0", f"{i:03d}.jpg"), np.vstack(rows),
                    [cv2.IMWRITE_JPEG_QUALITY, 90])
    open(done, "w").close()
    return folder


def pack_costs(photos, work, rounds):
    """Pack time of the photos without and with markers (alternated; ``workers=0``: in this
    process, so that its CPU time counts all of it), and the file sizes."""
    from recpipe.packing.packer import pack_dataset

    rows = {"off": [], "auto": []}
    for r in range(rounds):
        for restart in (("off", "auto") if r % 2 == 0 else ("auto", "off")):
            out = os.path.join(work, f"pack_{restart}")
            cpu0 = time.process_time()
            summary = pack_dataset(photos, out, restart=restart, workers=0, sources=False)
            cpu = time.process_time() - cpu0
            rows[restart].append({"seconds": summary.seconds, "cpu_seconds": cpu,
                                  "images": summary.written, "bytes": summary.output_bytes})
            for suffix in (".rec", ".idx", ".sums", ".labels.json"):
                if os.path.exists(out + suffix):
                    os.remove(out + suffix)
    return {restart: {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            for restart, runs in rows.items()}


def _rates(result):
    cores = max(result.get("cpu_per_wall") or 0.0, 1e-9)
    return {"images_per_s": result["images_per_s"],
            "images_per_cpu_s": result["images_per_s"] / cores, "cpu_per_wall": cores}


@suite
class Restart(Suite):
    name = "restart"
    title = "Restart markers: random crops on files packed with and without them"
    grid = {"threads": (1, 2)}
    options = {"photos": 1000, "faces": 3000, "large": 48, "batches": 12, "face_batches": 80,
               "large_batches": 3, "steady_warmup": 2, "c_seconds": 2.0, "pack_rounds": 3}
    quick = {"threads": (1,), "photos": 100, "faces": 300, "large": 0, "batches": 1,
             "face_batches": 2, "steady_warmup": 1, "c_seconds": 0.2, "pack_rounds": 0}
    repeats = 3
    warmup = 0  # every runner warms up until a fetch waits

    def prepare(self):
        try:
            from recpipe.packing.retrofit import retrofit_restarts
        except ImportError:
            raise Skip("this recpipe has no restart markers (recpipe.packing.retrofit)") from None
        from recpipe.packing.packer import pack_dataset

        o, work = self.options, self.work / "data"
        work.mkdir(parents=True, exist_ok=True)
        photos = data.photos_tree(self.work.parent / "data", o["photos"])
        self.photos_folder = photos
        self.recs = {}
        for name, restart in (("plain", "off"), ("auto", "auto"), ("rows", 1)):
            rec = str(work / f"photos-{o['photos']}_{name}.rec")
            if not os.path.exists(rec):
                pack_dataset(photos, rec, restart=restart, shuffle=True, seed=0)
            self.recs[f"photos_{name}"] = rec
        faces = data.faces_rec(self.work.parent / "data", o["faces"])
        self.recs["faces_plain"] = faces
        marked = str(work / f"faces-{o['faces']}_auto.rec")
        if not os.path.exists(marked):
            retrofit_restarts(faces, marked)
        self.recs["faces_auto"] = marked
        if o["large"]:
            folder = make_large(str(work / f"large-{o['large']}"), o["large"])
            for name, restart in (("plain", "off"), ("auto", "auto")):
                rec = str(work / f"large-{o['large']}_{name}.rec")
                if not os.path.exists(rec):
                    pack_dataset(folder, rec, restart=restart, shuffle=True, seed=0)
                self.recs[f"large_{name}"] = rec
        self.scratch = tempfile.mkdtemp(prefix="recpipe-bench-restart-")
        self.c_loops = {}
        try:
            for name in ("photos_plain", "faces_plain", "faces_auto"):
                folder = os.path.join(self.scratch, name)
                os.makedirs(folder)
                self.c_loops[name] = build_c_loop(folder, self.recs[name])
        except Skip as exc:
            self.c_loops = {}
            self.skip("c_loop", str(exc))
        self.dali = peers_python() or sys.executable
        if not imports(self.dali, "nvidia.dali"):
            self.dali = None
            self.skip("dali", "nvidia-dali is not installed (benchmarks/peers/setup_peers.sh)")
        sizes = {name: os.path.getsize(rec) for name, rec in self.recs.items()}
        return {"description": f"the first {o['photos']} photos packed plain (--restart off), "
                               f"auto and with one MCU row an interval; {o['faces']} 112 px faces "
                               f"plain and retrofitted (auto)"
                               + (f"; {o['large']} large photos (4 x 6 mosaics of the shared "
                                  f"ones, 1760x2640) plain and auto" if o["large"] else ""),
                "bytes": sizes}

    def contenders(self, point):
        o, t = self.options, point["threads"]
        python = sys.executable
        th = ["--threads", t]
        common = ["--batches", o["batches"], "--warmup", o["steady_warmup"]]

        def runner(argv, python=python):
            return lambda: _rates(run_runner(python, argv))
        found = {}
        loader = PEERS / "recpipe_loader.py"
        for config, names in (("train", ("plain", "auto", "rows")), ("val", ("plain", "auto"))):
            for name in names:
                found[f"recpipe {config} [{name}]"] = runner(
                    [loader, "--rec", self.recs[f"photos_{name}"], "--config", config] + th
                    + common)
        found["bare full decode [plain]"] = runner(
            [loader, "--bare", "--rec", self.recs["photos_plain"]] + th + common)
        for name, c_loop in self.c_loops.items():
            found[f"c_loop [{name}]"] = lambda c=c_loop: self._c_loop(c, t)
        if self.dali:
            for name in ("plain", "auto"):
                found[f"dali train [{name}]"] = runner(
                    [PEERS / "dali_cpu.py", "--rec", self.recs[f"photos_{name}"], "--config",
                     "train"] + th + common, python=self.dali)
        faces = ["--batches", o["face_batches"], "--warmup", o["steady_warmup"]]
        for name in ("plain", "auto"):
            found[f"recpipe faces [{name}]"] = runner(
                [PEERS / "recpipe_faces.py", "--rec", self.recs[f"faces_{name}"]] + th + faces)
        if "large_plain" in self.recs:
            large = ["--batches", o["large_batches"], "--warmup", "1"]
            for name in ("plain", "auto"):
                found[f"recpipe train [large_{name}]"] = runner(
                    [loader, "--rec", self.recs[f"large_{name}"], "--config", "train"] + th
                    + large)
            found["bare full decode [large_plain]"] = runner(
                [loader, "--bare", "--rec", self.recs["large_plain"]] + th + large)
        return found

    def _c_loop(self, c_loop, threads):
        binary, blobs = c_loop
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds = self.options["c_seconds"]
        done = subprocess.run([binary, blobs, str(threads), str(seconds)], capture_output=True,
                              text=True, check=True, timeout=seconds * 10 + 60)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        result = json.loads(done.stdout)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        return _rates({"images_per_s": result["images_per_s"],
                       "cpu_per_wall": cpu / result["seconds"]})

    def ratios(self, point):
        t = point["threads"]
        pairs = [
            ("train: markers (auto) vs bare full decode", "recpipe train [auto]",
             "bare full decode [plain]", 1.6),
            ("train: no markers vs bare full decode", "recpipe train [plain]",
             "bare full decode [plain]", None),
            ("train: markers (auto) vs no markers", "recpipe train [auto]",
             "recpipe train [plain]", None),
            ("train: markers (1 row) vs no markers", "recpipe train [rows]",
             "recpipe train [plain]", None),
            ("train: markers (auto) vs C loop full decode", "recpipe train [auto]",
             "c_loop [photos_plain]", None),
            ("val: markers (auto) vs no markers", "recpipe val [auto]", "recpipe val [plain]",
             None),
            ("val: markers (auto) vs bare full decode", "recpipe val [auto]",
             "bare full decode [plain]", None),
            ("faces: markers (auto) vs no markers", "recpipe faces [auto]",
             "recpipe faces [plain]", 1.0),
            ("faces: C loop, markers vs no markers", "c_loop [faces_auto]",
             "c_loop [faces_plain]", None),
            ("faces: recpipe (markers) vs C loop (no markers)", "recpipe faces [auto]",
             "c_loop [faces_plain]", None),
            ("large photos, train: markers (auto) vs no markers", "recpipe train [large_auto]",
             "recpipe train [large_plain]", None),
            ("large photos, train: markers (auto) vs bare full decode",
             "recpipe train [large_auto]", "bare full decode [large_plain]", None),
            ("large photos, train: no markers vs bare full decode",
             "recpipe train [large_plain]", "bare full decode [large_plain]", None),
            ("train: markers (auto) vs DALI CPU on the same file", "recpipe train [auto]",
             "dali train [auto]", 3.0),
            ("train: no markers vs DALI CPU", "recpipe train [plain]", "dali train [plain]",
             None),
            ("DALI CPU: file with markers vs without", "dali train [auto]", "dali train [plain]",
             None),
        ]
        out = []
        for name, num, den, goal in pairs:
            out.append(Ratio(f"{name}, {t} thr: CPU", num, den, metric="images_per_cpu_s",
                             goal=goal))
            out.append(Ratio(f"{name}, {t} thr: wall", num, den))
        return out

    def facts(self, point):
        o = self.options
        if point["threads"] != o["threads"][0] or not o["pack_rounds"]:
            return {}
        return {"pack": pack_costs(self.photos_folder, self.scratch, o["pack_rounds"])}

    def close(self):
        if getattr(self, "scratch", None):
            shutil.rmtree(self.scratch, ignore_errors=True)

    @classmethod
    def tables(cls, result):
        rows, rates = [], []
        pack = None
        for p in result["points"]:
            pack = pack or p["facts"].get("pack")
            t = p["params"]["threads"]
            for r in p["ratios"]:
                if not r["name"].endswith(": CPU"):
                    continue
                name = r["name"][:-len(": CPU")]
                wall = ratio(p, f"{name}: wall")
                rows.append([name, fmt_ratio(r), fmt_ratio(wall),
                             f">= {r['goal']:g}x" if r.get("goal") else ""])
            for name in p["contenders"]:
                rates.append([f"{name}, {t} thr", fmt(figure(p, name, "images_per_cpu_s")),
                              fmt(figure(p, name, "images_per_s")),
                              fmt(figure(p, name, "cpu_per_wall"), 2)])
        notes = ("`CPU` ratios compare images per CPU-second of each process (what compares on "
                 "a shared machine), `wall` ratios images/s.")
        if pack:
            off, auto = pack["off"], pack["auto"]
            notes += (f" Packing the photos in-process: plain "
                      f"{off['images'] / off['cpu_seconds']:,.0f} images per CPU-second, "
                      f"`--restart auto` {auto['images'] / auto['cpu_seconds']:,.0f} "
                      f"({auto['cpu_seconds'] / off['cpu_seconds']:.1f}x the CPU); the file is "
                      f"{auto['bytes'] / off['bytes']:.4f}x the size.")
        return [Table("Random crops on files with restart markers (x the contender's rate)",
                      ["comparison", "CPU ratio", "wall ratio", "goal"], rows, notes=notes,
                      chart="CPU ratio",
                      chart_title="files with restart markers (x the contender's rate, CPU)",
                      headline=True),
                Table("Rates of every measurement", ["measurement", "images per CPU-s",
                                                     "images/s", "cores used"], rates)]
