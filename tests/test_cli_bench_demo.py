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
            writer.write(pack(IRHeader(0, float(i % 3), i, 0), cv2.imencode(".jpg",
                                                                            img)[1].tobytes()))
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


def test_bench_on_a_file_in_insightface_layout_measures_its_images(tmp_path, capsys):
    """Record 0 (the header) and the identity records hold no image: bench leaves them out of
    its bare-decode set, as the loader leaves them out of its epochs."""
    from recpipe.decode.bench import load_images

    from .test_face_layout import write_faces

    rec, labels = write_faces(tmp_path)
    images = load_images(rec)
    assert len(images) == len(labels) and all(len(image) for image in images)
    with recpipe.RecordReader(rec) as reader:
        assert images[0] == recpipe.unpack(reader[1])[1] and len(reader) > len(labels) + 1
    assert len(load_images(rec, limit=3)) == 3
    status = main(["bench", rec, "--seconds", "0.2", "--batch-size", "4", "--configs", "faces",
                   "--json"])
    assert status == 0
    result = json.loads(capsys.readouterr().out)
    assert result["bare_decode_images_per_s"] > 0
    assert result["configs"]["faces"]["images_per_s"] > 0


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


def test_bench_plot_without_matplotlib_stops_before_measuring(rec, tmp_path, capsys,
                                                              monkeypatch):
    """--plot's requirement is checked first: no 20 s run lost to a missing extra."""
    import sys

    from recpipe.decode import bench

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    monkeypatch.setattr(bench, "measure", lambda *a, **k: pytest.fail("measured anyway"))
    plot = tmp_path / "sweep.png"
    status = main(["bench", rec, "--seconds", "0.1", "--batch-size", "8", "--configs", "val",
                   "--max-threads", "1", "--plot", str(plot)])
    out, err = capsys.readouterr()
    assert status == 2 and not plot.exists() and out == ""
    assert err.strip() == (f"recpipe bench: --plot {plot}: matplotlib is needed for this "
                           "feature: pip install 'recpipe[plot]' (nothing was measured)")
    monkeypatch.delitem(sys.modules, "matplotlib")
    pytest.importorskip("matplotlib")
    status = main(["bench", rec, "--plot", str(tmp_path / "no" / "such" / "dir.png")])
    assert status == 2 and "no folder" in capsys.readouterr().err


def test_tune_plot_without_matplotlib_stops_before_running(rec, tmp_path, capsys,
                                                           monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    plot = tmp_path / "tune.png"
    status = main(["tune", rec, "--step-ms", "1", "--seconds", "0.5", "--batch-size", "4",
                   "--plot", str(plot)])
    out, err = capsys.readouterr()
    assert status == 2 and not plot.exists() and out == ""
    assert "--plot" in err and "recpipe[plot]" in err and "nothing was run" in err


def test_bench_gives_one_figure_per_configuration_with_its_spread_and_cpu(rec, capsys):
    """The sweep's point at the table's thread count is the table's figure (they were two
    single samples taken at different moments, 1.8x apart on a busy machine); each figure is
    the median of its runs with their range, the cores the runs got and CPU ms per image."""
    assert main(["bench", rec, "--seconds", "0.2", "--batch-size", "8", "--json", "--sweep",
                 "--max-threads", "2", "--threads", "2", "--repeats", "3",
                 "--configs", "train,val"]) == 0
    result = json.loads(capsys.readouterr().out)
    train = result["configs"]["train"]
    at_two = next(p for p in result["sweep"] if p["threads"] == 2)
    assert at_two == train and result["sweep_config"] == "train"
    for figure in [result["bare_decode"], *result["configs"].values(), *result["sweep"]]:
        runs = figure["images_per_s_runs"]
        assert len(runs) == figure["runs"] == 3
        low, high = figure["images_per_s_spread"]
        assert low == min(runs) <= figure["images_per_s"] == sorted(runs)[1] <= high == max(runs)
        assert 0 < figure["cores_used"] and 0 < figure["cpu_ms_per_image"]
    machine = result["machine"]
    assert machine["cores"] >= 1 and "busy" in machine
    assert result["repeats"] == 3 and result["seconds_per_run"] == 0.2


def test_bench_warns_when_other_processes_take_the_cores(rec, capsys):
    """Busy-loop processes on every core while bench runs: the table says the machine is busy
    and what showed it (our threads waiting for a CPU, the load)."""
    import os
    import subprocess
    import sys

    hogs = [subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 120\n"
                              "while time.time() < end: pass"])
            for _ in range(2 * (os.cpu_count() or 1))]
    try:
        status = main(["bench", rec, "--seconds", "0.5", "--batch-size", "8", "--configs",
                       "val", "--repeats", "2"])
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait(timeout=30)
    out = capsys.readouterr().out
    assert status == 0
    text = " ".join(out.split())
    assert "warning: the machine is busy: other processes took the cores" in text, out
    assert "waited for a CPU" in text and "core(s) their threads could use" in text


def test_tune_report_times_each_decision_for_the_chart(rec, tmp_path, capsys):
    assert main(["tune", rec, "--step-ms", "1", "--seconds", "1.5", "--batch-size", "4",
                 "--window-batches", "2", "--window-seconds", "0.1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    seconds = [d["seconds"] for d in report["history"]]
    assert report["start"]["threads"] >= 1 and seconds
    assert seconds == sorted(seconds) and 0 < seconds[0] and seconds[-1] <= report["elapsed"]
