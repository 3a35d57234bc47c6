"""The timing rules ``recpipe bench`` and the benchmark suites share (recpipe/decode/timing.py)."""

from recpipe.decode import bench
from recpipe.decode.cpu_meter import CpuShare
from recpipe.decode.timing import (cpu_model, machine_record, median_spread, paired_ratios,
                                   rotated)


def test_rounds_rotate_so_every_job_leads_once():
    jobs = ["bare", "train", "val"]
    orders = [rotated(jobs, r) for r in range(4)]
    assert orders == [["bare", "train", "val"], ["train", "val", "bare"],
                      ["val", "bare", "train"], ["bare", "train", "val"]]
    assert rotated([], 3) == []


def test_median_spread_ignores_missing_runs():
    assert median_spread([3.0, None, 1.0, 2.0]) == {"median": 2.0, "spread": [1.0, 3.0],
                                                    "runs": [3.0, 1.0, 2.0]}
    assert median_spread([None]) == {"median": None, "spread": None, "runs": []}


def test_ratios_pair_runs_of_the_same_round():
    assert paired_ratios([2.0, 4.0, None, 9.0], [1.0, 2.0, 5.0, 0.0]) == [2.0, 2.0]


def _share(load, pressure=None, queue=None, cpu=1.0):
    return CpuShare(wall_seconds=1.0, cpu_seconds=cpu, run_queue_share=queue,
                    load_average=load, cpu_pressure=pressure, cores=2)


def test_machine_record_spans_the_runs_and_says_when_busy():
    quiet = machine_record([_share(0.5), _share(1.5)], threads=2, cores=2, cores_source="affinity")
    assert quiet == {"cores": 2, "cores_source": "affinity", "load_average": [0.5, 1.5],
                     "cpu_pressure": None, "busy": None}
    busy = machine_record([_share(9.0, pressure=80.0)], threads=2, cores=2, cores_source="x")
    assert "busy" in busy["busy"] and busy["cpu_pressure"] == [80.0, 80.0]


def test_cpu_share_round_trips_through_its_record():
    share = _share(1.0, queue=0.25, cpu=1.5)
    record = share.to_dict()
    assert record["cores_used"] == 1.5
    assert CpuShare.from_dict(record) == share


def test_bench_summaries_use_the_same_rule():
    runs = [{"threads": 2, "images_per_s": rate, "cpu_ms_per_image": 1.0,
             "cpu": _share(1.0).to_dict()} for rate in (30.0, 10.0, 20.0)]
    summary = bench.summarize(runs)
    expected = median_spread([30.0, 10.0, 20.0])
    assert summary["images_per_s"] == expected["median"] == 20.0
    assert summary["images_per_s_spread"] == expected["spread"]
    assert summary["images_per_s_runs"] == expected["runs"]


def test_cpu_model_names_something():
    assert isinstance(cpu_model(), str) and cpu_model()
