"""What integrity costs on the native path, alternated in one run:

- checksums: ``integrity='off'`` against ``'auto'`` (a CRC32C of every record, checked in C
  without the GIL, from the ``.sums`` sidecar) on 112 px faces (float32, mirror, normalised,
  batch 128) and on the photos (train: random-resized crop 224, mirror, batch 64), each run
  ``epochs`` whole epochs; and, because a shared machine's noise is larger than the effect, the
  work the sums add measured directly: the CRC32C of every record (in cache) and the sidecar
  lookup of a run of 8 records, per image, as a share of the CPU per image;
- strict decoding: ``integrity='strict'`` against ``'auto'``: strict region decodes
  entropy-decode the rest of each scan below the region (no IDCT), so the cost depends on how
  much of the image a sample leaves undecoded: photos val (resize 256, centre crop 224),
  photos train (a random window), faces (the whole image is decoded: nothing more to read);
  one epoch a run on one decode thread, CPU seconds per image of the process;
- the scan bomb: one region decode of a valid 9000x9000 progressive JPEG of 2080 scans, per
  backend, with the default ``max_scans`` (and without a limit for ``unlimited`` backends).
"""

import time

import numpy as np

from .. import data
from ..format import figure, fmt, fmt_ratio, ratio
from ..harness import Ratio, Suite, Table, suite

NORM = dict(mean_r=127.5, mean_g=127.5, mean_b=127.5, std_r=127.5, std_g=127.5, std_b=127.5)
SUMS = {
    "sums: faces": ("faces", dict(batch_size=128, data_shape=(3, 112, 112), rand_mirror=True,
                                  **NORM)),
    "sums: photos": ("photos", dict(batch_size=64, data_shape=(3, 224, 224),
                                    random_resized_crop=True, rand_mirror=True)),
}
STRICT = {
    "strict: photos val": ("strict photos", dict(data_shape=(3, 224, 224), resize=256)),
    "strict: photos train": ("strict photos", dict(data_shape=(3, 224, 224),
                                                   random_resized_crop=True, rand_mirror=True)),
    "strict: faces": ("faces", dict(data_shape=(3, 112, 112), rand_mirror=True)),
}


def sums_run(rec, config, integrity, threads, epochs):
    """``images/s`` and CPU microseconds per image of ``epochs`` epochs."""
    from recpipe.decode.loader import ImageLoader

    with ImageLoader(rec, threads=threads, shuffle=True, integrity=integrity,
                     last_batch="partial", lookahead=False, **config) as loader:
        if not loader.records.native:
            raise RuntimeError("the native path is not in use")
        if (loader.reader.sums is not None) != (integrity != "off"):
            raise RuntimeError(f"integrity={integrity}: sums {loader.reader.sums}")
        next(iter(loader))  # warm up: threads, buffers, page cache
        count, wall, cpu = 0, time.perf_counter(), time.process_time()
        for _ in range(epochs):
            for images, _ in loader:
                count += len(images)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"images_per_s": count / wall, "cpu_us_per_image": 1e6 * cpu / count}


def strict_run(rec, mode, augment):
    """CPU microseconds per image and images/s of one epoch on one thread."""
    from recpipe import ImageLoader

    with ImageLoader(rec, 50, threads=1, integrity=mode, dtype="uint8", seed=1,
                     **augment) as loader:
        next(iter(loader))  # warm: threads, buffers, file cache
        count, cpu, wall = 0, time.process_time(), time.perf_counter()
        for images, _ in loader:
            count += len(images)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"cpu_us_per_image": 1e6 * cpu / count, "images_per_s": count / wall}


def _best(function, repeats=5):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def added_work(rec):
    """``{crc32c us, lookup us per record, crc32c GB/s}`` on ``rec``: the CRC32C of each payload
    while it is in the cache (as the loader sums a record right after reading it), and the
    sidecar lookup of runs of 8 records."""
    import recpipe
    from recpipe.decode.records import RecordDecoder
    from recpipe.io.sidecars.crc32c import crc32c

    with recpipe.RecordReader(rec) as reader:
        payloads = [reader[i] for i in range(len(reader))]
        records = RecordDecoder(reader, None)
        runs = [np.arange(i, min(i + 8, len(reader))) for i in range(0, len(reader), 8)]
        spans = [reader.spans(run) for run in runs]
        lookup = _best(lambda: [records._expected_sums(run, *span)
                                for run, span in zip(runs, spans)])
    crc = 0.0
    for payload in payloads:
        crc32c(payload)
        crc += _best(lambda payload=payload: crc32c(payload), 3)
    n = len(payloads)
    return {"crc32c_us": 1e6 * crc / n, "lookup_us": 1e6 * lookup / n,
            "crc32c_gb_per_s": sum(len(p) for p in payloads) / crc / 1e9}


def bomb_times(unlimited):
    """{backend: {limited, unlimited seconds and errors}} for one region decode of the bomb."""
    from recpipe.decode.decoders import available_decoders, get_decoder
    from recpipe.errors import DecodeError
    from tests.decode.jpeg_samples import scan_bomb

    bomb = scan_bomb(9000, 9000, 2080, components=3)
    out = {"bytes": len(bomb), "backends": {}}
    for name in available_decoders():
        times = {}
        for label, limit in (("limited", "default"), ("unlimited", None)):
            if label == "unlimited" and name not in unlimited:
                continue
            decoder = get_decoder(name) if limit == "default" else get_decoder(name,
                                                                               max_scans=None)
            start = time.perf_counter()
            try:
                decoder.decode_region(bomb, (0, 0, 224, 224))
                times[label + "_error"] = None
            except DecodeError as exc:
                times[label + "_error"] = str(exc)
            times[label] = time.perf_counter() - start
        out["backends"][name] = times
    return out


@suite
class Integrity(Suite):
    name = "integrity"
    title = "Integrity: what checksums and strict decoding cost"
    grid = {"case": tuple(SUMS) + tuple(STRICT)}
    options = {"epochs": 2, "threads": 1, "faces": 3000, "photos": 1000, "strict_photos": 500,
               "bomb": True, "unlimited": "libjpeg"}
    quick = {"case": ("sums: faces", "strict: photos val"), "epochs": 1, "faces": 300,
             "photos": 100, "strict_photos": 60, "unlimited": ""}
    repeats = 5
    warmup = 0  # every run warms its loader up itself

    def prepare(self):
        o, folder = self.options, self.work.parent / "data"
        cases = o["case"]
        self.recs = {}
        if any(SUMS.get(c, STRICT.get(c))[0] == "faces" for c in cases):
            self.recs["faces"] = data.faces_rec(folder, o["faces"])
        if any(c in SUMS and SUMS[c][0] == "photos" for c in cases):
            self.recs["photos"] = data.photos_rec(folder, o["photos"])
        if any(c in STRICT and STRICT[c][0] == "strict photos" for c in cases):
            self.recs["strict photos"] = data.photos_rec(folder, o["strict_photos"])
        return {"description": "; ".join(data.describe_rec(rec, name)["description"]
                                         for name, rec in self.recs.items())
                + " (all packed pass-through, with their .sums sidecars)"}

    def contenders(self, point):
        o, case = self.options, point["case"]
        if case in SUMS:
            source, config = SUMS[case]
            rec = self.recs[source]
            return {mode: (lambda mode=mode: sums_run(rec, config, mode, o["threads"],
                                                      o["epochs"]))
                    for mode in ("off", "auto")}
        source, augment = STRICT[case]
        rec = self.recs[source]
        return {mode: (lambda mode=mode: strict_run(rec, mode, augment))
                for mode in ("auto", "strict")}

    def ratios(self, point):
        if point["case"] in SUMS:
            return [Ratio("rate auto/off", "auto", "off"),
                    Ratio("CPU auto/off", "auto", "off", metric="cpu_us_per_image")]
        return [Ratio("CPU strict/auto", "strict", "auto", metric="cpu_us_per_image"),
                Ratio("rate strict/auto", "strict", "auto")]

    def facts(self, point):
        case = point["case"]
        facts = {}
        if case in SUMS:
            facts["added"] = added_work(self.recs[SUMS[case][0]])
        if self.options["bomb"] and case == self.options["case"][-1]:
            facts["bomb"] = bomb_times([u for u in self.options["unlimited"].split(",") if u])
        return facts

    @classmethod
    def tables(cls, result):
        sums, strict, bomb = [], [], None
        for p in result["points"]:
            case = p["params"]["case"]
            if "bomb" in p["facts"]:
                bomb = p["facts"]["bomb"]
            if case in SUMS:
                added = p["facts"].get("added", {})
                off_cpu = figure(p, "off", "cpu_us_per_image")
                share = ((added["crc32c_us"] + added["lookup_us"]) / off_cpu
                         if added and off_cpu else None)
                sums.append([case[len("sums: "):], fmt(figure(p, "off", "images_per_s")),
                             fmt(figure(p, "auto", "images_per_s")),
                             fmt_ratio(ratio(p, "rate auto/off"), 3),
                             fmt(off_cpu, 0), fmt(figure(p, "auto", "cpu_us_per_image"), 0),
                             fmt_ratio(ratio(p, "CPU auto/off"), 3),
                             f"{added.get('crc32c_us', 0):.2f} + {added.get('lookup_us', 0):.2f}"
                             if added else "",
                             f"{share:.2%}" if share is not None else ""])
            else:
                strict.append([case[len("strict: "):],
                               fmt(figure(p, "auto", "cpu_us_per_image"), 0),
                               fmt(figure(p, "strict", "cpu_us_per_image"), 0),
                               fmt_ratio(ratio(p, "CPU strict/auto"), 3),
                               fmt(figure(p, "auto", "images_per_s")),
                               fmt(figure(p, "strict", "images_per_s"))])
        tables = []
        if sums:
            tables.append(Table(
                "Checksums on the native path: integrity='auto' against 'off'",
                ["pack", "off img/s", "auto img/s", "rate auto/off", "off CPU us/img",
                 "auto CPU us/img", "CPU auto/off", "added us/img (CRC32C + lookup)",
                 "added share of CPU"], sums,
                notes=f"{result['options']['epochs']} epoch(s) a run, "
                      f"{result['options']['threads']} decode thread(s); the added work is "
                      "measured directly because the machine's noise is larger than the "
                      "effect."))
        if strict:
            tables.append(Table(
                "integrity='strict' against the default 'auto' (one decode thread)",
                ["config", "auto CPU us/img", "strict CPU us/img", "strict/auto CPU",
                 "auto img/s", "strict img/s"], strict))
        if bomb:
            rows = []
            for name, times in bomb["backends"].items():
                rows.append([name, f"{times['limited']:.3f}",
                             (times.get("limited_error") or "decoded")[:80],
                             f"{times['unlimited']:.1f}" if "unlimited" in times else
                             "not timed"])
            tables.append(Table(
                "A scan bomb (9000x9000 progressive JPEG of 2080 scans): one region decode",
                ["backend", "default max_scans s", "outcome", "no limit s"], rows,
                notes=f"The bomb is {bomb['bytes']:,} bytes (tests/decode/jpeg_samples.py's "
                      "`scan_bomb`)."))
        return tables
