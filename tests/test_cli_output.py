"""What the commands print, read as a new user reads it (issue 31 item 9): inspect's labels,
class names, formats and channels (no Python reprs; InsightFace's header and identity records
kept out of the image counts), tune's final state, doctor's environment and decoder advice,
plan's storage rate and where it was read from, demo's table."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recpipe.cli import main
from recpipe.packing.packer import pack_dataset
from recpipe.report.sample import make_sample_images

from .test_face_layout import write_faces

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """``recpipe pack`` of 3 named classes of 6 images each: (rec, label map)."""
    folder = tmp_path_factory.mktemp("packed")
    make_sample_images(str(folder / "src"), classes=3, per_class=6, size=(60, 80))
    names = sorted(p.name for p in (folder / "src").iterdir())
    for i, name in enumerate(names):  # class names a user would give
        (folder / "src" / name).rename(folder / "src" / ("cat", "dog", "fox")[i])
    pack_dataset(str(folder / "src"), str(folder / "pets"))
    return str(folder / "pets.rec"), str(folder / "pets.labels.json")


@pytest.fixture(scope="module")
def faces(tmp_path_factory):
    return write_faces(tmp_path_factory.mktemp("faces"))


def _inspect(capsys, rec, *extra):
    assert main(["inspect", rec, "--no-progress", *extra]) == 0
    return capsys.readouterr().out


def test_inspect_prints_counts_not_python_reprs_and_names_the_classes(packed, capsys):
    rec, label_map = packed
    out = _inspect(capsys, rec)
    assert "{'" not in out and "'}" not in out, out
    assert "labels: 18 scalar (flag 0), 0 packed; 3 distinct values" in out
    assert (f"label histogram, class names from {label_map}: 0 cat: 6, 1 dog: 6, 2 fox: 6"
            in out)
    assert "formats jpeg: 18" in out and "3 channels: 18" in out
    summary = json.loads(_inspect(capsys, rec, "--json"))
    assert summary["labels"]["class_names"] == {"0": "cat", "1": "dog", "2": "fox"}
    assert summary["labels"]["label_map"] == label_map


def test_inspect_of_an_insightface_file_counts_its_images_only(faces, capsys):
    rec, labels = faces
    out = _inspect(capsys, rec)
    assert "labels: 10 scalar (flag 0), 0 packed; 4 distinct values" in out
    assert ("label histogram of the image records (the header record and 4 identity records "
            "left out): 0: 3, 1: 1, 2: 4, 3: 2") in out
    assert "unknown" not in out and "formats jpeg: 10" in out
    summary = json.loads(_inspect(capsys, rec, "--json"))
    assert summary["labels"]["layout_records"] == {"header": 1, "identities": 4}
    assert sum(summary["labels"]["histogram"].values()) == len(labels) == 10
    assert summary["images"]["formats"] == {"jpeg": 10}
    assert summary["labels"]["class_names"] is None


def _report(reason, settled=3):
    return {"threads": 3, "prefetch": 2, "reason": reason, "windows": 4, "changes": 1,
            "settled_window": settled, "cores": 2, "cores_source": "affinity",
            "wait_fraction": {"before": 0.6, "after": 0.5}, "images_per_s_overall": 500.0,
            "warnings": []}


def test_tune_does_not_call_a_run_still_tuning_settled():
    from recpipe.cli.tune import format_report

    tuning = format_report(_report("TUNING"))
    assert "settled" not in tuning
    assert tuning.startswith("threads 3, prefetch 2: still TUNING when the run ended (the "
                             "consumer still waits 50.0%")
    assert "run longer, --seconds" in tuning and "threads last changed at window 3" in tuning
    done = format_report(_report("NOT_STARVED"))
    assert done.startswith("threads 3, prefetch 2: NOT_STARVED") and "settled at window 3" in done


def test_tune_json_says_whether_it_settled(packed, capsys):
    rec, _ = packed
    assert main(["tune", rec, "--step-ms", "1", "--seconds", "0.5", "--batch-size", "4",
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["state"] == ("tuning" if report["reason"] == "TUNING" else "settled")


def _doctor(env):
    return subprocess.run([sys.executable, "-m", "recpipe", "doctor", "--no-measure"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)


def test_doctor_tells_recpipes_own_default_from_the_users_setting():
    base = {k: v for k, v in os.environ.items() if k != "OPENCV_IO_MAX_IMAGE_PIXELS"}
    base["PYTHONPATH"] = str(ROOT)
    mine = _doctor(base)
    assert mine.returncode == 0, mine.stderr
    assert "OPENCV_IO_MAX_IMAGE_PIXELS" not in "".join(
        line for line in mine.stdout.splitlines() if line.startswith("environment: "))
    assert ("default: OPENCV_IO_MAX_IMAGE_PIXELS=89478485, set by recpipe (not by you)"
            in mine.stdout)
    users = _doctor({**base, "OPENCV_IO_MAX_IMAGE_PIXELS": "1000"})
    assert "OPENCV_IO_MAX_IMAGE_PIXELS=1000" in next(
        line for line in users.stdout.splitlines() if line.startswith("environment: "))
    assert "default: OPENCV_IO_MAX_IMAGE_PIXELS" not in users.stdout


def test_doctor_says_what_to_do_when_auto_measured_slower():
    from recpipe.report.doctor import _missing_cost

    paths = dict.fromkeys(("_batch", "_resize", "_colour", "_crc32c", "_plan"), True)
    cost = _missing_cost({"turbojpeg": 400.0, "libjpeg": 900.0, "opencv": 300.0}, paths)
    advice = cost["auto decoder"]
    assert advice.startswith("turbojpeg (auto's choice) decoded 400 images/s here, libjpeg 900")
    assert "recpipe bench FILE --decoder libjpeg" in advice and "decoder='libjpeg'" in advice
    assert "auto decoder" not in _missing_cost({"turbojpeg": 900.0, "libjpeg": 950.0}, paths)


def _evicted(path):
    """``path`` written out and dropped from the page cache (its pages are clean)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def test_plan_says_whether_the_storage_rate_came_from_the_page_cache(tmp_path):
    from recpipe.capacity import _cached_share, _storage_rate

    path = tmp_path / "blob.rec"
    path.write_bytes(os.urandom(6 << 20))
    _evicted(str(path))
    if _cached_share(str(path), [0], 1 << 20) is None:
        pytest.skip("mincore is not available here")
    if _cached_share(str(path), [0, 2 << 20], 1 << 20) > 0.1:
        pytest.skip("this filesystem keeps the file cached after POSIX_FADV_DONTNEED")
    cold = _storage_rate(str(path), None, total=4 << 20, block=1 << 20)
    warm = _storage_rate(str(path), None, total=4 << 20, block=1 << 20)
    assert cold[1] == "disk" and warm[1] == "page cache"
    assert cold[0] > 0 and warm[0] > 0


def test_plan_prints_where_the_storage_rate_was_read(packed, capsys):
    rec, _ = packed
    assert main(["plan", rec, "--gpus", "1", "--gpu-rate", "100", "--images", "8",
                 "--batch-size", "4", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    source = plan["workload"]["storage_source"]
    assert source in ("page cache", "disk", "disk and page cache", "local, cache unknown")
    assert main(["plan", rec, "--gpus", "1", "--gpu-rate", "100", "--images", "8",
                 "--batch-size", "4"]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert "MB/s (read from" in first or "MB/s (a local file" in first, first
    if source == "page cache":
        assert "storage rate was read from the page cache" in out
        assert "--storage-mbps" in out
    assert main(["plan", rec, "--gpus", "1", "--gpu-rate", "100", "--images", "8",
                 "--batch-size", "4", "--storage-mbps", "200"]) == 0
    assert "storage 200 MB/s (given with --storage-mbps)" in capsys.readouterr().out


def test_demo_table_explains_every_column_and_prints_no_fused_zeros(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--classes", "2", "--per-class", "8",
                 "--seconds", "0.1"]) == 0
    out = capsys.readouterr().out
    stages = out[out.index("ms per image"):out.index("  wait:")]
    assert " 0.00" not in stages, stages  # a stage fused into the decode is not "0.00 ms"
    for explained in ("wait: share of the run", "cores: process CPU time / wall time",
                      "CPU ms: CPU time per image", "GIL us: worker CPU per image",
                      "ceiling/s = 1e6 / GIL us", "fused: done inside the native decode call"):
        assert explained in out, explained
