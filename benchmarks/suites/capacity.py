"""``recpipe plan``'s capacity prediction against measurements at 1 and 2 cores.

Measures the workload once (``measure_workload``: one thread, a sample of the file), predicts
the rate of one process at 1 and 2 cores (``predict``), then runs the loader
(``recpipe.decode.bench.pipeline_rate``, as ``recpipe bench`` does) pinned with
``os.sched_setaffinity`` to 1 core with 1 thread and to 2 cores with 2 threads, alternated,
and reports the prediction error per core count (median measured / predicted - 1). On a
machine whose cores other jobs use, the measurement falls below the prediction by about their
share, so each run also records the share of the pinned cores this process got (its CPU
seconds / (wall seconds x cores)), and the error of the prediction scaled by that share
("contention-adjusted").
"""

import os
import resource
import statistics
import time

from .. import data
from ..format import fmt
from ..harness import Skip, Suite, Table, suite


def _capacity():
    """The capacity model's module (``recpipe.capacity``; ``recpipe.plan`` before it moved)."""
    try:
        from recpipe import capacity
    except ImportError:
        from recpipe import plan as capacity
    return capacity


def pinned_rate(rec, config, cores, allowed, batch_size, seconds):
    """``{images_per_s, core_share}`` of one loader of ``cores`` threads pinned to ``cores`` of
    the allowed cores; ``core_share``: the fraction of those cores' time this process got."""
    from recpipe.decode.bench import pipeline_rate

    os.sched_setaffinity(0, sorted(allowed)[:cores])
    try:
        before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        rate = pipeline_rate(rec, config, cores, batch_size=batch_size,
                             seconds=seconds)["images_per_s"]
        after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - start
    finally:
        os.sched_setaffinity(0, allowed)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"images_per_s": rate, "core_share": min(1.0, cpu / (wall * cores))}


@suite
class Capacity(Suite):
    name = "capacity"
    title = "Capacity planning: recpipe plan's prediction against 1- and 2-core measurements"
    options = {"config": "train", "seconds": 4.0, "batch_size": 32, "images": 256,
               "photos": 1000}
    quick = {"seconds": 0.5, "images": 32, "photos": 200}
    repeats = 3
    warmup = 0
    threads_option = "cores"

    def prepare(self):
        from recpipe.decode.bench import CONFIGS

        o = self.options
        self.allowed = os.sched_getaffinity(0)
        if len(self.allowed) < 2:
            raise Skip("needs at least 2 usable cores")
        self.config = CONFIGS[o["config"]]
        self.rec = data.photos_rec(self.work.parent / "data", o["photos"])
        capacity = _capacity()
        self.workload = capacity.measure_workload(self.rec, self.config, images=o["images"],
                                                  batch_size=o["batch_size"])
        self.predicted = {n: capacity.predict(self.workload, n, 1) for n in (1, 2)}
        described = data.describe_rec(self.rec, "the photos packed pass-through")
        described["description"] += f"; {o['config']} recipe, batch {o['batch_size']}"
        return described

    def contenders(self, point):
        o = self.options
        return {f"{n} core(s)": (lambda n=n: pinned_rate(self.rec, self.config, n, self.allowed,
                                                         o["batch_size"], o["seconds"]))
                for n in (1, 2)}

    def facts(self, point):
        w = self.workload
        return {"workload": {"cpu_ms_per_image": w.cpu_seconds * 1e3,
                             "gil_us_per_image": w.gil_seconds * 1e6,
                             "bytes_per_image": w.bytes_per_image},
                "predicted": {str(n): {"images_per_s": p.images_per_s, "limit": p.limit}
                              for n, p in self.predicted.items()}}

    @classmethod
    def tables(cls, result):
        p = result["points"][0]
        rows = []
        for n in (1, 2):
            name = f"{n} core(s)"
            runs = p["contenders"].get(name, {}).get("runs", [])
            predicted = p["facts"]["predicted"][str(n)]
            if not runs:
                continue
            measured = statistics.median(r["images_per_s"] for r in runs)
            adjusted = statistics.median(
                r["images_per_s"] / (predicted["images_per_s"] * r["core_share"]) - 1
                for r in runs)
            rows.append([n, fmt(predicted["images_per_s"]), predicted["limit"], fmt(measured),
                         f"{measured / predicted['images_per_s'] - 1:+.0%}",
                         ", ".join(f"{r['core_share']:.0%}" for r in runs), f"{adjusted:+.0%}"])
        w = p["facts"]["workload"]
        return [Table("recpipe plan's predicted rate against the measured one",
                      ["cores", "predicted img/s", "limit", "measured img/s", "error",
                       "share of the cores got", "contention-adjusted error"], rows,
                      notes=f"Workload measured on one thread: {w['cpu_ms_per_image']:.2f} CPU "
                            f"ms, {w['gil_us_per_image']:.1f} GIL us, "
                            f"{w['bytes_per_image'] / 1e3:.0f} kB per image.")]
