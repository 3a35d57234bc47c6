"""The provenance log (``ImageLoader(provenance=PATH)``): loader throughput with the log on and
off, the log's bytes per batch and the cost of one ``ProvenanceLog.record`` call.

Each run takes ``batches`` batches of the same loader (shuffle, train augmentation to a small
output so that batches come fast, fixed threads) after one warm-up batch. The log size is
measured for shuffled batches of ``batch_size`` and of 128 (the ImageNet default), whose
positions do not form runs (the worst case for its size).
"""

import os
import statistics
import time

import numpy as np

from .. import data
from ..format import figure, fmt, fmt_ratio, ratio
from ..harness import Ratio, Suite, Table, suite

LOADER = dict(random_resized_crop=True, min_random_area=0.08, max_aspect_ratio=0.25,
              rand_mirror=True, shuffle=True, seed=1)


@suite
class Provenance(Suite):
    name = "provenance"
    title = "The provenance log: loader throughput with it on and off, and its size"
    options = {"batches": 30, "batch_size": 32, "size": 64, "threads": 2, "photos": 1000}
    quick = {"batches": 4, "photos": 200}
    repeats = 5
    warmup = 0  # each run takes one warm-up batch itself

    def prepare(self):
        self.rec = data.photos_rec(self.work.parent / "data", self.options["photos"])
        self.runs = 0
        return data.describe_rec(self.rec, "the photos packed pass-through")

    def _run(self, log):
        import recpipe

        o = self.options
        self.runs += 1
        path = os.path.join(str(self.work), f"run{self.runs}.jsonl") if log else None
        try:
            with recpipe.ImageLoader(self.rec, o["batch_size"], (3, o["size"], o["size"]),
                                     threads=o["threads"], provenance=path, **LOADER) as loader:
                stream = iter(loader)
                next(stream)  # warm-up, outside the timing
                start = time.perf_counter()
                for _ in range(o["batches"]):
                    try:
                        next(stream)
                    except StopIteration:
                        stream = iter(loader)
                        next(stream)
                rate = o["batches"] * o["batch_size"] / (time.perf_counter() - start)
        finally:
            if path and os.path.exists(path):
                os.remove(path)
        return {"images_per_s": rate}

    def contenders(self, point):
        return {"log off": lambda: self._run(False), "log on": lambda: self._run(True)}

    def ratios(self, point):
        return [Ratio("on/off", "log on", "log off")]

    def facts(self, point):
        return {"sizes": [self._bytes_per_batch(b) for b in (self.options["batch_size"], 128)],
                "record_call_us": self._record_cost_us()}

    def _bytes_per_batch(self, batch_size):
        import recpipe

        log = os.path.join(str(self.work), f"size{batch_size}.jsonl")
        with recpipe.ImageLoader(self.rec, batch_size, (3, 32, 32), threads=2, provenance=log,
                                 **LOADER) as loader:
            batches = sum(1 for _ in loader)
        with open(log) as f:
            lines = f.read().splitlines()
        os.remove(log)
        return {"batch_size": batch_size, "batches": batches,
                "loader_line_bytes": len(lines[0]) + 1,
                "bytes_per_batch": statistics.mean(len(line) + 1 for line in lines[1:])}

    def _record_cost_us(self, batch_size=128, calls=2000):
        import recpipe
        from recpipe.decode.provenance import ProvenanceLog

        options = recpipe.LoaderOptions.from_kwargs(batch_size, (3, 32, 32), **LOADER)
        path = os.path.join(str(self.work), "cost.jsonl")
        with recpipe.RecordReader(self.rec) as reader:
            log = ProvenanceLog(path, options, reader)
            rng = np.random.default_rng(0)
            positions = [rng.permutation(len(reader))[:batch_size] for _ in range(16)]
            log.record(0, 0, positions[0], positions[0], 0)  # the loader line
            start = time.perf_counter()
            for i in range(calls):
                log.record(0, i, positions[i % 16], positions[i % 16], 0)
            elapsed = time.perf_counter() - start
            log.close()
        os.remove(path)
        return elapsed / calls * 1e6

    @classmethod
    def tables(cls, result):
        p, o = result["points"][0], result["options"]
        facts = p["facts"]
        rows = [[f"{o['batches']} batches of {o['batch_size']}, {o['size']} px, "
                 f"{o['threads']} thr", fmt(figure(p, "log off", "images_per_s")),
                 fmt(figure(p, "log on", "images_per_s")), fmt_ratio(ratio(p, "on/off"), 3)]]
        sizes = [[s["batch_size"], s["batches"], s["loader_line_bytes"],
                  fmt(s["bytes_per_batch"], 0)] for s in facts.get("sizes", [])]
        return [Table("Loader throughput with the provenance log on and off",
                      ["run", "off img/s", "on img/s", "on/off"], rows,
                      notes=f"One `ProvenanceLog.record` call costs "
                            f"{facts.get('record_call_us', 0):.1f} us (a batch of 128 shuffled "
                            "positions)."),
                Table("The log's size (shuffled batches: positions form no runs, the worst case)",
                      ["batch size", "batches", "loader line bytes", "bytes per batch"], sizes)]
