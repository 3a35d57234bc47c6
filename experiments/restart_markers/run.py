"""Restart-marker experiment (see README.md here): transcoding cost, pixel identity, and what a
region decode saves when it is fed only the restart intervals its crop touches.

    python3 experiments/restart_markers/run.py [--rounds 5] [--images 1000] [--faces 1000]

Everything timed is C (rstlab.c, loaded with ctypes), one thread, in thread CPU time (the 2
shared cores are busy with other work: wall clocks varied 2x between rounds), paired: every
image is decoded by every measurement in turn, the order rotated image by image and reversed on
odd rounds; reported as medians of per-round ratios against a baseline of the same round.
"""

import argparse
import ctypes
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PHOTOS = os.path.join(ROOT, "..", "..", "shared", "data", "photos")
if not os.path.isdir(PHOTOS):
    PHOTOS = "/work/shared/data/photos"

# (name, rows, mcus, optimize): rows > 0 one interval every `rows` MCU rows; mcus > 0 the largest
# divisor of a row's MCUs nearest mcus; both 0: no restart markers (a plain re-encoding)
VARIANTS = [
    ("reencode", 0, 0, 0),
    ("reencode+opt", 0, 0, 1),
    ("row", 1, 0, 0),
    ("row+opt", 1, 0, 1),
    ("mcu8+opt", 0, 8, 1),
    ("mcu4+opt", 0, 4, 1),
    ("mcu2+opt", 0, 2, 1),
    ("mcu1+opt", 0, 1, 1),
]


def build_lab():
    out = os.path.join(tempfile.mkdtemp(prefix="rstlab-"), "rstlab.so")
    include = sysconfig.get_paths()["include"]
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-I", os.path.join(ROOT, "csrc"), "-I",
                    include, "-o", out, os.path.join(HERE, "rstlab.c"), "-ljpeg"], check=True)
    lib = ctypes.CDLL(out)
    lib.lab_transcode.restype = ctypes.c_long
    lib.lab_transcode.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_uint,
                                  ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t,
                                  ctypes.POINTER(ctypes.c_uint)]
    lib.lab_transcode_time.restype = ctypes.c_double
    lib.lab_transcode_time.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint,
                                       ctypes.c_uint, ctypes.c_int, ctypes.c_int]
    lib.lab_region.restype = ctypes.c_int
    lib.lab_region.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int] + \
        [ctypes.c_long] * 4 + [ctypes.c_uint, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t,
                               ctypes.POINTER(ctypes.c_uint)]
    ptrs = [ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_size_t)]
    lib.lab_time.restype = ctypes.c_double
    lib.lab_time.argtypes = ptrs + [ctypes.POINTER(ctypes.c_long), ctypes.c_int, ctypes.c_int,
                                    ctypes.c_uint]
    lib.lab_time_cut.restype = ctypes.c_double
    lib.lab_time_cut.argtypes = ptrs + [ctypes.POINTER(ctypes.c_long), ctypes.c_int,
                                        ctypes.c_uint, ctypes.POINTER(ctypes.c_double)]
    lib.lab_time_scan.restype = ctypes.c_double
    lib.lab_time_scan.argtypes = ptrs + [ctypes.c_int, ctypes.POINTER(ctypes.c_long)]
    lib.lab_time_paired.restype = ctypes.c_int
    lib.lab_time_paired.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
                                    ctypes.POINTER(ctypes.c_size_t),
                                    ctypes.POINTER(ctypes.c_long), ctypes.POINTER(ctypes.c_int),
                                    ctypes.POINTER(ctypes.c_double)]
    lib.lab_time_entropy.restype = ctypes.c_double
    lib.lab_time_entropy.argtypes = ptrs + [ctypes.c_int]
    return lib


class Images:
    """JPEG bytes kept alive with the C arrays that point at them."""

    def __init__(self, blobs):
        self.blobs = list(blobs)
        n = len(self.blobs)
        self.datas = (ctypes.c_char_p * n)(*self.blobs)
        self.sizes = (ctypes.c_size_t * n)(*[len(b) for b in self.blobs])


def load_photos(limit):
    paths = sorted(glob.glob(os.path.join(PHOTOS, "*", "*.jpg")))[:limit]
    return [open(p, "rb").read() for p in paths]


def make_faces(photos, count, seed=0):
    """112x112 crops, JPEG quality 95 (tools/bench_faces.py's recipe)."""
    import cv2

    rng = np.random.default_rng(seed)
    faces = []
    for i in range(count):
        img = cv2.imdecode(np.frombuffer(photos[i % len(photos)], np.uint8), cv2.IMREAD_COLOR)
        h, w = img.shape[:2]
        side = int(min(h, w) * rng.uniform(0.5, 0.8))
        y = int(rng.integers(0, h - side + 1))
        x = int(rng.integers(0, w - side + 1))
        face = cv2.resize(img[y:y + side, x:x + side], (112, 112), interpolation=cv2.INTER_AREA)
        faces.append(cv2.imencode(".jpg", face, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes())
    return faces


def jpeg_size(blob):
    """(height, width) from the SOF."""
    i = 2
    while i < len(blob):
        while blob[i] == 0xFF:
            i += 1
        m = blob[i]
        n = blob[i + 1] << 8 | blob[i + 2]
        if 0xC0 <= m <= 0xCF and m not in (0xC4, 0xC8, 0xCC):
            return blob[i + 4] << 8 | blob[i + 5], blob[i + 6] << 8 | blob[i + 7]
        i += 1 + n
    raise ValueError("no SOF")


def train_boxes(sizes, rng, out=224):
    """torchvision's RandomResizedCrop boxes (area 0.08-1, aspect 3/4-4/3), as DCT-scaled decode
    boxes: (den, x0, y0, x1, y1) in scaled pixels, den the largest of 1, 2, 4, 8 that keeps the
    box at least ``out`` on both sides (what recpipe's planner asks libjpeg for)."""
    boxes = []
    for h, w in sizes:
        area = h * w
        for _ in range(10):
            a = area * rng.uniform(0.08, 1.0)
            r = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
            cw, ch = int(round(np.sqrt(a * r))), int(round(np.sqrt(a / r)))
            if 0 < cw <= w and 0 < ch <= h:
                x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
                break
        else:
            cw = ch = min(h, w)
            x, y = (w - cw) // 2, (h - ch) // 2
        boxes.append(scaled(x, y, x + cw, y + ch, out))
    return boxes


def val_boxes(sizes, resize=256, out=224):
    """Resize the shorter side to 256, centre crop 224: the source box of that crop."""
    boxes = []
    for h, w in sizes:
        side = min(h, w) * out / resize
        x, y = (w - side) / 2, (h - side) / 2
        boxes.append(scaled(int(x), int(y), int(np.ceil(x + side)), int(np.ceil(y + side)),
                            out * min(h, w) / resize))
    return boxes


def scaled(x0, y0, x1, y1, out):
    den = 1
    while den < 8 and (x1 - x0) / (den * 2) >= out and (y1 - y0) / (den * 2) >= out:
        den *= 2
    return den, x0 // den, y0 // den, -(-x1 // den), -(-y1 // den)


def transcode_all(lib, blobs, variant):
    _, rows, mcus, opt = variant
    out, intervals = [], []
    for blob in blobs:
        buf = ctypes.create_string_buffer(len(blob) * 2 + 65536)
        interval = ctypes.c_uint(0)
        n = lib.lab_transcode(blob, len(blob), rows, mcus, opt, buf, len(buf),
                              ctypes.byref(interval))
        if n <= 0:
            raise RuntimeError(f"transcode failed: {n}")
        out.append(buf.raw[:n])
        intervals.append(interval.value)
    return out, intervals


def decode(lib, blob, mode, box, fast_upsample=0):
    den, x0, y0, x1, y1 = box
    h, w = jpeg_size(blob)
    cap = (w // den + 64) * (h // den + 64) * 3
    buf = ctypes.create_string_buffer(cap)
    hwxy = (ctypes.c_uint * 4)()
    status = lib.lab_region(blob, len(blob), mode, x0, y0, x1, y1, den, fast_upsample, buf, cap,
                            hwxy)
    if status != 0:
        raise RuntimeError(f"decode failed: {status}")
    hh, ww, x, y = list(hwxy)
    return np.frombuffer(buf.raw[:hh * ww * 3], np.uint8).reshape(hh, ww, 3), x, y


def inside(pixels, x, y, box):
    """The requested box out of a decoded window."""
    _, x0, y0, x1, y1 = box
    return pixels[y0 - y:y1 - y, x0 - x:x1 - x]


def check_pixels(lib, originals, marked, boxes, rng):
    """Full decodes equal; regions through the cut equal today's region decode of the original,
    at the train boxes and at random boxes (any scale, fast upsampling on and off)."""
    bad = 0
    for i, (a, b) in enumerate(zip(originals, marked)):
        full_a, _, _ = decode(lib, a, 0, (1, 0, 0, -1, -1))
        full_b, _, _ = decode(lib, b, 0, (1, 0, 0, -1, -1))
        if not np.array_equal(full_a, full_b):
            bad += 1
            continue
        h, w = jpeg_size(a)
        checks = [(boxes[i], 0)]
        for _ in range(3):
            den = int(rng.choice([1, 1, 2, 4, 8]))
            sh, sw = -(-h // den), -(-w // den)
            x0, y0 = int(rng.integers(0, sw)), int(rng.integers(0, sh))
            x1, y1 = int(rng.integers(x0 + 1, sw + 1)), int(rng.integers(y0 + 1, sh + 1))
            checks.append(((den, x0, y0, x1, y1), int(rng.integers(0, 2))))
        for box, fast in checks:
            ra, xa, ya = decode(lib, a, 1, box, fast)
            rb, xb, yb = decode(lib, b, 2, box, fast)
            if not np.array_equal(inside(ra, xa, ya, box), inside(rb, xb, yb, box)):
                bad += 1
                print("region mismatch", i, box, fast, file=sys.stderr)
    return bad


def box_array(boxes):
    flat = [v for b in boxes for v in b[1:]]
    return (ctypes.c_long * len(flat))(*flat)


def timed_groups(boxes):
    """Images grouped by DCT scale (the C loop takes one scale per call)."""
    groups = {}
    for i, b in enumerate(boxes):
        groups.setdefault(b[0], []).append(i)
    return groups


def time_mode(lib, images, boxes, mode):
    total = 0.0
    for den, idx in timed_groups(boxes).items():
        sub = Images([images.blobs[i] for i in idx])
        t = lib.lab_time(sub.datas, sub.sizes, box_array([boxes[i] for i in idx]), len(idx),
                         mode, den)
        if t < 0:
            raise RuntimeError("timed decode failed")
        total += t
    return total


def paired(lib, sets):
    """Thread CPU seconds of each (name, blobs, boxes, mode) over the same images, paired."""
    m, n = len(sets), len(sets[0][1])
    blobs = [b for _, bs, _, _ in sets for b in bs]
    datas = (ctypes.c_char_p * len(blobs))(*blobs)
    sizes = (ctypes.c_size_t * len(blobs))(*map(len, blobs))
    flat = [v for _, _, boxes, _ in sets for box in boxes for v in box]
    boxes = (ctypes.c_long * len(flat))(*flat)
    modes = (ctypes.c_int * m)(*[mode for *_, mode in sets])
    seconds = (ctypes.c_double * m)()
    if lib.lab_time_paired(m, n, datas, sizes, boxes, modes, seconds) != 0:
        raise RuntimeError("timed decode failed")
    return {name: seconds[k] for k, (name, *_) in enumerate(sets)}


def median_ratio(rounds, num, den):
    return statistics.median(r[num] / r[den] for r in rounds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--faces", type=int, default=1000)
    ap.add_argument("--json")
    args = ap.parse_args()
    lib = build_lab()
    rng = np.random.default_rng(1)
    photos = load_photos(args.images)
    faces = make_faces(photos, args.faces)
    report = {"machine": f"{os.cpu_count()} cores, {platform.platform()}",
              "load_start": os.getloadavg()[0], "images": len(photos), "faces": len(faces)}

    # 1. transcoding: size, time, identity
    sets = {"photos": photos, "faces": faces}
    marked = {}
    sizes_table = []
    for set_name, blobs in sets.items():
        sizes = [jpeg_size(b) for b in blobs]
        boxes = train_boxes(sizes, rng)
        for variant in VARIANTS:
            out, intervals = transcode_all(lib, blobs, variant)
            marked[(set_name, variant[0])] = out
            t_samples = []
            for _ in range(2):
                t0 = 0.0
                for blob in blobs[:200]:
                    t0 += lib.lab_transcode_time(blob, len(blob), variant[1], variant[2],
                                                 variant[3], 1)
                t_samples.append(t0 / min(200, len(blobs)))
            bad = check_pixels(lib, blobs, out, boxes, rng) if variant[1] or variant[2] else 0
            row = {"set": set_name, "variant": variant[0],
                   "bytes_ratio": sum(map(len, out)) / sum(map(len, blobs)),
                   "mean_interval_mcus": statistics.mean(intervals),
                   "transcode_ms": 1000 * min(t_samples), "pixel_mismatches": bad}
            sizes_table.append(row)
            print(json.dumps(row), flush=True)
    report["transcode"] = sizes_table

    # 2. where the index lives: scanning every marker vs building a cut, vs a decode
    photo_sizes = [jpeg_size(b) for b in photos]
    tboxes = train_boxes(photo_sizes, np.random.default_rng(7))
    vboxes = val_boxes(photo_sizes)
    scan = {}
    for name in ("row+opt", "mcu4+opt", "mcu1+opt"):
        imgs = Images(marked[("photos", name)])
        markers = ctypes.c_long(0)
        t_scan = min(lib.lab_time_scan(imgs.datas, imgs.sizes, len(photos), ctypes.byref(markers))
                     for _ in range(3))
        cut_bytes = ctypes.c_double(0)
        t_cut = min(lib.lab_time_cut(imgs.datas, imgs.sizes, box_array(tboxes), len(photos), 1,
                                     ctypes.byref(cut_bytes)) for _ in range(3))
        t_full = time_mode(lib, imgs, [(1, 0, 0, -1, -1)] * len(photos), 0)
        scan[name] = {"scan_all_markers_us": 1e6 * t_scan / len(photos),
                      "markers_per_image": markers.value / len(photos),
                      "build_train_cut_us": 1e6 * t_cut / len(photos),
                      "train_cut_bytes_share": cut_bytes.value / sum(map(len, imgs.blobs)),
                      "full_decode_us": 1e6 * t_full / len(photos)}
        print(name, json.dumps(scan[name]), flush=True)
    report["index"] = scan

    # 3. decode times, paired: every image decoded by every measurement in turn
    orig = Images(photos)
    entropy = [lib.lab_time_entropy(orig.datas, orig.sizes, len(photos)) for _ in range(2)]
    full0 = [time_mode(lib, orig, [(1, 0, 0, -1, -1)] * len(photos), 0) for _ in range(2)]
    report["entropy_share_of_full_decode"] = min(entropy) / min(full0)
    print("entropy share", report["entropy_share_of_full_decode"], flush=True)
    whole = [(1, 0, 0, -1, -1)] * len(photos)
    variants = ["row+opt", "mcu8+opt", "mcu4+opt", "mcu2+opt", "mcu1+opt"]
    photo_sets = [("full", photos, whole, 0), ("train_region", photos, tboxes, 1),
                  ("val_region", photos, vboxes, 1)]
    for v in variants:
        blobs = marked[("photos", v)]
        photo_sets += [(f"full[{v}]", blobs, whole, 0), (f"train_region[{v}]", blobs, tboxes, 1),
                       (f"train_cut[{v}]", blobs, tboxes, 2), (f"val_cut[{v}]", blobs, vboxes, 2)]
    photo_sets += [("full[reencode+opt]", marked[("photos", "reencode+opt")], whole, 0),
                   ("full[row]", marked[("photos", "row")], whole, 0),
                   ("train_cut[row]", marked[("photos", "row")], tboxes, 2)]
    fwhole = [(1, 0, 0, -1, -1)] * len(faces)
    face_sets = [("faces_full", faces, fwhole, 0),
                 ("faces_full[row+opt]", marked[("faces", "row+opt")], fwhole, 0),
                 ("faces_full[row]", marked[("faces", "row")], fwhole, 0),
                 ("faces_full[reencode+opt]", marked[("faces", "reencode+opt")], fwhole, 0)]
    rounds = []
    for r in range(args.rounds):
        times = {}
        for sets in (photo_sets, face_sets):
            times.update(paired(lib, sets if r % 2 == 0 else sets[::-1]))
        rounds.append(times)
        print("round", r, json.dumps({k: round(v, 4) for k, v in times.items()}), flush=True)
    ratios = {}
    for name, *_ in photo_sets + face_sets:
        base = "faces_full" if name.startswith("faces") else "full"
        ratios[f"{base} / {name}"] = median_ratio(rounds, base, name)
    for v in variants + ["row"]:
        ratios[f"train_region (original) / train_cut[{v}]"] = median_ratio(
            rounds, "train_region", f"train_cut[{v}]")
    for v in variants:
        ratios[f"val_region (original) / val_cut[{v}]"] = median_ratio(
            rounds, "val_region", f"val_cut[{v}]")
    report["speedups"] = ratios
    report["rounds"] = rounds
    report["load_end"] = os.getloadavg()[0]
    for k, v in ratios.items():
        print(f"{v:6.3f}  {k}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
