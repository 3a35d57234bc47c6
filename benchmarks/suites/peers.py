"""recpipe's decode pipeline against the loaders people use for the same job, on the same data
and the same cores.

Contenders, each a runner of ``benchmarks/peers/`` in a subprocess under its own interpreter
(so imports and thread pools never mix): ``recpipe.ImageLoader``, recpipe's bare full-size
decode, MXNet 1.9.1's ``mx.io.ImageRecordIter`` (.venv-mxnet), NVIDIA DALI's CPU pipeline and
PyTorch DataLoader + torchvision ImageFolder (.venv-peers: ``benchmarks/peers/setup_peers.sh``);
and the drop-in ``recpipe.mxnet.ImageRecordIter`` against ``mx.io.ImageRecordIter`` configured
as MXNet's example scripts do (colour jitter, normalisation). The contenders of a ratio sit
next to each other in a round (bare decode beside the recpipe runs of its thread count,
MXNet's default run beside recpipe's 1-thread runs). Data: the photos packed pass-through
(labels by class folder) and the same tree for ImageFolder. Train = random-resized crop 224
(area 0.08-1, aspect 3/4-4/3) + mirror; val = resize 256 + centre crop 224; uint8 NCHW.
"""

import json
import os
import subprocess
import sys

from .. import data
from ..format import fmt, fmt_ratio, figure
from ..harness import REPO, Ratio, Suite, Table, suite

PEERS = REPO / "benchmarks" / "peers"
MXNET_DEFAULT_PREPROCESS_THREADS = 4
RUNNER_TIMEOUT_S = 900


def mxnet_effective_threads(requested):
    """ImageRecordIter's decode threads with ctx='gpu' (the default):
    min(asked, max(nprocs/2, 1))."""
    return min(requested, max((os.cpu_count() or 1) // 2, 1))


def mxnet_python():
    candidates = [os.environ.get("RECPIPE_MXNET_PYTHON"), REPO / ".venv-mxnet" / "bin" / "python",
                  "/tmp/mxvenv/bin/python"]
    return next((str(c) for c in candidates if c and os.path.exists(c)), None)


def peers_python():
    candidates = [os.environ.get("RECPIPE_PEERS_PYTHON"), REPO / ".venv-peers" / "bin" / "python"]
    return next((str(c) for c in candidates if c and os.path.exists(c)), None)


def _env():
    path = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{path}" if path else str(REPO))


def imports(python, module):
    return subprocess.run([python, "-c", f"import {module}"], capture_output=True, env=_env(),
                          cwd="/", timeout=300).returncode == 0


def run_runner(python, argv, timeout=RUNNER_TIMEOUT_S):
    """One runner's JSON line, as a dict; RuntimeError with its stderr when it fails."""
    done = subprocess.run([python] + [str(a) for a in argv], capture_output=True, text=True,
                          timeout=timeout, env=_env())
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise RuntimeError(f"{argv[0]} exited {done.returncode}: {tail}")
    return json.loads(lines[-1])


@suite
class Peers(Suite):
    name = "peers"
    title = "Decoding ImageNet-style photos: recpipe against MXNet, DALI and PyTorch"
    options = {"configs": "train,val", "threads": "", "batch": 128, "batches": 16,
               "steady_warmup": 3, "rss_epochs": 10, "skip": "", "photos": 1000, "iter_threads": 2,
               "iter_batches": 8}
    quick = {"configs": "train", "threads": "1", "batches": 2, "steady_warmup": 1, "rss_epochs": 0,
             "skip": "dali,torch,float32", "photos": 200, "iter_batches": 2}
    repeats = 5
    warmup = 0  # every runner warms up until a fetch waits (prefetch queues drained)

    def prepare(self):
        o = self.options
        self.rec = data.photos_rec(self.work.parent / "data", o["photos"])
        self.folder = data.photos_tree(self.work.parent / "data", o["photos"])
        self.skips = {s for s in o["skip"].split(",") if s}
        self.configs = [c for c in o["configs"].split(",") if c]
        if not set(self.configs) <= {"train", "val"}:
            raise ValueError(f"configs {o['configs']!r}: choose from train,val")
        nproc = os.cpu_count() or 1
        self.thread_list = (sorted({1, nproc}) if not o["threads"]
                            else sorted({int(t) for t in o["threads"].split(",")}))
        peers = peers_python()
        self.pythons = {"recpipe": peers or sys.executable, "mxnet": mxnet_python(),
                        "dali": peers or sys.executable, "torch": peers or sys.executable}
        self.missing = {}
        if self.pythons["mxnet"] is None or not imports(self.pythons["mxnet"], "mxnet"):
            self.missing["mxnet"] = "no mxnet interpreter (ci/setup_mxnet_venv.sh)"
        if "dali" not in self.skips and not imports(self.pythons["dali"], "nvidia.dali"):
            self.missing["dali"] = "nvidia-dali is not installed (benchmarks/peers/setup_peers.sh)"
        if "torch" not in self.skips and not imports(self.pythons["torch"], "torchvision"):
            self.missing["torch"] = "torchvision is not installed (benchmarks/peers/setup_peers.sh)"
        described = data.describe_rec(self.rec, "the photos packed pass-through")
        described["description"] += " (ImageFolder reads the same files)"
        return described

    # -- the plan: measurements and the ratios between them ----------------------------------
    def _common(self):
        o = self.options
        return ["--batch", o["batch"], "--batches", o["batches"], "--warmup", o["steady_warmup"],
                "--rec", self.rec, "--folder", self.folder]

    def _add(self, found, key, contender, runner, extra):
        if contender in self.skips:
            return None
        if contender in self.missing:
            self.skip(key, self.missing[contender])
            return None
        if key not in found:
            python = self.pythons.get(contender, self.pythons["recpipe"])
            argv = [PEERS / runner] + self._common() + extra

            def run():
                result = run_runner(python, argv)
                return {k: result[k] for k in ("images_per_s", "cpu_per_wall", "peak_rss_mb",
                                               "children_rss_mb", "threads") if k in result}
            found[key] = run
        return key

    def _plan(self):
        """``(contenders, ratios)`` in bench order: pairs of a ratio next to each other."""
        found, ratios = {}, []
        top, low = max(self.thread_list), min(self.thread_list)
        default = mxnet_effective_threads(MXNET_DEFAULT_PREPROCESS_THREADS)

        def recpipe(config, t, dtype="uint8"):
            tag = "" if dtype == "uint8" else " float32 normalised"
            return self._add(found, f"recpipe {config}{tag}, {t} thr", "recpipe",
                             "recpipe_loader.py", ["--config", config, "--threads", t,
                                                   "--dtype", dtype])

        def bare(t):
            return self._add(found, f"bare full decode, {t} thr", "bare", "recpipe_loader.py",
                             ["--bare", "--threads", t]) if "bare" not in self.skips else None

        def mxnet(config, t=None):
            if t is None:
                return self._add(found, f"ImageRecordIter {config}, default ({default} thr)",
                                 "mxnet", "mxnet_iter.py",
                                 ["--config", config, "--threads", "default"])
            return self._add(found, f"ImageRecordIter {config}, {t} thr", "mxnet",
                             "mxnet_iter.py", ["--config", config, "--threads", t])

        def ratio(name, numerator, denominator, goal):
            if numerator and denominator:
                ratios.append(Ratio(name, numerator, denominator, goal=goal))

        for t in self.thread_list:
            bare(t)
            for config in self.configs:
                recpipe(config, t)
                if t == low:
                    mxnet(config)
            if t == top and "train" in self.configs and "float32" not in self.skips:
                recpipe("train", t, "float32")
        for config in self.configs:
            ratio(f"{config}: recpipe ({top} thr) vs ImageRecordIter default ({default} thr)",
                  recpipe(config, top), mxnet(config), 3.0)
            if config == "train" and 1 in self.thread_list:
                ratio("train: recpipe vs ImageRecordIter, both 1 thr", recpipe(config, 1),
                      mxnet(config) if default == 1 else mxnet(config, 1), 2.5)
            for t in self.thread_list:
                ratio(f"{config}: recpipe pipeline vs bare full decode, {t} thr",
                      recpipe(config, t), bare(t), 0.9)
            if config != "train":
                continue
            if "float32" not in self.skips:
                ratio(f"train: float32 normalised vs uint8, {top} thr",
                      recpipe("train", top, "float32"), recpipe("train", top), 0.85)
            for t in self.thread_list:
                dali = self._add(found, f"DALI CPU train, {t} thr", "dali", "dali_cpu.py",
                                 ["--config", "train", "--threads", t])
                ratio(f"train: recpipe vs DALI CPU, {t} thr", recpipe("train", t), dali, 1.0)
            for t in self.thread_list:
                torch = self._add(found, f"torch DataLoader+ImageFolder train, {t} workers",
                                  "torch", "torch_folder.py",
                                  ["--config", "train", "--threads", t])
                ratio(f"train: recpipe vs torch DataLoader + ImageFolder, {t} thr/workers",
                      recpipe("train", t), torch, 1.3)
        self._iter_plan(found, ratios)
        return found, ratios

    def _iter_plan(self, found, ratios):
        """The drop-in ``recpipe.mxnet.ImageRecordIter`` against MXNet's, one interpreter."""
        if "iter" in self.skips:
            return
        if "mxnet" in self.missing:
            self.skip("ImageRecordIter drop-in", self.missing["mxnet"])
            return
        o = self.options
        for config in self.configs:
            keys, what = {}, "jitter, normalised" if config == "train" else "normalised"
            for module in ("mxnet", "recpipe"):
                key = f"{module} ImageRecordIter {config}, {what}"
                argv = [PEERS / "image_record_iter.py", "--module", module, "--rec", self.rec,
                        "--config", config, "--threads", o["iter_threads"],
                        "--batches", o["iter_batches"]]
                python = self.pythons["mxnet"]
                found[key] = lambda argv=argv, python=python: {
                    "images_per_s": run_runner(python, argv)["images_per_s"]}
                keys[module] = key
            ratios.append(Ratio(f"{config}: recpipe.mxnet.ImageRecordIter vs "
                                f"mx.io.ImageRecordIter ({what})",
                                keys["recpipe"], keys["mxnet"]))

    def contenders(self, point):
        found, self._ratios = self._plan()
        return found

    def ratios(self, point):
        return self._ratios

    def facts(self, point):
        """recpipe over ``rss_epochs`` whole epochs: peak RSS of the last epoch vs the first."""
        o = self.options
        if not o["rss_epochs"] or "rss" in self.skips:
            return {}
        top = max(self.thread_list)
        config = "train" if "train" in self.configs else self.configs[0]
        try:
            result = run_runner(self.pythons["recpipe"], [
                PEERS / "recpipe_loader.py", "--config", config, "--threads", top, "--batch",
                o["batch"], "--rec", self.rec, "--epochs", o["rss_epochs"]])
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            return {"rss_error": str(exc)}
        first, last = result["rss_by_epoch"][0]["peak_mb"], result["rss_by_epoch"][-1]["peak_mb"]
        return {"rss_epochs": o["rss_epochs"], "rss_threads": top, "rss_first_mb": first,
                "rss_last_mb": last, "rss_growth": last / first}

    @classmethod
    def tables(cls, result):
        p = result["points"][0]
        iters = [r for r in p["ratios"] if "ImageRecordIter vs" in r["name"]]
        rows = [[r["name"], fmt_ratio(r), f">= {r['goal']:g}x" if r.get("goal") else ""]
                for r in p["ratios"] if r not in iters]
        facts = p["facts"]
        notes = ("Each ratio pairs the two contenders' runs of the same round; recpipe beats "
                 "bare full decoding because it decodes only the crop's region, at a reduced "
                 "DCT scale where the output allows. MXNet's default is preprocess_threads=4 "
                 "with ctx='gpu', which it caps at max(nprocs/2, 1).")
        if "rss_growth" in facts:
            notes += (f" Peak RSS over {facts['rss_epochs']} epochs of recpipe "
                      f"({facts['rss_threads']} thr): {facts['rss_first_mb']:.0f} MiB after the "
                      f"first, {facts['rss_last_mb']:.0f} MiB after the last "
                      f"({facts['rss_growth']:.3f}x; goal <= 1.05x).")
        tables = [Table("recpipe against the ImageNet-style loaders (x faster)",
                        ["comparison", "ratio", "goal"], rows, notes=notes, chart="ratio",
                        chart_title="recpipe against each contender (x faster)",
                        headline=True)]
        if iters:
            tables.append(Table(
                "The drop-in recpipe.mxnet.ImageRecordIter against mx.io.ImageRecordIter",
                ["comparison", "ratio"], [[r["name"], fmt_ratio(r)] for r in iters],
                notes=f"MXNet's example-script settings (train: random-resized crop, mirror, "
                      f"colour jitter 0.4; val: resize 256, centre crop 224; both ImageNet "
                      f"normalisation), preprocess_threads="
                      f"{result['options']['iter_threads']}, batch 64, both in .venv-mxnet."))
        rates = [[name, fmt(figure(p, name, "images_per_s")),
                  fmt(figure(p, name, "cpu_per_wall"), 2),
                  fmt(figure(p, name, "peak_rss_mb"), 0)] for name in p["contenders"]]
        tables.append(Table("Images/s of every contender", ["measurement", "images/s",
                                                             "CPU s / wall s", "peak RSS MiB"],
                            rates))
        return tables
