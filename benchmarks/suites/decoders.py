"""Decode and augment micro-benchmarks on in-memory JPEG bytes (the photos), one part at a time:

- ``backends``: decode images/s per backend at full scale and at each DCT scale (1 thread);
- ``flags``: ``fast_dct`` / ``fast_upsample`` on and off (1 thread, full scale);
- ``threads``: 1 against 2 threads (does the decode release the GIL?), and a pure-Python
  counter thread's progress during one 3000x3000 decode (~1 when the GIL is released);
- ``rng``: the per-sample RNG with 64 uniforms: Philox by key/counter, the re-keyed per-thread
  Philox ``Augmenter.sample_rng`` uses, ``default_rng(SeedSequence)``;
- ``roi``: bare region decode of the train/val crops against the whole image, baseline and
  progressive copies of the same images (``recpipe._batch``);
- ``stages``: per-image microseconds of plan, decode (region at a DCT scale, or the whole image)
  and render (crop, resize, write) for train and val, uint8/float32/float16, NCHW/NHWC, with
  and without DCT scaling, and the rate against bare full-size decoding.

Single-thread figures use the thread's CPU time (``time.thread_time``): on a shared machine wall
time mostly measures the neighbours; 2-thread figures use wall time.
"""

import threading
import time

import numpy as np

from .. import data
from ..format import figure, fmt, fmt_ratio, ratio
from ..harness import Ratio, Suite, Table, suite

TRAIN = dict(data_shape=(3, 224, 224), random_resized_crop=True, min_random_area=0.08,
             max_random_area=1.0, min_aspect_ratio=3 / 4, max_aspect_ratio=4 / 3,
             rand_mirror=True)
VAL = dict(data_shape=(3, 224, 224), resize=256)
NORM = dict(mean_r=123.68, mean_g=116.28, mean_b=103.53, std_r=58.395, std_g=57.12, std_b=57.375)
SCALES = ((1, 1), (7, 8), (3, 4), (5, 8), (1, 2), (1, 4))
PIPELINE_ROWS = (  # (dtype, layout, dct_scaling, roi)
    ("uint8", "NCHW", True, True),
    ("uint8", "NCHW", True, False),
    ("uint8", "NCHW", False, True),
    ("float32", "NCHW", True, True),
    ("float32", "NCHW", True, False),
    ("float16", "NCHW", True, True),
    ("uint8", "NHWC", True, True),
    ("float32", "NHWC", True, True),
)
PARTS = ("backends", "flags", "threads", "rng", "roi", "stages")


def cpu_rate(function, items):
    """Items per CPU second of this thread for one call of ``function``."""
    start = time.thread_time()
    function()
    return {"images_per_s": items / max(time.thread_time() - start, 1e-9)}


def wall_rate(function, items):
    start = time.perf_counter()
    function()
    return {"images_per_s": items / (time.perf_counter() - start)}


def gil_progress(dec, size=3000):
    """Iterations/s of a pure-Python counter thread while another thread decodes one big JPEG,
    relative to the same counter running alone: ~1 (or ~0.5 on a busy machine) when the decode
    releases the GIL, ~0 when it holds it for the whole decode."""
    import cv2

    rng = np.random.default_rng(0)
    big = cv2.resize(rng.integers(0, 255, (size // 8, size // 8, 3), dtype=np.uint8),
                     (size, size), interpolation=cv2.INTER_CUBIC)
    blob = cv2.imencode(".jpg", big)[1].tobytes()
    stop = threading.Event()
    count = [0]

    def spin():
        while not stop.is_set():
            count[0] += 1

    def counted(work):
        count[0] = 0
        stop.clear()
        spinner = threading.Thread(target=spin)
        spinner.start()
        start = time.perf_counter()
        work()
        elapsed = time.perf_counter() - start
        stop.set()
        spinner.join()
        return count[0] / elapsed

    return counted(lambda: dec.decode(blob)) / counted(lambda: time.sleep(0.1))


def stage_times(blobs, dec, config, roi=True):
    """Per-image microseconds (thread CPU) of plan, decode and render (crop, resize, write),
    and their total. ``roi``: decode through ``Augmenter.decode`` (DCT scale + region when the
    decoder has ``roi``), as the loader does; False: the whole image at ``decode_scale``."""
    from recpipe.decode.augment import Augmenter

    aug = Augmenter(config)
    out = np.empty(aug.out_shape, aug.dtype)
    sizes = [dec.size(b) for b in blobs]
    acc = {"plan": 0.0, "decode": 0.0, "render": 0.0}
    clock = time.thread_time_ns
    for index, (blob, (h, w)) in enumerate(zip(blobs, sizes)):
        t0 = clock()
        plan = aug.plan(h, w, aug.sample_rng(0, 0, index))
        t1 = clock()
        if roi:
            img, window = aug.decode(dec, blob, plan)
        else:
            img = dec.decode(blob, scale=aug.decode_scale(plan, dec.scales),
                             channels=config.channels)
            window = None
        t2 = clock()
        aug.apply(img, plan, out, window=window)
        t3 = clock()
        acc["plan"] += t1 - t0
        acc["decode"] += t2 - t1
        acc["render"] += t3 - t2
    result = {f"us.{k}": v / len(blobs) / 1e3 for k, v in acc.items()}
    result["us.total"] = sum(acc.values()) / len(blobs) / 1e3
    result["images_per_s"] = 1e6 / result["us.total"]
    return result


@suite
class Decoders(Suite):
    name = "decoders"
    title = "Decoders and augmentation, part by part (micro-benchmarks)"
    grid = {"part": PARTS}
    options = {"count": 300, "scales": "1/1,7/8,3/4,5/8,1/2,1/4", "rows": len(PIPELINE_ROWS)}
    quick = {"count": 30, "scales": "1/1,1/2", "rows": 2}
    repeats = 5
    warmup = 1

    def prepare(self):
        import cv2

        from recpipe.decode.decoders import get_decoder

        cv2.setNumThreads(1)
        self.blobs = data.jpeg_blobs(self.options["count"])
        self.dec = get_decoder("auto")
        h, w = zip(*(self.dec.size(b) for b in self.blobs))
        return {"description": f"{len(self.blobs)} JPEGs of the photos in memory, mean "
                               f"{np.mean(w):.0f}x{np.mean(h):.0f}, "
                               f"{np.mean([len(b) for b in self.blobs]) / 1024:.0f} KiB; the "
                               f"auto decoder is {self.dec.name}; cv2.setNumThreads(1)",
                "decoder": self.dec.name}

    def _scales(self):
        return {tuple(int(x) for x in s.split("/")) for s in self.options["scales"].split(",")}

    def contenders(self, point):
        return getattr(self, f"_{point['part']}")()

    def _backends(self):
        from recpipe.decode.decoders import available_decoders, get_decoder

        blobs, found = self.blobs, {}
        for name in available_decoders():
            dec = get_decoder(name)
            for scale in dec.scales:
                if scale in self._scales():
                    found[f"{name} {scale[0]}/{scale[1]}"] = (
                        lambda d=dec, s=scale: cpu_rate(
                            lambda: [d.decode(b, scale=s) for b in blobs], len(blobs)))
        return found

    def _flags(self):
        from recpipe.decode.decoders import available_decoders, get_decoder

        blobs, found = self.blobs, {}
        for name in available_decoders():
            if name == "opencv":
                continue
            for fast_dct, fast_up in ((False, False), (True, False), (False, True),
                                      (True, True)):
                dec = get_decoder(name, fast_dct=fast_dct, fast_upsample=fast_up)
                found[f"{name} fast_dct={fast_dct} fast_upsample={fast_up}"] = (
                    lambda d=dec: cpu_rate(lambda: [d.decode(b) for b in blobs], len(blobs)))
        return found

    def _threads(self):
        from recpipe.decode.decoders import available_decoders, get_decoder

        blobs, found = self.blobs, {}
        for name in available_decoders():
            dec = get_decoder(name)

            def two(d=dec):
                halves = (blobs[0::2], blobs[1::2])
                threads = [threading.Thread(target=lambda h=h: [d.decode(b) for b in h])
                           for h in halves]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            found[f"{name} 1 thread"] = (lambda d=dec: wall_rate(
                lambda: [d.decode(b) for b in blobs], len(blobs)))
            found[f"{name} 2 threads"] = lambda two=two: wall_rate(two, len(blobs))
        return found

    def _rng(self):
        from recpipe.decode.augment import Augmenter, sample_rng

        n = 20000

        def timed(make):
            def run():
                start = time.thread_time()
                for i in range(n):
                    make(i).random(64)
                return {"us_per_sample": (time.thread_time() - start) / n * 1e6}
            return run
        return {"Philox key/counter": timed(lambda i: sample_rng(7, 1, i)),
                "re-keyed per-thread Philox": timed(lambda i: Augmenter.sample_rng(7, 1, i)),
                "default_rng(SeedSequence)": timed(lambda i: np.random.default_rng([7, 1, i]))}

    def _roi(self):
        import cv2

        from recpipe.decode.augment import AugmentConfig, Augmenter

        dec = self.dec
        if not dec.roi:
            self.skip("roi", "recpipe._batch (region decoding) is not built")
            return {}
        progressive = [cv2.imencode(".jpg", cv2.imdecode(np.frombuffer(b, np.uint8), 1),
                                    [cv2.IMWRITE_JPEG_QUALITY, 90,
                                     cv2.IMWRITE_JPEG_PROGRESSIVE, 1])[1].tobytes()
                       for b in self.blobs]
        found = {}
        for kind, blobs in (("baseline", self.blobs), ("progressive", progressive)):
            found[f"{kind}: whole image"] = (lambda b=blobs: cpu_rate(
                lambda: [dec.decode(x) for x in b], len(b)))
            for label, base in (("train", TRAIN), ("val", VAL)):
                aug = Augmenter(AugmentConfig(**base, dtype="uint8"))
                jobs = []
                for index, b in enumerate(blobs):
                    plan = aug.plan(*dec.size(b), aug.sample_rng(0, 0, index))
                    scale = aug.decode_scale(plan, dec.scales)
                    jobs.append((b, aug.decode_box(plan, scale), scale))
                found[f"{kind}: {label} crop region"] = (lambda j=jobs: cpu_rate(
                    lambda: [dec.decode_region(b, box, scale=s) for b, box, s in j], len(j)))
        return found

    def _stages(self):
        from recpipe.decode.augment import AugmentConfig

        dec, blobs = self.dec, self.blobs
        found = {"bare full decode": lambda: cpu_rate(lambda: [dec.decode(b) for b in blobs],
                                                      len(blobs))}
        for label, base in (("train", TRAIN), ("val", VAL)):
            for dtype, layout, dct, roi in PIPELINE_ROWS[:self.options["rows"]]:
                extra = NORM if dtype != "uint8" else {}
                config = AugmentConfig(**base, **extra, dtype=dtype, layout=layout,
                                       dct_scaling=dct)
                name = f"{label} {dtype} {layout} dct={dct} roi={roi}"
                found[name] = (lambda c=config, r=roi: stage_times(blobs, dec, c, roi=r))
        return found

    def ratios(self, point):
        part = point["part"]
        if part == "threads":
            from recpipe.decode.decoders import available_decoders

            return [Ratio(f"{n} 2/1 threads", f"{n} 2 threads", f"{n} 1 thread")
                    for n in available_decoders()]
        if part == "roi":
            return [Ratio(f"{kind}: {label} region / whole", f"{kind}: {label} crop region",
                          f"{kind}: whole image") for kind in ("baseline", "progressive")
                    for label in ("train", "val")]
        if part == "stages":
            return [Ratio(f"{name} / bare", name, "bare full decode")
                    for name in self._stages() if name != "bare full decode"]
        return []

    def facts(self, point):
        if point["part"] != "threads":
            return {}
        from recpipe.decode.decoders import available_decoders, get_decoder

        return {"gil_progress": {n: gil_progress(get_decoder(n)) for n in available_decoders()}}

    @classmethod
    def tables(cls, result):
        parts = {p["params"]["part"]: p for p in result["points"]}
        tables = []
        p = parts.get("backends")
        if p:
            tables.append(Table("Decode images/s per backend and DCT scale (1 thread, CPU time)",
                                ["backend and scale", "images/s"],
                                [[n, fmt(figure(p, n, "images_per_s"), 0)]
                                 for n in p["contenders"]]))
        p = parts.get("flags")
        if p:
            tables.append(Table("fast_dct / fast_upsample at full scale (1 thread)",
                                ["backend and flags", "images/s"],
                                [[n, fmt(figure(p, n, "images_per_s"), 0)]
                                 for n in p["contenders"]]))
        p = parts.get("threads")
        if p:
            progress = p["facts"].get("gil_progress", {})
            rows = [[n, fmt(figure(p, f"{n} 1 thread", "images_per_s"), 0),
                     fmt(figure(p, f"{n} 2 threads", "images_per_s"), 0),
                     fmt_ratio(ratio(p, f"{n} 2/1 threads")), fmt(progress.get(n), 2)]
                    for n in progress]
            tables.append(Table("GIL release: 1 against 2 threads, full scale",
                                ["backend", "1 thread img/s", "2 threads img/s", "2 / 1",
                                 "Python-thread progress during a 3000x3000 decode"], rows))
        p = parts.get("rng")
        if p:
            tables.append(Table("The per-sample RNG, with 64 uniforms",
                                ["generator", "us a sample"],
                                [[n, fmt(figure(p, n, "us_per_sample"), 2)]
                                 for n in p["contenders"]]))
        p = parts.get("roi")
        if p and p["contenders"]:
            rows = []
            for kind in ("baseline", "progressive"):
                rows.append([kind, "whole image",
                             fmt(figure(p, f"{kind}: whole image", "images_per_s"), 0), "1.00x"])
                for label in ("train", "val"):
                    rows.append([kind, f"{label} crop region",
                                 fmt(figure(p, f"{kind}: {label} crop region", "images_per_s"),
                                     0),
                                 fmt_ratio(ratio(p, f"{kind}: {label} region / whole"))])
            tables.append(Table("Region decode against the whole image (1 thread)",
                                ["JPEG", "decode", "images/s", "x whole image"], rows))
        p = parts.get("stages")
        if p:
            rows = [[n, fmt(figure(p, n, "us.plan"), 1), fmt(figure(p, n, "us.decode"), 0),
                     fmt(figure(p, n, "us.render"), 0), fmt(figure(p, n, "us.total"), 0),
                     fmt(figure(p, n, "images_per_s"), 0), fmt_ratio(ratio(p, f"{n} / bare"))]
                    for n in p["contenders"] if n != "bare full decode"]
            tables.append(Table(
                "Per-stage microseconds per image (1 thread) and the rate against bare "
                "full-size decoding", ["config", "plan", "decode", "render", "total",
                                       "images/s", "x full decode"], rows,
                notes="render = crop, resize, mirror, normalise and write into the batch slot; "
                      f"bare full decode: "
                      f"{fmt(figure(p, 'bare full decode', 'images_per_s'), 0)} images/s."))
        return tables
