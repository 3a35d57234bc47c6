"""112x112 face crops (InsightFace's shape): recpipe's loader against bare decoding and a torch
DataLoader over an MXFaceDataset-style dataset, alternated in one run.

Faces are cut from ``../shared/data/photos`` (a square around the centre, jittered, resized to
112x112, JPEG quality 95), packed pass-through. Every contender produces float32 NCHW batches of
128 with a random horizontal flip and ``(x - 127.5) / 127.5``:

- ``c_loop``: ``tools/jpeg_loop.c`` (compiled here with ``cc -ljpeg``): C threads decoding the
  same JPEG bytes to RGB with libjpeg and no Python at all, the ceiling (issue 21: recpipe >= 0.9x);
- ``c_loop_batch``: the same C loop also writing each image as recpipe does (float32 CHW,
  normalised, every other image mirrored, into a ring of batch slots, by recpipe's own writer
  ``csrc/kernels/chw_rows.h``): the whole job with no Python, what recpipe's Python and hand-off
  cost is measured against;
- ``bare``: Python threads decoding the in-memory JPEG bytes at full size, nothing else;
- ``recpipe``: ``ImageLoader(rec, 128, (3, 112, 112), rand_mirror=True, mean/std 127.5)``;
- ``torch``: ``torch.utils.data.DataLoader`` with as many worker processes, over a map dataset
  doing what arcface_torch's ``MXFaceDataset`` does (``recpipe.mx.recordio`` read + OpenCV decode
  + flip + normalise);
- ``dali`` (when ``nvidia-dali-cuda120`` is installed): NVIDIA DALI's CPU pipeline
  (``device_id=None``, ``num_threads`` threads): ``readers.mxnet`` (shuffled) ->
  ``decoders.image`` -> ``crop_mirror_normalize`` (coin-flip mirror, the same normalisation,
  CHW float32).

It reports images/s, the ratios (targets of the small-images issue: >= 0.9x bare decode, >= 2x
the torch DataLoader, >= 1.5x DALI) and the microseconds per sample that the loader spends
beyond decoding at one thread (its Python and hand-off cost, what caps scaling).

    python tools/bench_faces.py --rounds 3 --seconds 3
"""

import argparse
import glob
import importlib.util
import json
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

PHOTOS = os.path.join(HERE, "..", "..", "shared", "data", "photos")
BATCH = 128


def make_faces(folder, count, photos=PHOTOS):
    """``folder/faces.rec``: ``count`` 112x112 crops of ``photos`` (default: the shared photos),
    labelled by class."""
    import cv2

    import recpipe

    rec = os.path.join(folder, "faces.rec")
    if os.path.exists(rec):
        return rec
    os.makedirs(folder, exist_ok=True)
    paths = sorted(glob.glob(os.path.join(photos, "*", "*.jpg")))
    if not paths:
        raise SystemExit(f"no photos under {photos}")
    rng = np.random.default_rng(0)
    with recpipe.RecordWriter(rec) as writer:
        for i in range(count):
            path = paths[i % len(paths)]
            img = cv2.imread(path)
            h, w = img.shape[:2]
            side = int(min(h, w) * rng.uniform(0.5, 0.8))
            y = int(rng.integers(0, h - side + 1))
            x = int(rng.integers(0, w - side + 1))
            face = cv2.resize(img[y:y + side, x:x + side], (112, 112), interpolation=cv2.INTER_AREA)
            jpeg = cv2.imencode(".jpg", face, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()
            label = float(os.path.basename(os.path.dirname(path))[-2:])
            writer.write(recpipe.pack(recpipe.IRHeader(0, label, i, 0), jpeg))
    return rec


def bare(rec, threads, seconds):
    from recpipe.decode.bench import bare_decode_rate, load_images

    return bare_decode_rate(load_images(rec), threads, seconds=seconds)


_C_LOOP = {}  # the compiled tools/jpeg_loop.c and its input, made once per script run


def c_loop_rate(rec, threads, seconds, output="rgb"):
    """Images/s of ``tools/jpeg_loop.c``: ``threads`` C threads decoding the same JPEG bytes to
    RGB with libjpeg, no Python at all (the issue's ceiling); ``output="batch"``: also writing
    each into a float32 batch slot as recpipe does. None when no C compiler or libjpeg headers
    are found."""
    import shutil
    import subprocess
    import tempfile

    if "binary" not in _C_LOOP:
        compiler = shutil.which("cc") or shutil.which("gcc")
        folder = tempfile.mkdtemp(prefix="recpipe-jpeg-loop-")
        binary, blobs = os.path.join(folder, "jpeg_loop"), os.path.join(folder, "blobs.bin")
        built = compiler and subprocess.run(
            [compiler, "-O2", "-I", os.path.join(HERE, os.pardir, "csrc"), "-o", binary,
             os.path.join(HERE, "jpeg_loop.c"), "-ljpeg", "-lpthread"],
            capture_output=True).returncode == 0
        if built:
            from recpipe.decode.bench import load_images

            with open(blobs, "wb") as f:
                for image in load_images(rec):
                    f.write(len(image).to_bytes(4, "little"))
                    f.write(image)
        _C_LOOP.update(binary=binary if built else None, blobs=blobs)
    if _C_LOOP["binary"] is None:
        return None
    out = subprocess.run([_C_LOOP["binary"], _C_LOOP["blobs"], str(threads), str(seconds),
                          output], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["images_per_s"]


def c_loop_batch_rate(rec, threads, seconds):
    """``c_loop_rate`` writing float32 batch slots too: the loader's whole job in C alone."""
    return c_loop_rate(rec, threads, seconds, output="batch")


def recpipe_rate(rec, threads, seconds):
    from recpipe.decode.loader import ImageLoader

    norm = dict(mean_r=127.5, mean_g=127.5, mean_b=127.5, std_r=127.5, std_g=127.5, std_b=127.5)
    with ImageLoader(rec, BATCH, (3, 112, 112), threads=threads, shuffle=True, rand_mirror=True,
                     prefetch=4, **norm) as loader:
        return _timed(_endless(loader), seconds)


class FaceDataset:
    """arcface_torch's MXFaceDataset, reading through recpipe.mx.recordio."""

    def __init__(self, rec):
        self.rec = rec
        self.imgrec = None
        from recpipe import recordio

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
    return _timed(_endless(loader), seconds)


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


def _dali_installed():
    try:
        return importlib.util.find_spec("nvidia.dali") is not None
    except ModuleNotFoundError:  # no nvidia namespace package at all
        return False


CONTENDERS = {"c_loop": c_loop_rate, "c_loop_batch": c_loop_batch_rate, "bare": bare,
              "recpipe": recpipe_rate, "torch": torch_rate}
if _dali_installed():
    CONTENDERS["dali"] = dali_rate


def _ratios(rates, medians, contenders, t):
    """recpipe's images/s against each other contender run at ``t`` threads (medians), and per
    round against the C loop and bare decoding."""
    out = {"images_per_s": {name: round(medians[(name, t)], 1) for name in contenders}}
    if ("recpipe", t) not in medians:
        return out
    ours = medians[("recpipe", t)]
    for name, key in (("c_loop", "recpipe_vs_c_loop"),
                      ("c_loop_batch", "recpipe_vs_c_loop_batch"), ("bare", "recpipe_vs_bare"),
                      ("torch", "recpipe_vs_torch"), ("dali", "recpipe_vs_dali")):
        if (name, t) in medians:
            out[key] = round(ours / medians[(name, t)], 3)
    for name in ("c_loop", "c_loop_batch", "bare"):
        if (name, t) in rates:
            out[f"per_round_vs_{name}"] = [round(o / b, 3) for o, b in
                                           zip(rates[("recpipe", t)], rates[(name, t)])]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--faces", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--dir", default="/tmp/recpipe-bench-faces")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", default="",
                        help="comma-separated contenders to run (default: all; c_loop and "
                             "recpipe give the ratio against the C loop)")
    parser.add_argument("--photos", default=PHOTOS, help="the photos the faces are cut from")
    args = parser.parse_args()
    if args.only:
        wanted = args.only.split(",")
        unknown = sorted(set(wanted) - set(CONTENDERS))
        if unknown:
            raise SystemExit(f"unknown contenders {unknown}; known: {sorted(CONTENDERS)}")
        for name in list(CONTENDERS):
            if name not in wanted:
                del CONTENDERS[name]
    rec = make_faces(args.dir, args.faces, args.photos)
    thread_counts = [int(t) for t in args.threads.split(",")]
    rates = {(name, t): [] for name in CONTENDERS for t in thread_counts}
    for round_ in range(args.rounds):  # alternated: every contender once per round
        for t in thread_counts:
            for name, run in CONTENDERS.items():
                rate = run(rec, t, args.seconds)
                if rate is not None:
                    rates[(name, t)].append(rate)
    rates = {key: values for key, values in rates.items() if values}
    contenders = [name for name in CONTENDERS if (name, thread_counts[0]) in rates]
    medians = {key: statistics.median(values) for key, values in rates.items()}
    result = {"faces": args.faces, "rounds": args.rounds, "seconds": args.seconds,
              "cpu_count": os.cpu_count(), "threads": {}}
    for t in thread_counts:
        result["threads"][t] = _ratios(rates, medians, contenders, t)
    if ("recpipe", 1) in medians and ("bare", 1) in medians:
        result["overhead_us_per_sample_1_thread"] = round(
            1e6 * (1 / medians[("recpipe", 1)] - 1 / medians[("bare", 1)]), 1)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{args.faces} faces 112x112, float32 flip + (x-127.5)/127.5, batch {BATCH}, "
          f"{args.rounds} alternated rounds of {args.seconds:g} s, {os.cpu_count()} CPUs")
    for t, r in result["threads"].items():
        rates_text = ", ".join(f"{k} {v:.0f}" for k, v in r["images_per_s"].items())
        parts = [f"{t} thread(s): {rates_text} images/s"]
        if r.get("recpipe_vs_c_loop"):
            parts.append(f"recpipe {r['recpipe_vs_c_loop']:.2f}x the C loop of libjpeg (target "
                         f"0.9, per round {r['per_round_vs_c_loop']})")
        if r.get("recpipe_vs_c_loop_batch"):
            parts.append(f"{r['recpipe_vs_c_loop_batch']:.2f}x the C loop writing the same "
                         f"batches (per round {r['per_round_vs_c_loop_batch']})")
        if r.get("recpipe_vs_bare"):
            parts.append(f"{r['recpipe_vs_bare']:.2f}x bare (Python threads decoding), per round "
                         f"{r['per_round_vs_bare']}")
        if r.get("recpipe_vs_torch"):
            parts.append(f"{r['recpipe_vs_torch']:.2f}x torch (target 2)")
        if r.get("recpipe_vs_dali"):
            parts.append(f"{r['recpipe_vs_dali']:.2f}x DALI (target 1.5)")
        print("  " + "; ".join(parts))
    if "overhead_us_per_sample_1_thread" in result:
        print(f"  beyond decoding, one thread: {result['overhead_us_per_sample_1_thread']:.0f} us "
              "per sample (target: Python <= 10 us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
