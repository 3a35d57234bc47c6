"""Charts of bench and tune results (matplotlib): valid images with the expected content."""

import cv2
import pytest

pytest.importorskip("matplotlib", reason="the plot extra: pip install 'recpipe[plot]'")

from recpipe.report.plots import bench_caption, bench_figure, plot_bench, plot_tune  # noqa: E402

RESULTS = {
    "file": "x.rec", "threads": 4, "bare_decode_images_per_s": 2500.0,
    "configs": {name: {"stage_ms_per_image": {"read": 0.02, "decode": 0.5 + i / 10,
                                               "augment": 0.2, "batch": 0.01},
                       "gil_us_per_image": 5.0 + 50 * i}
                for i, name in enumerate(("train", "val"))},
    "sweep": [{"threads": t, "images_per_s": 700.0 * t ** 0.9} for t in (1, 2, 3, 4)],
}
REPORT = {"reason": "settled", "history": [
    {"window": w, "threads": 2 + min(w, 3), "prefetch": 2 + (w > 2) * 2, "action": a,
     "changed": a != "stay", "wait_fraction": max(0.0, 0.5 - w / 10), "images_per_s": 900 + w * 80}
    for w, a in enumerate(["probe +1", "probe +1", "grow prefetch", "stay", "stay"])]}


def _image(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    img = cv2.imread(str(path))
    assert img is not None
    return img


def test_bench_chart(tmp_path):
    path = tmp_path / "bench.png"
    assert plot_bench(RESULTS, str(path)) == str(path)
    img = _image(path)
    assert img.shape[1] > img.shape[0] > 300  # two panels side by side
    assert img.std() > 20  # not blank: lines, bars and text


def test_bench_chart_draws_the_gil_held_share(tmp_path):
    """The Python (GIL-held) part is hatched over each configuration's stage bar: the charts
    with and without it differ in the bar panel."""
    with_gil, without = tmp_path / "gil.png", tmp_path / "plain.png"
    plot_bench(RESULTS, str(with_gil))
    plain = {**RESULTS, "configs": {name: {"stage_ms_per_image": c["stage_ms_per_image"]}
                                    for name, c in RESULTS["configs"].items()}}
    plot_bench(plain, str(without))
    a, b = _image(with_gil), _image(without)
    right = a.shape[1] * 3 // 5  # the stage panel
    assert a.shape == b.shape and (a[:, right:] != b[:, right:]).any()


def test_bench_chart_without_a_sweep(tmp_path):
    path = tmp_path / "bench.png"
    plot_bench(dict(RESULTS, sweep=[]), str(path))
    assert _image(path).size


def test_tune_chart(tmp_path):
    path = tmp_path / "tune.png"
    plot_tune(REPORT, str(path))
    img = _image(path)
    assert img.shape[0] > 400 and img.std() > 20


# -- showable charts (issue 23) ---------------------------------------------------------------

FUSED = {**RESULTS, "configs": {name: {"stage_ms_per_image": {"read": 0.0, "decode": 4.3,
                                                               "augment": 0.0, "batch": 0.003},
                                       "gil_us_per_image": 28.0}
                                for name in ("train", "val")}}


def _axes():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(figsize=(6, 4.8))
    return plt, fig, axes


def test_the_scaling_panel_holds_the_whole_ideal_line_and_its_legend_covers_no_point():
    from recpipe.report.plots import draw_scaling

    plt, fig, axes = _axes()
    draw_scaling(axes, RESULTS)
    fig.tight_layout()
    fig.canvas.draw()
    ideal_top = 700.0 * 4  # linear from the 1-thread rate to 4 threads
    assert axes.get_ylim()[1] >= ideal_top
    legend = axes.get_legend().get_window_extent()
    box = axes.get_window_extent()
    points = axes.transData.transform([(p["threads"], p["images_per_s"]) for p in RESULTS["sweep"]])
    assert not any(legend.contains(x, y) for x, y in points)
    assert legend.y1 <= box.y0  # below the axes
    plt.close(fig)


def test_stages_fused_into_the_native_decode_are_named_not_drawn_as_empty_bars():
    from recpipe.report.plots import draw_stages, drawn_stages

    drawn, notes = drawn_stages(FUSED["configs"])
    assert drawn == ["decode"]
    assert notes == ["read, augment: fused into the native decode (timed as decode)",
                     "batch: under 1% of the cost, not drawn"]
    plt, fig, axes = _axes()
    draw_stages(axes, FUSED["configs"])
    labels = axes.get_legend_handles_labels()[1]
    assert labels == ["decode", "Python (GIL-held)"]
    assert "fused into the native decode" in " ".join(t.get_text() for t in axes.texts)
    plt.close(fig)
    assert drawn_stages(RESULTS["configs"]) == (["read", "decode", "augment", "batch"], [])


def test_the_tune_timeline_starts_at_the_starting_setting_and_pairs_each_rate_with_its_own():
    from recpipe.report.plots import tune_timeline

    report = {"start": {"threads": 2, "prefetch": 2}, "history": [
        {"window": 1, "threads": 3, "prefetch": 2, "action": "probe +1", "changed": True,
         "wait_fraction": 0.6, "images_per_s": 400.0, "seconds": 2.0},
        {"window": 2, "threads": 3, "prefetch": 4, "action": "grow prefetch", "changed": True,
         "wait_fraction": 0.3, "images_per_s": 550.0, "seconds": 3.5},
        {"window": 3, "threads": 3, "prefetch": 4, "action": "hold", "changed": False,
         "wait_fraction": 0.1, "images_per_s": 560.0, "seconds": 5.0}]}
    x, unit, spans, final = tune_timeline(report)
    assert x == [2.0, 3.5, 5.0] and unit == "seconds since tuning began"
    # window 1 ran at the start setting (2 threads), not at the 3 its decision chose
    assert [(s["threads"], s["prefetch"], s["images_per_s"]) for s in spans] == [
        (2, 2, 400.0), (3, 2, 550.0), (3, 4, 560.0)]
    assert final == (3, 4)


def test_the_tune_chart_from_a_real_autotune_run(tmp_path):
    """A real tuner's report carries the start setting and the window times the chart needs."""
    from recpipe.decode.tune.controller import Controller, WindowMetrics

    controller = Controller(4, threads=2)
    for i in range(3):
        controller.update(WindowMetrics(batches=8, seconds=1.0, wait_fraction=0.5,
                                        images_per_s=300.0 + i, cpu_per_batch=0.01))
    report = controller.report()
    assert report["start"] == {"threads": 2, "prefetch": 2}
    path = tmp_path / "tune.png"
    plot_tune(report, str(path))
    assert _image(path).std() > 20


def test_bench_chart_says_what_it_was_measured_with():
    """Threads, usable cores, batch, dtype, decoder, the runs per point and the load the runs
    saw are written on the chart; a busy machine is flagged on it."""
    results = dict(RESULTS, batch_size=64, dtype="float32", decoder="libjpeg", repeats=3,
                   seconds_per_run=1.0,
                   machine={"cores": 2, "load_average": [0.4, 1.2], "busy": None})
    caption = bench_caption(results)
    assert caption == ("4 threads, 2 usable cores, batch 64, float32, decoder libjpeg, median "
                       "of 3 runs of 1 s (bars: slowest-fastest), load average 0.4-1.2")
    fig = bench_figure(results)
    try:
        assert caption in [text.get_text() for text in fig.texts]
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    busy = bench_caption(dict(results, machine={**results["machine"], "busy": "the machine..."}))
    assert busy.endswith("BUSY MACHINE: other processes took the cores; rates are low and noisy")
