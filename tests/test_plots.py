"""Charts of bench and tune results (matplotlib): valid images with the expected content."""

import cv2
import pytest

pytest.importorskip("matplotlib", reason="the plot extra: pip install 'recpipe[plot]'")

from recpipe.plots import plot_bench, plot_tune  # noqa: E402

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
