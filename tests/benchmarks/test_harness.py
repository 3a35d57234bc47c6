"""The benchmark harness itself (benchmarks/harness.py): options and grid, the alternation of
contenders, the figures and ratios it derives, skips, and the result it writes."""

import json
import re

import pytest

from benchmarks import harness
from benchmarks.harness import Ratio, Skip, Suite, grid_points, resolve_options, run_suite
from benchmarks.results import validate


class Recorder(Suite):
    """A suite whose contenders log their calls and report a known rate."""

    name = "recorder-test"
    title = "A test suite"
    grid = {"threads": (1, 2), "size": (10,)}
    options = {"seconds": 3.0, "label": "x", "flag": False}
    quick = {"threads": (1,), "seconds": 0.5}
    repeats = 3
    warmup = 1
    calls = []

    def prepare(self):
        self.calls.append(("prepare",))
        return {"description": "nothing, generated"}

    def contenders(self, point):
        def make(name, rate):
            def run():
                self.calls.append((name, point["threads"]))
                return {"images_per_s": rate * point["threads"], "kind": "text"}
            return run
        return {"a": make("a", 10.0), "b": make("b", 5.0), "c": make("c", 2.5)}

    def ratios(self, point):
        return [Ratio("a over b", "a", "b"), Ratio("b time speedup", "b", "a", "images_per_s",
                                                   invert=True, goal=1.5)]

    def facts(self, point):
        return {"measured once": point["threads"]}

    def close(self):
        self.calls.append(("close",))


@pytest.fixture
def recorder():
    Recorder.calls = []
    return Recorder


def test_options_defaults_quick_and_sets():
    assert resolve_options(Recorder) == {"threads": (1, 2), "size": (10,), "seconds": 3.0,
                                         "label": "x", "flag": False}
    quick = resolve_options(Recorder, quick=True)
    assert quick["threads"] == (1,) and quick["seconds"] == 0.5
    sets = resolve_options(Recorder, sets={"threads": "1,2,4", "seconds": "2", "label": "y",
                                           "flag": "yes", "size": "1_000"})
    assert sets == {"threads": (1, 2, 4), "size": (1000,), "seconds": 2.0, "label": "y",
                    "flag": True}
    with pytest.raises(ValueError, match="no option 'speed'"):
        resolve_options(Recorder, sets={"speed": "1"})
    with pytest.raises(ValueError):
        resolve_options(Recorder, sets={"threads": "two"})


def test_the_grid_is_every_combination():
    options = resolve_options(Recorder, sets={"threads": "1,2", "size": "10,20"})
    assert grid_points(Recorder, options) == [
        {"threads": 1, "size": 10}, {"threads": 1, "size": 20},
        {"threads": 2, "size": 10}, {"threads": 2, "size": 20}]


def test_contenders_alternate_after_an_untimed_warm_up(recorder, tmp_path):
    result = run_suite(recorder, work=tmp_path, say=lambda _: None)
    calls = recorder.calls
    assert calls[0] == ("prepare",) and calls[-1] == ("close",)
    warm, timed = calls[1:7], calls[7:-1]
    assert warm == [("a", 1), ("b", 1), ("c", 1), ("a", 2), ("b", 2), ("c", 2)]
    # each round visits every point; within a point the order rotates round by round
    assert timed == [("a", 1), ("b", 1), ("c", 1), ("a", 2), ("b", 2), ("c", 2),
                     ("b", 1), ("c", 1), ("a", 1), ("b", 2), ("c", 2), ("a", 2),
                     ("c", 1), ("a", 1), ("b", 1), ("c", 2), ("a", 2), ("b", 2)]
    runs = result["points"][0]["contenders"]["a"]["runs"]
    assert [r["round"] for r in runs] == [0, 1, 2]
    assert all(r["wall_s"] >= 0 and "cores_used" in r["cpu"] for r in runs)


def test_figures_and_paired_ratios(recorder, tmp_path):
    result = run_suite(recorder, work=tmp_path, say=lambda _: None)
    two = result["points"][1]
    assert two["params"] == {"threads": 2, "size": 10}
    summary = two["contenders"]["a"]["summary"]
    assert summary["images_per_s"] == {"median": 20.0, "spread": [20.0, 20.0]}
    assert "kind" not in summary and "wall_s" in summary and "cpu.cores_used" in summary
    by_name = {r["name"]: r for r in two["ratios"]}
    assert by_name["a over b"]["median"] == 2.0
    assert by_name["a over b"]["per_round"] == [2.0, 2.0, 2.0]
    assert by_name["b time speedup"]["median"] == 2.0  # a's rate / b's: inverted
    assert by_name["b time speedup"]["goal"] == 1.5
    assert two["facts"] == {"measured once": 2}


def test_a_contender_that_cannot_run_is_skipped_with_its_reason(recorder, tmp_path):
    class Partly(recorder):
        name = "partly-test"

        def contenders(self, point):
            found = super().contenders(point)

            def missing():
                raise Skip("no such peer here")
            found["c"] = missing
            self.skip("d", "not installed")
            return found

    result = run_suite(Partly, work=tmp_path, say=lambda _: None)
    assert result["skipped"] == {"c": "no such peer here", "d": "not installed"}
    assert set(result["points"][0]["contenders"]) == {"a", "b"}
    harness.SUITES.pop("partly-test", None)


def test_the_result_has_the_schema_and_is_written_by_date_and_commit(recorder, tmp_path):
    result = run_suite(recorder, quick=True, sets={"label": "z"}, work=tmp_path,
                       say=lambda _: None, note="reduced")
    validate(result)
    assert result["quick"] is True and result["repeats"] == 1 and result["warmup"] == 1
    assert result["command"] == "python -m benchmarks recorder-test --quick --set label=z"
    assert result["changed"] == {"threads": [1], "seconds": 0.5, "label": "z"}
    assert result["dataset"] == {"description": "nothing, generated"}
    assert result["machine"]["cores"] >= 1 and result["machine"]["cpu_model"]
    assert re.fullmatch(r"[0-9a-f]{4,40}|unknown", result["commit"])
    first = harness.write_result(result, tmp_path / "results")
    second = harness.write_result(result, tmp_path / "results")
    assert first.parent.name == "recorder-test"
    assert first.name == f"{result['date'][:10]}-{result['commit']}.json"
    assert second.name == f"{result['date'][:10]}-{result['commit']}-2.json"
    assert json.loads(first.read_text())["points"] == json.loads(
        json.dumps(result["points"]))
    assert not list(first.parent.glob("*.tmp"))


def test_a_broken_result_is_refused():
    with pytest.raises(ValueError, match="no 'points'"):
        validate({"schema": 1})


def test_the_harness_and_recpipe_bench_share_one_timing_core():
    from recpipe.decode import bench, cpu_meter, timing

    assert harness.rotated is timing.rotated is bench.rotated
    assert harness.median_spread is timing.median_spread is bench.median_spread
    assert harness.machine_record is timing.machine_record is bench.machine_record
    assert harness.CpuMeter is cpu_meter.CpuMeter is bench.CpuMeter


def test_the_decode_suite_times_what_recpipe_bench_times(monkeypatch, tmp_path):
    """Its contenders are recpipe bench's own functions (replaced here by recorders)."""
    from recpipe.decode import bench
    from benchmarks.suites import load

    calls = []
    monkeypatch.setattr(bench, "bare_decode", lambda images, threads, **kw: calls.append(
        ("bare", threads)) or {"images_per_s": 100.0})
    monkeypatch.setattr(bench, "pipeline_rate", lambda rec, config, threads, **kw: calls.append(
        ("pipeline", config.get("data_shape"), threads, kw["dtype"])) or
        {"images_per_s": 150.0, "stage_ms_per_image": {"decode": 1.0}, "trace": None})
    decode = load("decode")
    suite = decode({**harness.resolve_options(decode, quick=True), "configs": "train",
                    "recipes": "faces"}, tmp_path, say=lambda _: None)
    suite.images, suite.recs = [b""], {"photos": "p.rec", "faces": "f.rec"}
    runs = {name: run() for name, run in suite.contenders({"threads": 1}).items()}
    assert calls == [("bare", 1), ("pipeline", (3, 224, 224), 1, "uint8"),
                     ("pipeline", (3, 112, 112), 1, "float32")]
    assert runs["train pipeline"]["stage_ms.decode"] == 1.0
