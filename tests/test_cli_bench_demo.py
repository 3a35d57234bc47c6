import json

import cv2
import numpy as np
import pytest

import recpipe
from recpipe.cli import main
from recpipe.io import IRHeader, pack


@pytest.fixture
def rec(tmp_path):
    url = str(tmp_path / "b.rec")
    rng = np.random.default_rng(0)
    with recpipe.RecordWriter(url) as writer:
        for i in range(24):
            img = rng.integers(0, 255, (60, 80, 3), dtype=np.uint8)
            writer.write(pack(IRHeader(0, float(i % 3), i, 0), cv2.imencode(".jpg", img)[1].tobytes()))
    return url


def test_bench_json_plot_and_trace(rec, tmp_path, capsys):
    plot, trace = tmp_path / "sweep.png", tmp_path / "trace.json"
    status = main(["bench", rec, "--seconds", "0.2", "--batch-size", "8", "--json", "--sweep",
                   "--max-threads", "2", "--plot", str(plot), "--trace", str(trace)])
    assert status == 0
    result = json.loads(capsys.readouterr().out)
    assert result["bare_decode_images_per_s"] > 0
    assert set(result["configs"]) == {"train", "val"}
    for config in result["configs"].values():
        assert config["images_per_s"] > 0
        assert set(config["stage_ms_per_image"]) == {"read", "decode", "augment", "batch"}
        busy_us = sum(config["stage_ms_per_image"].values()) * 1e3
        assert 0 < config["gil_us_per_image"] < busy_us  # the Python share of the work
        assert config["gil_ceiling_images_per_s"] == pytest.approx(1e6 / config["gil_us_per_image"])
    assert [p["threads"] for p in result["sweep"]] == [1, 2]
    chart = cv2.imread(str(plot))  # matplotlib: two panels side by side
    assert chart.shape[1] > chart.shape[0] > 300 and chart.std() > 20
    events = json.loads(trace.read_text())["traceEvents"]
    # native runs (recpipe._batch) are one "decode" span each; the Python path has all three
    spans = {e["name"] for e in events if e["ph"] == "X"}
    assert spans >= {"decode", "batch"} and spans <= {"read", "decode", "augment", "batch"}


def test_bench_table(rec, capsys):
    assert main(["bench", rec, "--seconds", "0.2", "--batch-size", "8", "--configs",
                 "val,faces"]) == 0
    out = capsys.readouterr().out
    assert "bare decode" in out and "val" in out and "faces" in out and "images/s" in out
    assert "GIL us" in out and "ceiling/s" in out


def test_bench_unknown_config(rec, capsys):
    assert main(["bench", rec, "--seconds", "0.1", "--configs", "nope"]) == 2


def test_demo_packs_and_measures(tmp_path, capsys):
    status = main(["demo", "--out", str(tmp_path), "--classes", "2", "--per-class", "6",
                   "--seconds", "0.2", "--json"])
    assert status == 0
    result = json.loads(capsys.readouterr().out)
    assert result["pack"]["written"] == 12
    assert len(recpipe.RecordReader(result["file"])) == 12
    assert result["configs"]["train"]["images_per_s"] > 0


def test_bench_plot_without_matplotlib_prints_the_results_then_the_hint(rec, tmp_path, capsys,
                                                                        monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    plot = tmp_path / "sweep.png"
    status = main(["bench", rec, "--seconds", "0.1", "--batch-size", "8", "--configs", "val",
                   "--max-threads", "1", "--plot", str(plot)])
    out, err = capsys.readouterr()
    assert status == 1 and not plot.exists()
    assert "bare decode" in out and "thread sweep" in out and "peak RSS" in out
    assert err.rstrip().endswith(f"recpipe bench: no plot written to {plot}: matplotlib is "
                                 "needed for this feature: pip install 'recpipe[plot]'")


def test_tune_plot_without_matplotlib_prints_the_report_then_the_hint(rec, tmp_path, capsys,
                                                                      monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    plot = tmp_path / "tune.png"
    status = main(["tune", rec, "--step-ms", "1", "--seconds", "0.5", "--batch-size", "4",
                   "--plot", str(plot)])
    out, err = capsys.readouterr()
    assert status == 1 and not plot.exists()
    assert "consumer wait" in out and "windows" in out
    assert "no plot written" in err and "recpipe[plot]" in err


def test_tune_report_times_each_decision_for_the_chart(rec, tmp_path, capsys):
    assert main(["tune", rec, "--step-ms", "1", "--seconds", "1.5", "--batch-size", "4",
                 "--window-batches", "2", "--window-seconds", "0.1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    seconds = [d["seconds"] for d in report["history"]]
    assert report["start"]["threads"] >= 1 and seconds
    assert seconds == sorted(seconds) and 0 < seconds[0] and seconds[-1] <= report["elapsed"]
