"""recpipe doctor: its JSON report, and demo's hint when a fast path is missing."""

import json

import pytest

from recpipe.report import doctor
from recpipe.cli import main
from recpipe.decode.decoders import available_decoders


def test_the_report_names_decoders_paths_protocols_and_cores():
    report = doctor.diagnose(measure=True)
    assert report["decoders"]["live"] == available_decoders()
    assert report["decoders"]["auto"] == available_decoders()[0]
    assert report["build"] == ("with libjpeg" if report["fast_paths"]["_batch"]["present"]
                               else "without libjpeg")
    assert set(report["fast_paths"]) == {"_batch", "_kernels", "_resize", "_colour", "_crc32c",
                                         "_plan",
                                         "libturbojpeg", "simplejpeg"}
    for info in report["fast_paths"].values():
        assert info["present"] or "install" in info
    assert report["protocols"]["file"] and "s3" in report["protocols"]
    assert report["cores"]["usable"] >= report["cores"]["this_rank"] >= 1
    assert set(report["decode_images_per_s"]) == set(available_decoders())
    assert all(rate > 0 for rate in report["decode_images_per_s"].values())
    json.dumps(report)  # JSON-ready


def test_missing_paths_are_listed_with_their_install_hint():
    report = doctor.diagnose(measure=False)
    report["fast_paths"]["_batch"] = {"present": False}
    report["fast_paths"]["libturbojpeg"] = {"present": False}
    slow = doctor.slow_paths(report)
    assert slow[:1] == ["_batch"] and "libjpeg-turbo" in slow
    assert "libjpeg62-turbo-dev" in doctor.INSTALL_HINTS["_batch"]
    assert "libturbojpeg0" in doctor.INSTALL_HINTS["libturbojpeg"]
    costs = doctor._missing_cost({"opencv": 100.0}, {"_resize": True, "_colour": False,
                                                     "_batch": False})
    assert set(costs) == {"decoder", "_colour", "_batch"}
    assert "GIL" in costs["_batch"] and "decoded whole" in costs["_batch"]
    assert "not fully built" in costs["_colour"]


def test_cli_json(capsys):
    assert main(["doctor", "--json", "--no-measure"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "decode_images_per_s" not in report and report["decoders"]["live"]
    assert main(["doctor", "--no-measure"]) == 0
    assert "decoders:" in capsys.readouterr().out


@pytest.mark.parametrize("missing", [[], ["_batch"]])
def test_demo_points_at_doctor_on_a_slow_path(capsys, monkeypatch, missing):
    monkeypatch.setattr(doctor, "slow_paths", lambda report=None: missing)
    assert main(["demo", "--classes", "1", "--per-class", "8", "--seconds", "0.2",
                 "--threads", "1", "--json"]) == 0
    err = capsys.readouterr().err
    assert ("recpipe doctor" in err) == bool(missing)


def test_the_protocols_line_names_each_store_and_its_client(capsys):
    import importlib.util

    report = doctor.diagnose(measure=False)
    for scheme, module in (("s3", "s3fs"), ("gs", "gcsfs"), ("az/abfs", "adlfs")):
        present = importlib.util.find_spec(module) is not None
        assert report["protocols"][scheme] == present
        assert report["protocol_clients"][scheme].startswith(module if present
                                                             else "not installed: pip install")
    assert main(["doctor"]) == 0
    line = next(text for text in capsys.readouterr().out.splitlines()
                if text.startswith("protocols:"))
    assert "gs (" in line and "az/abfs (" in line
