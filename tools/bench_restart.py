"""Restart markers (``recpipe pack --restart``): the train, val and faces recipes on files packed
with and without them, against bare full decode, a C loop of libjpeg and DALI's CPU pipeline,
alternated in one run; and what the markers cost at pack time and in bytes.

    python tools/bench_restart.py --rounds 3 --threads 1,2 --json .bench/restart/restart.json
    python tools/bench_restart.py --rounds 1 --batches 4 --threads 1     # smoke run

Data: ``../shared/data/photos`` (1000 JPEGs, ~440 px) packed three times: ``plain``
(``--restart off``: the bytes as they were), ``auto`` (``--restart auto``: intervals of about 4
MCUs, optimal Huffman tables) and ``rows`` (``--restart 1``: one MCU row an interval); and 3000
face crops (112x112, quality 95, ``tools/bench_faces.py``'s recipe), ``plain`` and ``auto``
(``recpipe retrofit``); and 48 large photos (``--large``: 4 x 6 mosaics of the shared ones,
1760x2640, quality 90), ``plain`` and ``auto``: the regime where a DCT scale applies to the crop.

Every measurement is a subprocess timing steady-state batches (``tools/peers/_common.measure``:
untimed batches until a fetch waits, then ``--batches`` batches of 128):

- ``recpipe train``: ``ImageLoader`` random-resized crop 224 (area 0.08-1, aspect 3/4-4/3) +
  mirror, uint8 NCHW (``tools/peers/recpipe_loader.py``); ``recpipe val``: resize 256 + centre
  crop 224; ``recpipe faces``: 112x112 float32 NCHW, mirror, (x - 127.5) / 127.5;
- ``bare``: threads decoding every image of the ``.rec`` at full size, nothing else (the
  baseline of the issue's 1.6x);
- ``c_loop``: ``tools/jpeg_loop.c``, C threads decoding the same JPEG bytes to RGB with libjpeg;
- ``dali``: NVIDIA DALI's CPU pipeline (``device_id=None``; ``tools/peers/dali_cpu.py``:
  ``readers.mxnet`` -> ``decoders.image_random_crop`` -> resize 224 -> ``crop_mirror_normalize``),
  run by ``--dali-python`` (an interpreter with ``nvidia-dali-cuda120``); skipped without one.

Each round runs every measurement once, the order reversed on every other round; a ratio is the
median of its per-round ratios. Two rates per measurement: images/s (wall) and images per
CPU-second (the process's CPU, its threads and children included): on a machine shared with
other work the second is the one that compares (the wall rate depends on what the others took).
"""

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

PHOTOS = os.path.join(ROOT, "..", "shared", "data", "photos")
if not os.path.isdir(PHOTOS):
    PHOTOS = "/work/shared/data/photos"
PEERS = os.path.join(HERE, "peers")
FACE_NORM = dict(mean_r=127.5, mean_g=127.5, mean_b=127.5, std_r=127.5, std_g=127.5,
                 std_b=127.5)
RUNNER_TIMEOUT_S = 600


# -- data ----------------------------------------------------------------------------------------

def prepare(work, faces_count, large_count=0):
    """The packed files: ``{name: rec}`` and what packing them cost (``pack`` rows)."""
    from recpipe.packing.packer import pack_dataset
    from recpipe.packing.retrofit import retrofit_restarts

    os.makedirs(work, exist_ok=True)
    recs = {}
    for name, restart in (("plain", "off"), ("auto", "auto"), ("rows", 1)):
        rec = os.path.join(work, f"photos_{name}.rec")
        if not os.path.exists(rec):
            pack_dataset(PHOTOS, rec, restart=restart, shuffle=True, seed=0)
        recs[f"photos_{name}"] = rec
    import bench_faces

    faces = bench_faces.make_faces(os.path.join(work, "faces"), faces_count, photos=PHOTOS)
    recs["faces_plain"] = faces
    marked = os.path.join(work, "faces_auto.rec")
    if not os.path.exists(marked):
        retrofit_restarts(faces, marked)
    recs["faces_auto"] = marked
    if large_count:
        folder = os.path.join(work, "large")
        make_large(folder, large_count)
        for name, restart in (("plain", "off"), ("auto", "auto")):
            rec = os.path.join(work, f"large_{name}.rec")
            if not os.path.exists(rec):
                pack_dataset(folder, rec, restart=restart, shuffle=True, seed=0)
            recs[f"large_{name}"] = rec
    return recs


def make_large(folder, count, tiles=(4, 6)):
    """``count`` large photos (about 1760x2640): mosaics of 4 x 6 of the shared photos (real
    photo texture at camera size; the shared set has no large photos), quality 90, 4:2:0."""
    import glob

    import cv2
    import numpy as np

    done = os.path.join(folder, ".done")
    if os.path.exists(done):
        return
    paths = sorted(glob.glob(os.path.join(PHOTOS, "*", "*.jpg")))
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


def pack_costs(work, rounds):
    """Pack time of the photos without and with markers (alternated; ``workers=0``: in this
    process, so that its CPU time counts all of it), and the file sizes."""
    from recpipe.packing.packer import pack_dataset

    rows = {"off": [], "auto": []}
    for r in range(rounds):
        for restart in (("off", "auto") if r % 2 == 0 else ("auto", "off")):
            out = os.path.join(work, f"pack_{restart}")
            cpu0 = time.process_time()
            summary = pack_dataset(PHOTOS, out, restart=restart, workers=0, sources=False)
            cpu = time.process_time() - cpu0
            rows[restart].append({"seconds": summary.seconds, "cpu_seconds": cpu,
                                  "images": summary.written, "bytes": summary.output_bytes,
                                  "actions": summary.actions})
            for suffix in (".rec", ".idx", ".sums", ".labels.json"):
                if os.path.exists(out + suffix):
                    os.remove(out + suffix)
    return rows


# -- the faces runner (run as a subprocess of this file) -----------------------------------------

def faces_runner(argv):
    sys.path.insert(0, PEERS)
    from _common import measure, parse_args, touch

    sys.argv = [sys.argv[0]] + argv
    args = parse_args("recpipe's faces recipe")
    from recpipe.decode.loader import ImageLoader

    loader = ImageLoader(args.rec, args.batch, (3, 112, 112), threads=int(args.threads),
                         shuffle=True, rand_mirror=True, dtype="float32", **FACE_NORM)
    state = {"it": iter(loader)}

    def fetch():
        try:
            return next(state["it"])
        except StopIteration:
            state["it"] = iter(loader)
            return next(state["it"])

    with loader:
        measure(args, fetch, lambda batch: (batch[0].shape[0], touch(batch[0])),
                contender="recpipe-faces", used={"threads": loader.threads},
                threads_used=loader.threads)


# -- measurements --------------------------------------------------------------------------------

class CLoop:
    """``tools/jpeg_loop.c`` compiled once; each rec's images written once as its input."""

    def __init__(self, folder):
        self.folder = folder
        self.binary = os.path.join(folder, "jpeg_loop")
        compiler = shutil.which("cc") or shutil.which("gcc")
        self.ok = bool(compiler) and subprocess.run(
            [compiler, "-O2", "-I", os.path.join(ROOT, "csrc"), "-o", self.binary,
             os.path.join(HERE, "jpeg_loop.c"), "-ljpeg", "-lpthread"],
            capture_output=True).returncode == 0
        self.blobs = {}

    def blobs_of(self, rec):
        if rec not in self.blobs:
            from recpipe.decode.bench import load_images

            path = os.path.join(self.folder, os.path.basename(rec) + ".blobs")
            with open(path, "wb") as f:
                for image in load_images(rec):
                    f.write(len(image).to_bytes(4, "little") + image)
            self.blobs[rec] = path
        return self.blobs[rec]

    def run(self, rec, threads, seconds):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run([self.binary, self.blobs_of(rec), str(threads), str(seconds)],
                              capture_output=True, text=True, timeout=RUNNER_TIMEOUT_S)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            return None, done.stderr.strip()[-300:]
        result = json.loads(done.stdout)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        return {"images_per_s": result["images_per_s"],
                "cpu_per_wall": cpu / result["seconds"]}, ""


def run_json(argv):
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=RUNNER_TIMEOUT_S,
                              cwd=PEERS)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return None, " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
    return json.loads(lines[-1]), ""


def plan(args, recs):
    """``[(key, label, run())]`` for every measurement of the run."""
    python = sys.executable
    common = ["--batches", str(args.batches), "--warmup", str(args.warmup)]
    loader = os.path.join(PEERS, "recpipe_loader.py")
    c_loop = CLoop(args.scratch)
    items = []
    for t in args.threads:
        th = ["--threads", str(t)]
        for config in ("train", "val"):
            for name in (("plain", "auto", "rows") if config == "train" else ("plain", "auto")):
                rec = recs[f"photos_{name}"]
                items.append((f"recpipe {config} [{name}] {t}",
                              lambda rec=rec, config=config, th=th: run_json(
                                  [python, loader, "--rec", rec, "--config", config] + th
                                  + common)))
        items.append((f"bare full decode [plain] {t}", lambda th=th: run_json(
            [python, loader, "--bare", "--rec", recs["photos_plain"]] + th + common)))
        if c_loop.ok:
            for name in ("photos_plain", "faces_plain", "faces_auto"):
                items.append((f"c_loop [{name}] {t}", lambda rec=recs[name], t=t: c_loop.run(
                    rec, t, args.c_seconds)))
        if args.dali_python:
            for name in ("plain", "auto"):
                items.append((f"dali train [{name}] {t}", lambda rec=recs[f"photos_{name}"],
                              th=th: run_json([args.dali_python, os.path.join(PEERS, "dali_cpu.py"),
                                               "--rec", rec, "--config", "train"] + th + common)))
        faces = ["--batches", str(args.face_batches), "--warmup", str(args.warmup)]
        for name in ("plain", "auto"):
            items.append((f"recpipe faces [{name}] {t}", lambda rec=recs[f"faces_{name}"],
                          th=th: run_json([python, os.path.abspath(__file__), "--runner", "faces",
                                           "--rec", rec] + th + faces)))
        if "large_plain" in recs:
            large = ["--batches", str(args.large_batches), "--warmup", "1"]
            for name in ("plain", "auto"):
                items.append((f"recpipe train [large_{name}] {t}", lambda rec=recs[
                    f"large_{name}"], th=th: run_json([python, loader, "--rec", rec, "--config",
                                                       "train"] + th + large)))
            items.append((f"bare full decode [large_plain] {t}", lambda th=th: run_json(
                [python, loader, "--bare", "--rec", recs["large_plain"]] + th + large)))
    return items


def rounds_of(items, rounds, log):
    results = []
    for r in range(rounds):
        order = items if r % 2 == 0 else items[::-1]
        got = {}
        for key, run in order:
            result, error = run()
            if result is None:
                log(f"  {key}: FAILED {error}")
                continue
            got[key] = {"wall": result["images_per_s"],
                        "cpu": result["images_per_s"] / max(result["cpu_per_wall"], 1e-9),
                        "cpu_per_wall": result["cpu_per_wall"]}
            log(f"  round {r} {key}: {got[key]['wall']:.0f} img/s, "
                f"{got[key]['cpu']:.0f} img/CPU-s ({got[key]['cpu_per_wall']:.2f} cores)")
        results.append(got)
    return results


def ratios(results, threads, dali):
    """``[(name, wall ratio, cpu ratio, per-round cpu ratios, goal)]``."""
    pairs = []
    for t in threads:
        pairs += [
            (f"train: markers (auto) vs bare full decode, {t} thr", f"recpipe train [auto] {t}",
             f"bare full decode [plain] {t}", 1.6),
            (f"train: no markers vs bare full decode, {t} thr", f"recpipe train [plain] {t}",
             f"bare full decode [plain] {t}", None),
            (f"train: markers (auto) vs no markers, {t} thr", f"recpipe train [auto] {t}",
             f"recpipe train [plain] {t}", None),
            (f"train: markers (1 row) vs no markers, {t} thr", f"recpipe train [rows] {t}",
             f"recpipe train [plain] {t}", None),
            (f"train: markers (auto) vs C loop full decode, {t} thr", f"recpipe train [auto] {t}",
             f"c_loop [photos_plain] {t}", None),
            (f"val: markers (auto) vs no markers, {t} thr", f"recpipe val [auto] {t}",
             f"recpipe val [plain] {t}", None),
            (f"val: markers (auto) vs bare full decode, {t} thr", f"recpipe val [auto] {t}",
             f"bare full decode [plain] {t}", None),
            (f"faces: markers (auto) vs no markers, {t} thr", f"recpipe faces [auto] {t}",
             f"recpipe faces [plain] {t}", 1.0),
            (f"faces: C loop, markers vs no markers, {t} thr", f"c_loop [faces_auto] {t}",
             f"c_loop [faces_plain] {t}", None),
            (f"faces: recpipe (markers) vs C loop (no markers), {t} thr",
             f"recpipe faces [auto] {t}", f"c_loop [faces_plain] {t}", None),
        ]
        pairs += [
            (f"large photos, train: markers (auto) vs no markers, {t} thr",
             f"recpipe train [large_auto] {t}", f"recpipe train [large_plain] {t}", None),
            (f"large photos, train: markers (auto) vs bare full decode, {t} thr",
             f"recpipe train [large_auto] {t}", f"bare full decode [large_plain] {t}", None),
            (f"large photos, train: no markers vs bare full decode, {t} thr",
             f"recpipe train [large_plain] {t}", f"bare full decode [large_plain] {t}", None),
        ]
        if dali:
            pairs += [
                (f"train: markers (auto) vs DALI CPU on the same file, {t} thr",
                 f"recpipe train [auto] {t}", f"dali train [auto] {t}", 3.0),
                (f"train: no markers vs DALI CPU, {t} thr", f"recpipe train [plain] {t}",
                 f"dali train [plain] {t}", None),
                (f"DALI CPU: file with markers vs without, {t} thr", f"dali train [auto] {t}",
                 f"dali train [plain] {t}", None),
            ]
    out = []
    for name, num, den, goal in pairs:
        per_round = [(r[num], r[den]) for r in results if num in r and den in r]
        if not per_round:
            continue
        wall = statistics.median(a["wall"] / b["wall"] for a, b in per_round)
        cpu_each = [a["cpu"] / b["cpu"] for a, b in per_round]
        out.append((name, wall, statistics.median(cpu_each), cpu_each, goal))
    return out


def markdown(report):
    lines = [f"Command: `{report['command']}`  ",
             f"Machine: {report['machine']}; load average {report['load'][0]:.2f} at start, "
             f"{report['load'][1]:.2f} at end.  ",
             "Data: the 1000 shared photos packed plain / `--restart auto` / `--restart 1`; "
             f"{report['faces']} 112x112 faces plain / retrofitted (`auto`); {report['large']} "
             "large photos (4 x 6 mosaics of the shared ones, 1760x2640) plain / `auto`. Rates: "
             "medians of "
             "per-round ratios; `CPU` = images per CPU-second of the process (what compares on "
             "a shared machine), `wall` = images/s.", "",
             "| target | CPU ratio (per round) | wall ratio | goal |", "|---|---:|---:|---:|"]
    for name, wall, cpu, each, goal in report["ratios"]:
        rounds = ", ".join(f"{v:.2f}" for v in each)
        lines.append(f"| {name} | **{cpu:.2f}x** ({rounds}) | {wall:.2f}x | "
                     f"{'' if goal is None else f'>= {goal}x'} |")
    lines += ["", "| measurement | median img/CPU-s | median img/s | cores used |",
              "|---|---:|---:|---:|"]
    keys = sorted({k for r in report["rounds"] for k in r})
    for key in keys:
        values = [r[key] for r in report["rounds"] if key in r]
        lines.append(f"| {key} | {statistics.median(v['cpu'] for v in values):,.0f} | "
                     f"{statistics.median(v['wall'] for v in values):,.0f} | "
                     f"{statistics.median(v['cpu_per_wall'] for v in values):.2f} |")
    pack = report.get("pack")
    if pack:
        off, auto = pack["off"], pack["auto"]
        med = lambda rows, k: statistics.median(r[k] for r in rows)  # noqa: E731
        lines += ["", f"Pack (in-process, alternated {len(off)}x): plain "
                  f"{med(off, 'images') / med(off, 'cpu_seconds'):,.0f} img/CPU-s, "
                  f"`--restart auto` {med(auto, 'images') / med(auto, 'cpu_seconds'):,.0f} "
                  f"img/CPU-s ({med(auto, 'cpu_seconds') / med(off, 'cpu_seconds'):.1f}x the "
                  f"CPU; {1000 * (med(auto, 'cpu_seconds') - med(off, 'cpu_seconds')) / med(off, 'images'):.2f} "
                  f"ms more per image); bytes {med(auto, 'bytes') / med(off, 'bytes'):.4f}x."]
    for name, size in report.get("sizes", {}).items():
        lines.append(f"Size of {name}: {size / 1e6:.2f} MB.  ")
    return "\n".join(lines) + "\n"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:2] == ["--runner", "faces"]:
        return faces_runner(argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--c-seconds", type=float, default=2.0)
    ap.add_argument("--faces", type=int, default=3000)
    ap.add_argument("--face-batches", type=int, default=80,
                    help="timed batches of the faces runs (a faces batch takes ~15 ms)")
    ap.add_argument("--large", type=int, default=48,
                    help="large photos (mosaics of the shared ones, ~1760x2640); 0: none")
    ap.add_argument("--large-batches", type=int, default=3)
    ap.add_argument("--pack-rounds", type=int, default=3)
    ap.add_argument("--dali-python", default=None,
                    help="python with nvidia-dali-cuda120 (default: .venv-dali or .venv-peers)")
    ap.add_argument("--work", default=os.path.join(ROOT, ".bench", "restart"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args(argv)
    args.threads = [int(t) for t in args.threads.split(",")]
    if args.dali_python is None:
        for venv in (".venv-dali", ".venv-peers"):
            candidate = os.path.join(ROOT, venv, "bin", "python")
            if os.path.exists(candidate) and subprocess.run(
                    [candidate, "-c", "import nvidia.dali"], capture_output=True).returncode == 0:
                args.dali_python = candidate
                break
    log = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    if not args.dali_python:
        log("no python with nvidia.dali: DALI is skipped (tools/setup_peers.sh installs it)")
    load_start = os.getloadavg()[0]
    recs = prepare(args.work, args.faces, args.large)
    sizes = {name: os.path.getsize(rec) for name, rec in recs.items()}
    with tempfile.TemporaryDirectory(prefix="bench-restart-") as scratch:
        args.scratch = scratch
        results = rounds_of(plan(args, recs), args.rounds, log)
        pack = pack_costs(scratch, args.pack_rounds) if args.pack_rounds else None
    report = {"command": "python tools/bench_restart.py " + " ".join(argv),
              "machine": f"{os.cpu_count()} cores, {platform.processor() or platform.machine()}, "
                         f"{platform.platform()}",
              "load": (load_start, os.getloadavg()[0]), "faces": args.faces, "large": args.large,
              "dali_python": args.dali_python, "rounds": results, "pack": pack, "sizes": sizes,
              "ratios": ratios(results, args.threads, bool(args.dali_python))}
    text = markdown(report)
    print(text)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
