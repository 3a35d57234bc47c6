"""``recpipe plan``: the model's arithmetic on given inputs, and the command end to end."""

import json
import time
import math

import pytest

from recpipe.cli import main
from recpipe.capacity import Workload, advise_cores, measure_workload, predict

from ._photos import pack_training_set


def test_cpu_bound_rate_grows_with_cores():
    w = Workload(cpu_seconds=0.004, gil_seconds=0.0001, bytes_per_image=100e3)
    assert predict(w, 1).images_per_s == pytest.approx(250)
    assert predict(w, 8, ranks=2).images_per_s == pytest.approx(2000)
    assert predict(w, 8, ranks=2).threads_per_rank == 4 and predict(w, 8, 2).limit == "cpu"


def test_gil_caps_each_rank_and_storage_caps_the_node():
    w = Workload(cpu_seconds=0.004, gil_seconds=0.001, bytes_per_image=100e3,
                 storage_bytes_per_s=150e6)
    one = predict(w, 16, ranks=1)  # 16 cores would give 4000/s; the GIL allows 1000/s
    assert (one.images_per_s, one.limit) == (pytest.approx(1000), "gil")
    many = predict(w, 16, ranks=4)  # 4 x 1000 = 4000/s of CPU/GIL, storage: 1500/s
    assert (many.images_per_s, many.limit) == (pytest.approx(1500), "storage")
    assert predict(w, 2, ranks=1).images_per_s == pytest.approx(500)


def test_plan_cores_and_threads_per_rank():
    w = Workload(cpu_seconds=0.002, gil_seconds=0.00005, bytes_per_image=110e3,
                 storage_bytes_per_s=5e9)
    plan = advise_cores(w, gpus=8, gpu_rate=3000)
    assert plan["demand_images_per_s"] == 24000
    assert plan["cores_needed"] == 48 and plan["threads_per_rank"] == 6
    assert plan["caps_images_per_s"]["gil_per_rank"] == pytest.approx(20000)
    rates = [row["images_per_s"] for row in plan["table"]]
    assert rates == sorted(rates)
    row48 = next(r for r in plan["table"] if r["cores"] == 48)
    assert row48["images_per_s"] == pytest.approx(24000)
    assert "48 cores" in plan["advice"][0]
    by_ranks = {row["ranks"]: row for row in plan["by_ranks"]}
    assert sorted(by_ranks) == [1, 2, 4, 8, 16]
    assert by_ranks[1]["cores_needed"] is None  # one process: the GIL allows 20000/s
    assert by_ranks[1]["max_images_per_s"] == pytest.approx(20000)
    assert by_ranks[2]["cores_needed"] == 48 and by_ranks[2]["threads_per_rank"] == 24


def test_plan_says_when_the_gil_or_storage_caps_it():
    w = Workload(cpu_seconds=0.002, gil_seconds=0.001, bytes_per_image=110e3,
                 storage_bytes_per_s=1e9)
    plan = advise_cores(w, gpus=8, gpu_rate=3000, ranks=2)  # GIL: 2 x 1000/s; storage ~9090/s
    assert plan["cores_needed"] is None and plan["threads_per_rank"] is None
    assert any("GIL caps each rank at 1000" in a and "at least 24 ranks" in a
               for a in plan["advice"])
    assert any("storage caps the node at 9091" in a for a in plan["advice"])


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError):
        Workload(cpu_seconds=0, gil_seconds=0, bytes_per_image=1)
    w = Workload(cpu_seconds=0.001, gil_seconds=0, bytes_per_image=0)
    assert math.isinf(w.gil_cap) and math.isinf(w.storage_cap)
    with pytest.raises(ValueError):
        advise_cores(w, gpus=0, gpu_rate=10)
    with pytest.raises(ValueError):
        predict(w, 0)


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    path = tmp_path_factory.mktemp("plan") / "train.rec"
    pack_training_set(path, classes=3, per_class=16)
    return str(path)


def test_measured_workload_is_sane(rec):
    w = measure_workload(rec, {"data_shape": (3, 64, 64), "rand_mirror": True}, images=32,
                         batch_size=8)
    assert 0 < w.gil_seconds <= w.cpu_seconds < 1.0
    assert 1000 < w.bytes_per_image < 1e6 and w.storage_bytes_per_s > 0


def test_plan_measures_a_file_of_48_images_with_batches_of_32(rec, capsys, monkeypatch):
    """The first batch (32) warms up and the 16 after it are measured, however late the
    consumer takes its snapshot after the warm-up: here it waits for the decode thread to
    have done all it was given (a batch decoded ahead during the warm-up was never measured,
    and the file "needed more than 32 images")."""
    from recpipe.decode.loader import ImageLoader

    stats, waited = ImageLoader.stats, []

    def late_first_snapshot(loader):
        if not waited:  # the consumer descheduled after the warm-up: the workers go on
            deadline = time.monotonic() + 1.0
            while stats(loader)["samples"] < 48 and time.monotonic() < deadline:
                time.sleep(0.01)
            waited.append(stats(loader)["samples"])
        return stats(loader)

    monkeypatch.setattr(ImageLoader, "stats", late_first_snapshot)
    assert main(["plan", rec, "--gpus", "1", "--gpu-rate", "100", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert waited == [32] and plan["workload"]["cpu_seconds"] > 0


def test_plan_on_a_file_of_one_batch_says_how_many_images_it_has(rec):
    with pytest.raises(ValueError, match="it has 48, and the first batch of 48 only warms up"):
        measure_workload(rec, {"data_shape": (3, 32, 32)}, batch_size=48)


def test_cli_plan_json_end_to_end(rec, capsys):
    assert main(["plan", rec, "--gpus", "2", "--gpu-rate", "500", "--images", "32",
                 "--batch-size", "8", "--config", "faces", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["demand_images_per_s"] == 1000 and plan["ranks"] == 2
    w = plan["workload"]
    assert w["cpu_seconds"] > 0 and 0 <= w["gil_seconds"] <= w["cpu_seconds"]
    for row in plan["table"]:
        assert row["limit"] in ("cpu", "gil", "storage") and row["images_per_s"] > 0
    assert plan["cores_needed"] is None or plan["cores_needed"] >= 1
    assert plan["advice"]
    assert main(["plan", rec, "--gpus", "1", "--gpu-rate", "100", "--images", "16",
                 "--batch-size", "8", "--storage-mbps", "0.001"]) == 0
    assert "storage caps" in capsys.readouterr().out
