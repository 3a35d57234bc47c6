import json
import math
import random

import cv2
import numpy as np
import pytest

import recpipe
from recpipe.cli import main
from recpipe.decode.tune.controller import (
    CPU_SATURATED,
    NOT_STARVED,
    RAM_BUDGET,
    SERIAL_OR_IO_BOUND,
    Controller,
    Decision,
    MemoryModel,
    WindowMetrics,
)
from recpipe.decode.loader import ImageLoader
from recpipe.io import IRHeader, pack

# -- a scripted plant: the metrics a window at (threads, prefetch) would show -----------------


class Plant:
    """A decode pipeline in steady state. ``cpu``: CPU-s per batch; ``demand``: batches/s the
    consumer can take; ``serial``: batches/s a GIL-holding stage allows; ``io_wall``: extra
    non-CPU seconds per batch per thread (storage); ``noise``: relative throughput jitter."""

    def __init__(self, cores, cpu, demand, serial=math.inf, io_wall=0.0, noise=0.0, seed=0,
                 images_per_batch=128, depth_loss=0.0, reports_gil=False):
        self.cores, self.cpu, self.demand = cores, cpu, demand
        self.reports_gil = reports_gil  # windows carry the GIL-held seconds per batch
        self.serial, self.io_wall, self.noise = serial, io_wall, noise
        self.images_per_batch = images_per_batch
        self.depth_loss = depth_loss
        self.rng = random.Random(seed)

    def capacity(self, threads, prefetch=2):
        """Batches/s the workers can supply."""
        cpu_bound = min(threads, self.cores) / self.cpu
        wall_bound = threads / (self.cpu + self.io_wall)
        supply = min(cpu_bound, wall_bound, self.serial)
        return supply * (1 - self.depth_loss / prefetch)

    def window(self, threads, prefetch=2):
        jitter = 1 + self.rng.gauss(0, self.noise) if self.noise else 1
        rate = min(self.demand, self.capacity(threads, prefetch) * jitter)
        wait = max(0.0, 1 - rate / self.demand)
        cpu_used = rate * self.cpu
        busy = min(1.0, rate * (self.cpu + self.io_wall) / threads)
        if rate >= self.serial * 0.99:  # threads queue for the GIL: busy, but not running
            busy = 1.0
        return WindowMetrics(
            batches=64, seconds=64 / rate, wait_fraction=wait,
            images_per_s=rate * self.images_per_batch, rate_rse=max(self.noise, 0.005),
            demand=self.demand, cpu_per_batch=self.cpu, busy_fraction=busy,
            cpu_util=min(1.0, cpu_used / self.cores), images_per_batch=self.images_per_batch,
            gil_per_batch=1 / self.serial if self.reports_gil and self.serial < math.inf else 0.0)


def drive(controller, plant, windows):
    """Feed ``windows`` windows measured at the controller's current setting."""
    decisions = []
    for _ in range(windows):
        decisions.append(controller.update(plant.window(controller.threads, controller.prefetch)))
    return decisions


def best_threads(plant, candidates):
    """The smallest thread count within 5% of the best steady throughput."""
    rates = {n: min(plant.demand, plant.capacity(n)) for n in candidates}
    best = max(rates.values())
    return min(n for n, r in rates.items() if r >= 0.95 * best)


# -- controller, scripted ---------------------------------------------------------------------


def test_consumer_bound_drops_to_one_thread_and_stops_starving():
    plant = Plant(cores=2, cpu=0.1, demand=4.0)  # c*D = 0.4 core
    controller = Controller(2)
    assert controller.threads == 2
    decisions = drive(controller, plant, 30)
    assert decisions[0].action == "jump" and decisions[0].threads == 1
    assert controller.threads == 1
    assert controller.reason == NOT_STARVED
    assert max(d.threads for d in decisions) <= 3
    assert plant.window(controller.threads).wait_fraction <= 0.05


def test_needs_more_threads_jumps_then_holds_without_overprovisioning():
    plant = Plant(cores=16, cpu=1.0, demand=5.0)  # needs 5 of 16 cores
    controller = Controller(16)
    decisions = drive(controller, plant, 40)
    assert decisions[0].action == "jump"
    assert decisions[1].action == "keep jump"
    n95 = best_threads(plant, range(1, 17))
    assert n95 <= controller.threads <= n95 + 1
    assert controller.reason == NOT_STARVED
    assert controller.settled_window <= 10
    assert plant.window(controller.threads).wait_fraction <= 0.05


def test_the_gil_held_share_caps_the_model_jump():
    """16 cores and a demand of 20 cores' work, but a quarter of each batch's CPU holds the
    GIL: past ~4 threads the others only queue for it, so the jump stops there and the
    tuner reports the serial limit with its images/s ceiling."""
    plant = Plant(cores=16, cpu=1.0, demand=20.0, serial=4.0, reports_gil=True)
    controller = Controller(16)
    decisions = drive(controller, plant, 60)
    assert decisions[0].action == "jump" and decisions[0].threads == math.ceil(1.15 * 4)
    blind = Controller(16)
    assert drive(blind, Plant(cores=16, cpu=1.0, demand=20.0, serial=4.0), 1)[0].threads == 16
    assert controller.threads <= 6
    assert controller.reason == SERIAL_OR_IO_BOUND
    assert any("GIL-held Python: 1953 us an image" in w for w in controller.report()["warnings"])


def test_hill_climbs_when_the_model_underestimates_io_bound_work():
    # the CPU cost says one thread is enough, but each batch also waits on storage
    plant = Plant(cores=16, cpu=0.05, demand=20.0, io_wall=0.25)  # needs 6 threads
    controller = Controller(16, max_threads=16)
    decisions = drive(controller, plant, 30)
    kept = [d for d in decisions if d.action == "keep threads"]
    assert len(kept) >= 2  # climbed step by step, each step kept on a real gain
    assert all(d.gain >= 0.03 for d in kept)
    assert controller.threads >= best_threads(plant, range(1, 17))
    assert plant.window(controller.threads).wait_fraction <= 0.05
    assert controller.settled_window <= 10


def test_cpu_saturated_rolls_back_and_backs_off():
    plant = Plant(cores=2, cpu=0.5, demand=math.inf)  # would need every core and more
    controller = Controller(2)
    decisions = drive(controller, plant, 60)
    probe = next(i for i, d in enumerate(decisions) if d.action == "probe +1")
    assert decisions[probe].threads == 3
    assert decisions[probe + 1].action == "rollback threads"
    assert controller.threads == 2
    assert controller.reason == CPU_SATURATED
    changes_after = [d for d in decisions[probe + 2:] if d.changed]
    assert len(changes_after) <= 2  # back-off: at most one re-probe and its rollback
    assert max(d.threads for d in decisions) <= 3
    report = controller.report()
    assert report["x_max_images_per_s"] == pytest.approx(2 / (0.5 / 128))


def test_contention_shown_by_rising_cpu_cost_counts_as_saturation():
    controller = Controller(4, threads=2)
    controller._jumped = True  # skip the model step: test the probe verdict alone
    base = WindowMetrics(batches=64, seconds=8, wait_fraction=0.3, images_per_s=1000,
                         rate_rse=0.01, cpu_per_batch=0.1, cpu_util=0.5, images_per_batch=128)
    assert controller.update(base).action == "probe +1"
    hotter = WindowMetrics(batches=64, seconds=8, wait_fraction=0.3, images_per_s=990,
                           rate_rse=0.01, cpu_per_batch=0.13, cpu_util=0.6,
                           images_per_batch=128)
    decision = controller.update(hotter)
    assert decision.action == "rollback threads" and decision.threads == 2
    assert controller.reason == CPU_SATURATED


def test_threads_queueing_for_a_cpu_count_as_saturation():
    # other processes hold the cores: this process uses little CPU, but its threads wait for one
    controller = Controller(4, threads=2)
    controller._jumped = True
    common = dict(batches=64, seconds=8, wait_fraction=0.3, rate_rse=0.01, cpu_per_batch=0.1,
                  cpu_util=0.3, images_per_batch=128)
    controller.update(WindowMetrics(images_per_s=1000, runq_share=0.5, **common))
    decision = controller.update(WindowMetrics(images_per_s=990, runq_share=0.6, **common))
    assert decision.action == "rollback threads"
    assert controller.reason == CPU_SATURATED
    quiet = Controller(4, threads=2)
    quiet._jumped = True
    quiet.update(WindowMetrics(images_per_s=1000, runq_share=0.02, **common))
    quiet.update(WindowMetrics(images_per_s=990, runq_share=0.03, **common))
    assert quiet.reason == SERIAL_OR_IO_BOUND


def test_serial_stage_holding_the_gil_stops_at_two_threads():
    # a GIL-holding stage caps supply at 3 batches/s whatever the threads; CPU stays low
    plant = Plant(cores=8, cpu=0.2, demand=10.0, serial=3.0)
    controller = Controller(8)
    decisions = drive(controller, plant, 40)
    assert controller.threads <= 2
    assert controller.reason == SERIAL_OR_IO_BOUND
    assert max(d.threads for d in decisions) <= 3
    assert any("serial" in w for w in controller.report()["warnings"])


def test_workload_change_reconverges():
    plant = Plant(cores=8, cpu=0.25, demand=3.0)  # needs ~0.75 core
    controller = Controller(8)
    drive(controller, plant, 20)
    assert controller.threads == 1
    plant.demand = 20.0  # a faster model: now needs ~5 cores
    decisions = drive(controller, plant, 10)
    target = best_threads(plant, range(1, 9))
    assert target - 1 <= controller.threads <= target + 1
    assert plant.window(controller.threads).wait_fraction <= 0.05
    assert max(d.threads for d in decisions) <= target + 2


def test_workload_change_ends_a_back_off_early():
    plant = Plant(cores=8, cpu=0.2, demand=10.0, serial=3.0)
    controller = Controller(8)
    drive(controller, plant, 6)
    assert controller.reason == SERIAL_OR_IO_BOUND and controller._hold_up > 3
    plant.serial = math.inf  # the serial stage went away and decode got dearer
    plant.cpu = 0.5
    decisions = drive(controller, plant, 6)
    assert any(d.action in ("jump", "probe +1") for d in decisions)
    assert controller.threads > 2


def test_a_small_or_noisy_gain_is_not_kept():
    controller = Controller(8, threads=4)
    controller._jumped = True
    common = dict(batches=64, seconds=8, wait_fraction=0.2, cpu_per_batch=0.1, cpu_util=0.4,
                  images_per_batch=128)
    assert controller.update(WindowMetrics(images_per_s=1000, rate_rse=0.04, **common)).action \
        == "probe +1"
    # +6%: above the 3% floor but inside two standard errors: extend, then give up
    first = controller.update(WindowMetrics(images_per_s=1060, rate_rse=0.04, **common))
    assert first.action == "extend" and not first.changed
    second = controller.update(WindowMetrics(images_per_s=1050, rate_rse=0.04, **common))
    assert second.action == "extend"
    third = controller.update(WindowMetrics(images_per_s=1055, rate_rse=0.04, **common))
    assert third.action == "rollback threads" and third.threads == 4


def test_noisy_plant_stays_near_the_optimum():
    plant = Plant(cores=4, cpu=0.4, demand=6.0, noise=0.08, seed=3)  # needs 2.4 cores
    controller = Controller(4)
    decisions = drive(controller, plant, 100)
    target = best_threads(plant, range(1, 6))
    assert target <= controller.threads <= target + 1
    tail = decisions[20:]
    assert sum(d.changed for d in tail) <= 10
    assert all(d.threads <= target + 2 for d in tail)


def test_scale_down_when_threads_idle():
    plant = Plant(cores=8, cpu=0.1, demand=10.0)  # needs ~1 core
    controller = Controller(8, threads=6)
    controller._jumped = True  # as if a past workload had needed 6
    decisions = drive(controller, plant, 40)
    assert any(d.action == "probe -1" for d in decisions)
    assert controller.threads <= 2
    assert controller.reason == NOT_STARVED


def test_ram_budget_stops_growth():
    plant = Plant(cores=8, cpu=1.0, demand=8.0, io_wall=0.0)
    memory = MemoryModel(batch_bytes=100, thread_bytes=10, budget_bytes=3 * 100 + 3 * 10)
    controller = Controller(8, memory=memory)
    drive(controller, plant, 20)
    assert controller.threads <= 3
    assert memory.fits(controller.threads, controller.prefetch)
    assert controller.reason == RAM_BUDGET


def test_prefetch_depth_grows_when_threads_cannot_help_and_workers_idle():
    controller = Controller(2, threads=2, max_threads=2)
    controller._jumped = True
    idle = dict(batches=64, seconds=8, wait_fraction=0.2, rate_rse=0.01, cpu_per_batch=0.1,
                cpu_util=0.6, busy_fraction=0.6, images_per_batch=128)
    decision = controller.update(WindowMetrics(images_per_s=1000, **idle))
    assert decision.action == "probe prefetch" and decision.prefetch == 4
    assert decision.threads == 2
    kept = controller.update(WindowMetrics(images_per_s=1200, **idle))
    assert kept.action == "keep prefetch" and controller.prefetch == 4


def test_report_and_decisions_describe_themselves():
    plant = Plant(cores=2, cpu=0.5, demand=math.inf)
    controller = Controller(2)
    decisions = drive(controller, plant, 5)
    report = controller.report()
    assert {"threads", "prefetch", "reason", "wait_fraction", "history"} <= set(report)
    assert report["threads"] == controller.threads
    assert len(report["history"]) == 5
    assert report["wait_fraction"]["before"] == decisions[0].wait_fraction
    json.dumps(report)  # plain data
    line = decisions[1].describe()
    assert f"threads={decisions[1].threads}" in line and decisions[1].reason in line


def test_min_equals_max_only_measures():
    plant = Plant(cores=2, cpu=0.5, demand=math.inf)
    controller = Controller(2, threads=2, min_threads=2, max_threads=2, max_prefetch=2)
    decisions = drive(controller, plant, 20)
    assert not any(d.changed for d in decisions)


# -- the loader wiring (no timing assertions) -------------------------------------------------

N_IMAGES = 24


@pytest.fixture
def rec(tmp_path):
    url = str(tmp_path / "auto.rec")
    rng = np.random.default_rng(0)
    with recpipe.RecordWriter(url) as writer:
        for i in range(N_IMAGES):
            img = rng.integers(0, 255, (40, 56, 3), dtype=np.uint8)
            ok, buf = cv2.imencode(".jpg", img)
            assert ok
            writer.write(pack(IRHeader(0, float(i), i, 0), buf.tobytes()))
    return url


FAST_WINDOWS = dict(window_batches=2, window_seconds=0.0, warmup_batches=1, warmup_seconds=0.0,
                    settle_seconds=0.0)


def _labels(loader, epochs):
    return [np.concatenate([labels for _, labels in loader]) for _ in range(epochs)]


def test_auto_threads_builds_a_tuned_loader(rec):
    with ImageLoader(rec, 4, (3, 32, 32), threads="auto") as loader:
        assert loader.autotuner is not None
        assert 1 <= loader.threads <= 2
        labels = _labels(loader, 1)
        report = loader.autotune_report()
    assert sorted(labels[0]) == list(range(N_IMAGES))
    assert report["threads"] == loader.autotuner.controller.threads
    assert report["reason"] and isinstance(report["history"], list)


def test_fixed_threads_have_no_report(rec):
    with ImageLoader(rec, 4, (3, 32, 32), threads=1) as loader:
        assert loader.autotune_report() is None


def test_tuner_measures_windows_and_the_batches_stay_right(rec):
    with ImageLoader(rec, 4, (3, 32, 32), threads=1, shuffle=True, seed=3) as fixed:
        expected = _labels(fixed, 3)
    with ImageLoader(rec, 4, (3, 32, 32), threads=1, shuffle=True, seed=3) as loader:
        tuner = loader.enable_autotune(**FAST_WINDOWS)
        seen = []
        tuner.add_listener(seen.append)
        got = _labels(loader, 3)
        report = loader.autotune_report()
        assert report["threads"] == loader.threads
        assert report["prefetch"] == loader.prefetch
        assert loader.stats()["cpu_seconds"] > 0
    assert [list(a) for a in got] == [list(a) for a in expected]
    assert seen and all(isinstance(d, Decision) for d in seen)
    assert len(report["history"]) == len(seen)
    for entry in report["history"]:
        assert 1 <= entry["threads"] <= report["max_threads"]
        assert 0.0 <= entry["wait_fraction"] <= 1.0
        assert entry["images_per_s"] > 0


class ScriptedController:
    """Stands in for the controller: records the windows, answers with a scripted setting."""

    def __init__(self):
        self.threads, self.prefetch = 1, 2
        self.windows = []

    def update(self, metrics):
        self.windows.append(metrics)
        self.threads, self.prefetch = 3, 5
        return Decision(window=len(self.windows), threads=3, prefetch=5, action="test",
                        reason=NOT_STARVED, changed=len(self.windows) == 1,
                        wait_fraction=metrics.wait_fraction, images_per_s=metrics.images_per_s)


def test_decisions_are_applied_to_the_loader(rec):
    controller = ScriptedController()
    with ImageLoader(rec, 4, (3, 32, 32), threads=1) as loader:
        loader.enable_autotune(controller=controller, **FAST_WINDOWS)
        _labels(loader, 2)
        assert loader.threads == 3
        assert loader.prefetch == 5
    first = controller.windows[0]
    assert first.batches >= 2
    assert 0.0 <= first.wait_fraction <= 1.0
    assert first.images_per_batch == 4
    assert first.cpu_per_batch > 0
    assert 0.0 <= first.busy_fraction


def test_cli_tune_json(rec, capsys):
    status = main(["tune", rec, "--step-ms", "1", "--seconds", "0.5", "--batch-size", "4",
                   "--config", "val", "--window-batches", "2", "--window-seconds", "0",
                   "--json"])
    assert status == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert {"threads", "reason", "wait_fraction", "history"} <= set(report)
    assert report["images_per_s_overall"] > 0
    assert report["step_ms"] == 1
    assert "tuning" in captured.err


def test_cli_tune_table(rec, capsys):
    assert main(["tune", rec, "--step-ms", "0", "--seconds", "0.3", "--batch-size", "4",
                 "--config", "val"]) == 0
    out = capsys.readouterr().out
    assert "threads" in out and "consumer wait" in out


# -- the window measurements, on a scripted clock ---------------------------------------------


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class FakeLoader:
    """A ``tuning_window.Tunable`` with scripted worker counters."""

    batch_bytes = 4 * (3 * 8 * 8 + 4)

    def __init__(self):
        self.threads = 2
        self.prefetch = 2
        self.observers = []
        self.cpu_seconds = 0.0
        self.busy = 0.0

    def set_threads(self, n):
        self.threads = n

    def add_observer(self, fn):
        self.observers.append(fn)

    def stats(self):
        return {"cpu_seconds": self.cpu_seconds, "gil_seconds": self.cpu_seconds / 4,
                "stage_seconds": {"read": 0.0, "decode": self.busy, "augment": 0.0}}


def test_windows_skip_warmup_drop_long_pauses_and_measure(monkeypatch):
    from recpipe.decode import tuning_window

    clock = FakeClock()
    monkeypatch.setattr(tuning_window.time, "perf_counter", clock)
    loader = FakeLoader()
    controller = ScriptedController()
    controller.threads, controller.prefetch = 2, 2
    options = tuning_window.TunerOptions(window_batches=4, window_seconds=1.0, warmup_batches=3,
                                         warmup_seconds=0.0, settle_seconds=0.0)
    tuning_window.AutoTuner(loader, options, controller=controller)
    observe = loader.observers[0]

    def deliver(interval, waited, images=4):
        clock.now += interval
        loader.cpu_seconds += 0.1
        loader.busy += 0.15
        observe(images, waited)

    for _ in range(4):  # the first has no interval, then three warm-up batches
        deliver(0.5, 0.4)
    assert controller.windows == []
    deliver(0.5, 0.1)
    deliver(tuning_window.GAP_LIMIT + 1, 0.0)  # an evaluation pause: the window is dropped
    deliver(0.5, 0.0)  # reopens the window (nothing to count yet)
    # the measured window: intervals 0.5, 0.3, 0.4, 0.4 s with waits 0.1, 0.0, 0.2, 0.1 s
    for interval, waited in ((0.5, 0.1), (0.3, 0.0), (0.4, 0.2), (0.4, 0.1)):
        deliver(interval, waited)
    assert len(controller.windows) == 1
    m = controller.windows[0]
    assert m.batches == 4
    assert m.seconds == pytest.approx(1.6)
    assert m.wait_fraction == pytest.approx(0.4 / 1.6)
    assert m.images_per_s == pytest.approx(16 / 1.6)
    assert m.demand == pytest.approx(1 / 0.3)  # median compute of 0.4, 0.3, 0.2, 0.3
    assert m.cpu_per_batch == pytest.approx(0.1)
    assert m.gil_per_batch == pytest.approx(0.025)
    assert m.busy_fraction == pytest.approx(0.6 / (2 * 1.6))
    assert loader.threads == 3 and loader.prefetch == 5  # the scripted decision was applied


@pytest.mark.parametrize("keywords,match", [
    (dict(window_batches=0), "window_batches=0"),
    (dict(window_seconds=-1), "window_seconds=-1"),
    (dict(min_threads=0), "min_threads=0"),
    (dict(min_threads=4, max_threads=2), "below min_threads=4"),
    (dict(max_prefetch=0), "max_prefetch=0"),
    (dict(threads=1.5), "threads=1.5"),
    (dict(ram_budget=0), "ram_budget=0"),
    (dict(settings={"z": 3}), "settings="),
])
def test_tuner_options_are_checked_when_made(keywords, match):
    from recpipe.decode.tune.tuner import TunerOptions

    with pytest.raises(ValueError, match=match):
        TunerOptions(**keywords)


def test_tuner_options_are_frozen_and_a_misspelt_one_says_what_was_meant(rec):
    import dataclasses

    from recpipe.decode.tune.tuner import TunerOptions

    options = TunerOptions.of(None, dict(window_batches=3))
    assert options.window_batches == 3 and options.window_seconds == 1.5
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.window_batches = 4
    assert TunerOptions.of(options, dict(max_threads=2)).max_threads == 2
    with ImageLoader(rec, 4, (3, 32, 32), threads=1) as loader:
        with pytest.raises(TypeError, match="did you mean 'window_batches'"):
            loader.enable_autotune(window_batch=2)
        tuner = loader.enable_autotune(options, max_threads=1)
        assert tuner.options == TunerOptions(window_batches=3, max_threads=1)
        assert tuner.controller.max_threads == 1
