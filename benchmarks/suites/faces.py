"""112x112 face crops (InsightFace's shape): recpipe's loader against bare decoding, the same job
written in C, a torch DataLoader over an MXFaceDataset-style dataset and DALI's CPU pipeline.

Every contender produces float32 NCHW batches of 128 with a random horizontal flip and
``(x - 127.5) / 127.5``:

- ``c_loop``: ``benchmarks/peers/jpeg_loop.c`` (compiled here with ``cc -ljpeg``): C threads
  decoding the same JPEG bytes to RGB with libjpeg and no Python at all, the ceiling;
- ``c_loop_batch``: the same C loop also writing each image as recpipe does (float32 CHW,
  normalised, every other image mirrored, into a ring of batch slots, by recpipe's own writer
  ``csrc/kernels/chw_rows.h``): the whole job with no Python;
- ``bare``: Python threads decoding the in-memory JPEG bytes at full size, nothing else;
- ``recpipe``: ``ImageLoader(rec, 128, (3, 112, 112), rand_mirror=True, mean/std 127.5)``;
- ``torch``: ``torch.utils.data.DataLoader`` with as many worker processes, over a map dataset
  doing what arcface_torch's ``MXFaceDataset`` does (``recpipe.mx.recordio`` read + OpenCV decode
  + flip + normalise);
- ``dali`` (when ``nvidia-dali`` is installed): DALI's CPU pipeline (``readers.mxnet`` ->
  ``decoders.image`` -> ``crop_mirror_normalize``).

Targets: >= 0.9x the C loop, >= 2x the torch DataLoader, >= 1.5x DALI.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import tempfile
import time

import numpy as np

from .. import data
from ..format import figure, fmt, fmt_ratio, ratio
from ..harness import REPO, Ratio, Skip, Suite, Table, suite

BATCH = 128
JPEG_LOOP = REPO / "benchmarks" / "peers" / "jpeg_loop.c"
NORM = dict(mean_r=127.5, mean_g=127.5, mean_b=127.5, std_r=127.5, std_g=127.5, std_b=127.5)
CONTENDERS = ("c_loop", "c_loop_batch", "bare", "recpipe", "torch", "dali")
LABELS = {"c_loop": "a C loop that only decodes (libjpeg)",
          "c_loop_batch": "the same job in C (decode + recpipe's writer)",
          "bare": "bare decode, Python threads", "torch": "torch DataLoader over an MXFaceDataset",
          "dali": "DALI CPU"}
GOALS = {"c_loop": 0.9, "torch": 2.0, "dali": 1.5}


def build_c_loop(folder, rec):
    """``(binary, blobs)``: jpeg_loop.c compiled and the .rec's JPEGs as length-prefixed blobs;
    Skip when there is no C compiler or no libjpeg headers."""
    from recpipe.decode.bench import load_images

    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise Skip("no C compiler (cc/gcc)")
    binary, blobs = os.path.join(folder, "jpeg_loop"), os.path.join(folder, "blobs.bin")
    built = subprocess.run([compiler, "-O2", "-I", str(REPO / "csrc"), "-o", binary,
                            str(JPEG_LOOP), "-ljpeg", "-lpthread"], capture_output=True,
                           text=True)
    if built.returncode != 0:
        raise Skip(f"jpeg_loop.c did not build (libjpeg headers?): {built.stderr[-300:]}")
    with open(blobs, "wb") as f:
        for image in load_images(rec):
            f.write(len(image).to_bytes(4, "little"))
            f.write(image)
    return binary, blobs


def c_loop_rate(c_loop, threads, seconds, output="rgb"):
    binary, blobs = c_loop
    out = subprocess.run([binary, blobs, str(threads), str(seconds), output],
                         capture_output=True, text=True, check=True, timeout=seconds * 10 + 60)
    return json.loads(out.stdout)["images_per_s"]


def _endless(loader):
    while True:
        for images, _ in loader:
            yield images


def _timed(batches, seconds, warmup=3):
    for _ in range(warmup):
        next(batches)
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        count += len(next(batches))
    return count / (time.perf_counter() - start)


def recpipe_rate(rec, threads, seconds):
    from recpipe.decode.loader import ImageLoader

    with ImageLoader(rec, BATCH, (3, 112, 112), threads=threads, shuffle=True, rand_mirror=True,
                     prefetch=4, **NORM) as loader:
        return _timed(_endless(loader), seconds)


class FaceDataset:
    """arcface_torch's MXFaceDataset, reading through recpipe.mx.recordio."""

    def __init__(self, rec):
        from recpipe import recordio

        self.rec = rec
        self.imgrec = None
        reader = recordio.MXIndexedRecordIO(rec[:-4] + ".idx", rec, "r")
        self.keys = list(reader.keys)
        reader.close()

    def __len__(self):
        return len(self.keys)

    def __getitem__(self, index):
        import cv2
        import torch

        from recpipe import recordio

        if self.imgrec is None:
            self.imgrec = recordio.MXIndexedRecordIO(self.rec[:-4] + ".idx", self.rec, "r")
        header, img = recordio.unpack(self.imgrec.read_idx(self.keys[index]))
        sample = cv2.cvtColor(cv2.imdecode(np.frombuffer(img, np.uint8), cv2.IMREAD_COLOR),
                              cv2.COLOR_BGR2RGB)
        if np.random.random() < 0.5:
            sample = sample[:, ::-1]
        sample = (sample.astype(np.float32) - 127.5) / 127.5
        return torch.from_numpy(np.ascontiguousarray(sample.transpose(2, 0, 1))), header.label


def torch_rate(rec, threads, seconds):
    import torch

    loader = torch.utils.data.DataLoader(FaceDataset(rec), batch_size=BATCH, shuffle=True,
                                         num_workers=threads, persistent_workers=True,
                                         prefetch_factor=4, multiprocessing_context="fork")
    batches = _endless(loader)
    try:
        return _timed(batches, seconds)
    finally:
        batches.close()
        del loader


def dali_rate(rec, threads, seconds):
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=BATCH, num_threads=threads, device_id=None, seed=1,
                  prefetch_queue_depth=4)
    def pipeline():
        jpegs, labels = fn.readers.mxnet(path=[rec], index_path=[rec[:-4] + ".idx"],
                                         random_shuffle=True, name="reader")
        images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
        images = fn.crop_mirror_normalize(images, mirror=fn.random.coin_flip(probability=0.5),
                                          mean=[127.5] * 3, std=[127.5] * 3,
                                          dtype=types.FLOAT, output_layout="CHW")
        return images, labels

    pipe = pipeline()
    pipe.build()

    def batches():
        while True:
            images, _ = pipe.run()
            yield images.as_array()

    return _timed(batches(), seconds)


def _installed(module):
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # no parent namespace package at all
        return False


@suite
class Faces(Suite):
    name = "faces"
    title = "112 px faces (InsightFace's shape) against the same job in C and the peers"
    grid = {"threads": (1, 2)}
    options = {"faces": 3000, "seconds": 3.0, "only": ""}
    quick = {"threads": (1,), "faces": 300, "seconds": 0.3, "only": "c_loop,bare,recpipe"}
    repeats = 3
    warmup = 0  # every run warms up itself (3 batches) before its timed window

    def prepare(self):
        self.rec = data.faces_rec(self.work.parent / "data", self.options["faces"])
        self.scratch = tempfile.mkdtemp(prefix="recpipe-bench-faces-")
        self.c_loop = None
        wanted = self._wanted()
        if {"c_loop", "c_loop_batch"} & wanted:
            try:
                self.c_loop = build_c_loop(self.scratch, self.rec)
            except Skip as exc:
                for name in ("c_loop", "c_loop_batch"):
                    self.skip(name, str(exc))
        if "torch" in wanted and not _installed("torch"):
            self.skip("torch", "torch is not installed")
        if "dali" in wanted and not _installed("nvidia.dali"):
            self.skip("dali", "nvidia-dali is not installed (benchmarks/peers/setup_peers.sh)")
        description = data.describe_rec(self.rec, "112x112 face crops of the photos "
                                                  "(JPEG quality 95)")
        description["description"] += ("; float32 NCHW batches of 128, random flip, "
                                       "(x - 127.5) / 127.5")
        return description

    def _wanted(self):
        only = [c for c in self.options["only"].split(",") if c]
        unknown = sorted(set(only) - set(CONTENDERS))
        if unknown:
            raise ValueError(f"unknown contenders {unknown}; known: {list(CONTENDERS)}")
        return set(only or CONTENDERS)

    def contenders(self, point):
        from recpipe.decode.bench import bare_decode_rate, load_images

        t, seconds, rec = point["threads"], self.options["seconds"], self.rec
        if not hasattr(self, "images"):
            self.images = load_images(rec)
        runs = {
            "c_loop": lambda: {"images_per_s": c_loop_rate(self.c_loop, t, seconds)},
            "c_loop_batch": lambda: {"images_per_s": c_loop_rate(self.c_loop, t, seconds,
                                                                 "batch")},
            "bare": lambda: {"images_per_s": bare_decode_rate(self.images, t, seconds=seconds)},
            "recpipe": lambda: {"images_per_s": recpipe_rate(rec, t, seconds)},
            "torch": lambda: {"images_per_s": torch_rate(rec, t, seconds)},
            "dali": lambda: {"images_per_s": dali_rate(rec, t, seconds)},
        }
        return {name: runs[name] for name in CONTENDERS
                if name in self._wanted() and name not in self.skipped}

    def ratios(self, point):
        return [Ratio(f"recpipe vs {name}", "recpipe", name, goal=GOALS.get(name))
                for name in CONTENDERS if name != "recpipe"]

    def close(self):
        if getattr(self, "scratch", None):
            shutil.rmtree(self.scratch, ignore_errors=True)

    @classmethod
    def tables(cls, result):
        rates, ratios = [], []
        for p in result["points"]:
            t = p["params"]["threads"]
            rates.append([f"{t} thr"] + [fmt(figure(p, name, "images_per_s"))
                                         for name in CONTENDERS])
            for name in CONTENDERS:
                r = ratio(p, f"recpipe vs {name}")
                if r and r["median"] is not None:
                    goal = f">= {r['goal']:g}x" if r.get("goal") else ""
                    ratios.append([f"recpipe vs {LABELS[name]}, {t} thr", fmt_ratio(r), goal])
        tables = [Table("recpipe on 112 px faces, as a multiple of each contender's rate",
                        ["comparison", "ratio", "target"], ratios, chart="ratio",
                        chart_title="recpipe on 112 px faces (x the contender's rate)",
                        headline=True),
                  Table("Images/s of every contender on 112 px faces",
                        ["threads"] + list(CONTENDERS), rates)]
        one = next((p for p in result["points"] if p["params"]["threads"] == 1), None)
        ours, bare = figure(one, "recpipe", "images_per_s"), figure(one, "bare", "images_per_s")
        if ours and bare:
            tables[1].notes = (f"Beyond decoding, at one thread recpipe spends "
                               f"{1e6 * (1 / ours - 1 / bare):.1f} us per sample (1/recpipe "
                               "- 1/bare of the medians): its Python and hand-off cost.")
        return tables
