"""``threads="auto"`` against a fixed-thread sweep, with a sleeping consumer.

The consumer sleeps ``T`` seconds per batch (a simulated accelerator: sleeping releases the GIL
as a CUDA sync does). ``T`` comes from a calibration run (``c``: decode-thread CPU seconds per
batch, from the loader's own CPU counter, which other processes' load does not inflate) so that
each scenario asks for a given number of cores (docs: autotuning):

- ``s1`` consumer-bound: ``T = 2 * c`` (needs ~0.5 core)
- ``s2`` needs ~1.6 cores: ``T = c / 1.6``
- ``s3`` CPU-saturated: ``T = c / 4``
- ``s4`` workload change: ``s1`` for the first half of the run, then ``s2``

At every scenario the fixed settings and auto alternate; the medians are compared. Targets:
auto >= 0.95x the best fixed setting; settled within 10 decision windows; final threads <= n95 + 1
(n95: the fewest fixed threads within 95% of the best). ``overhead``: fixed 2 threads with no
consumer delay, with and without the autotuner measuring (frozen at 2 threads), and the cost of
``time.thread_time()`` (called twice per decoded sample).
"""

import statistics
import time

from .. import data
from ..format import figure, fmt, fmt_ratio, ratio
from ..harness import Ratio, Suite, Table, suite

BATCH = 128
RATIOS = {"s1": 0.5, "s2": 1.6, "s3": 4.0}


def make_loader(rec, threads, tuner_options=None):
    import recpipe
    from recpipe.decode.bench import TRAIN

    settings = dict(TRAIN)
    shape = settings.pop("data_shape")
    loader = recpipe.ImageLoader(rec, BATCH, shape, threads=1 if threads == "auto" else threads,
                                 shuffle=True, **settings)
    if threads == "auto" or tuner_options:
        loader.enable_autotune(**(tuner_options or {}))
    return loader


def consume(loader, steps, seconds):
    """Take batches for ``seconds``; ``steps(elapsed)`` is the sleep per batch. Returns images/s
    over the whole run and over its last half (the steady state)."""
    start = time.perf_counter()
    images, half_images, half_start = 0, 0, None
    while True:
        for batch, _ in loader:
            elapsed = time.perf_counter() - start
            step = steps(elapsed)
            if step:
                time.sleep(step)
            images += len(batch)
            elapsed = time.perf_counter() - start
            if elapsed >= seconds / 2:
                if half_start is None:
                    half_start = time.perf_counter()
                else:
                    half_images += len(batch)
            if elapsed >= seconds:
                end = time.perf_counter()
                return images / (end - start), half_images / max(end - half_start, 1e-9)


def calibrate(rec, seconds):
    """``(cpu, wall)``: decode CPU seconds per batch, and wall seconds per batch of one thread
    with an instant consumer."""
    with make_loader(rec, 1) as loader:
        before = loader.stats()
        rate, _ = consume(loader, lambda _: 0.0, seconds)
        after = loader.stats()
    cpu = (after["cpu_seconds"] - before["cpu_seconds"]) / (after["samples"] - before["samples"])
    return cpu * BATCH, BATCH / rate


def _windows_to_settle_after(decisions, change_time):
    """Windows from the workload change to the last kept thread change after it."""
    after = [d for t, d in decisions if t >= change_time]
    settled = 0
    for i, d in enumerate(after, 1):
        if d.action in ("keep threads", "keep jump"):
            settled = i
    return settled


def run_one(rec, threads, steps, seconds):
    decisions = []
    with make_loader(rec, threads) as loader:
        started = time.perf_counter()
        if loader.autotuner is not None:
            loader.autotuner.add_listener(
                lambda d: decisions.append((time.perf_counter() - started, d)))
        rate, steady = consume(loader, steps, seconds)
        report = loader.autotune_report()
    result = {"images_per_s": rate, "steady_images_per_s": steady}
    if report is not None:
        result.update(final_threads=report["threads"], prefetch=report["prefetch"],
                      reason=report["reason"], windows=report["windows"],
                      settled_window=report["settled_window"],
                      max_threads_seen=max([d.threads for _, d in decisions] or [0]),
                      wait_before=report["wait_fraction"]["before"],
                      wait_after=report["wait_fraction"]["after"],
                      decisions=[(round(t, 2), d.describe()) for t, d in decisions
                                 if d.action not in ("stay", "hold")],
                      windows_after_change=_windows_to_settle_after(decisions, seconds / 2))
    return result


def scenario_steps(name, cpu, seconds):
    if name == "s4":
        first, second = 2 * cpu, cpu / 1.6
        return lambda elapsed: first if elapsed < seconds / 2 else second
    step = cpu / RATIOS[name]
    return lambda elapsed: step


@suite
class Autotune(Suite):
    name = "autotune"
    title = "Autotuning: threads='auto' against every fixed thread count"
    grid = {"scenario": ("s1", "s2", "s3", "s4", "overhead")}
    options = {"seconds": 20.0, "fixed": "1,2,3,4", "overhead_seconds": 6.0,
               "calibration_seconds": 4.0, "photos": 1000}
    quick = {"scenario": ("s1", "overhead"), "seconds": 1.5, "fixed": "1,2",
             "overhead_seconds": 0.5, "calibration_seconds": 0.5, "photos": 200}
    repeats = 3
    warmup = 0

    def prepare(self):
        self.rec = data.photos_rec(self.work.parent / "data", self.options["photos"])
        self.cpu, self.wall1 = calibrate(self.rec, self.options["calibration_seconds"])
        described = data.describe_rec(self.rec, "the photos packed pass-through")
        described["description"] += (f"; train recipe, batch {BATCH}; calibration: "
                                     f"{self.cpu * 1e3:.0f} CPU-ms a batch, one thread "
                                     f"{self.wall1 * 1e3:.0f} ms a batch")
        described.update(cpu_seconds_per_batch=self.cpu,
                         one_thread_wall_seconds_per_batch=self.wall1)
        return described

    def _fixed(self):
        return [int(t) for t in self.options["fixed"].split(",") if t]

    def contenders(self, point):
        name, o = point["scenario"], self.options
        if name == "overhead":
            frozen = dict(threads=2, min_threads=2, max_threads=2, max_prefetch=2)

            def run(options):
                with make_loader(self.rec, 2, options) as loader:
                    return {"images_per_s": consume(loader, lambda _: 0.0,
                                                    o["overhead_seconds"])[0]}
            return {"plain": lambda: run(None), "measured": lambda: run(frozen)}
        seconds = o["seconds"] * (1.5 if name == "s4" else 1)
        steps = scenario_steps(name, self.cpu, seconds)
        found = {f"fixed {n}": (lambda n=n: run_one(self.rec, n, steps, seconds))
                 for n in self._fixed()}
        found["auto"] = lambda: run_one(self.rec, "auto", steps, seconds)
        return found

    def ratios(self, point):
        if point["scenario"] == "overhead":
            return [Ratio("measured/plain", "measured", "plain")]
        return [Ratio(f"auto vs fixed {n}", "auto", f"fixed {n}") for n in self._fixed()]

    def facts(self, point):
        if point["scenario"] != "overhead":
            return {}
        calls = 200_000
        t0 = time.perf_counter()
        for _ in range(calls):
            time.thread_time()
        return {"thread_time_call_us": (time.perf_counter() - t0) / calls * 1e6}

    @classmethod
    def tables(cls, result):
        fixed = [int(t) for t in result["options"]["fixed"].split(",") if t]
        rows, notes = [], ""
        for p in result["points"]:
            name = p["params"]["scenario"]
            if name == "overhead":
                plain = figure(p, "plain", "images_per_s")
                call = p["facts"].get("thread_time_call_us")
                share = 2 * call / (2 / plain * 1e6) if plain and call else None
                notes = (f"Overhead (2 fixed threads, no consumer delay): measured/plain = "
                         f"{fmt_ratio(ratio(p, 'measured/plain'), 3)}; `time.thread_time()` "
                         f"costs {call:.2f} us a call"
                         + (f" = {share:.2%} of a sample." if share is not None else "."))
                continue
            medians = {n: figure(p, f"fixed {n}", "images_per_s") for n in fixed}
            medians = {n: v for n, v in medians.items() if v is not None}
            auto = figure(p, "auto", "images_per_s")
            if not medians or auto is None:
                continue
            best = max(medians, key=medians.get)
            n95 = min(n for n, v in medians.items() if v >= 0.95 * medians[best])
            runs = p["contenders"]["auto"]["runs"]
            finals = [r.get("final_threads") for r in runs]
            settled = [r.get("settled_window") for r in runs]
            if name == "s4":
                settled = [f"{s} (after the change: {r.get('windows_after_change')})"
                           for s, r in zip(settled, runs)]
            final = statistics.median([f for f in finals if f is not None] or [0])
            ok = (auto >= 0.95 * medians[best] and final <= n95 + 1)
            rows.append([name] + [fmt(medians.get(n), 0) for n in fixed]
                        + [fmt(auto, 0), f"{auto / medians[best]:.2f}x", n95,
                           ", ".join(map(str, finals)),
                           ", ".join(sorted({str(r.get('reason')) for r in runs})),
                           ", ".join(map(str, settled)), "yes" if ok else "no"])
        return [Table("threads='auto' against fixed thread counts (images/s, medians)",
                      ["scenario"] + [f"fixed {n}" for n in fixed]
                      + ["auto", "auto/best", "n95", "auto's final threads", "reasons",
                         "settled at window", "within targets"], rows,
                      notes=notes + f" Scenarios: s1 consumer-bound, s2 needs ~1.6 cores, s3 "
                                    f"CPU-saturated, s4 s1 then s2; "
                                    f"{result['options']['seconds']:g} s a run (s4 1.5x).")]
