"""Every loader configuration gives the pixels and labels it gave before the decode rebuild
(``data/reference_batches.json``, made by ``reference_batches.py`` on the tree before it), on
the native run decoder and on the Python path, at any thread count."""

import json
import os
from pathlib import Path

import pytest

from recpipe.decode.decoders import available_decoders

from .reference_batches import CONFIGS, run_configs

REFERENCE = json.loads((Path(__file__).parent / "data" / "reference_batches.json").read_text())
NAMES = [name for name, _, _ in CONFIGS]

# the references were decoded by the system libjpeg-turbo; OpenCV's bundled copy may round
# differently, so without the libjpeg decoder there is nothing to compare (ci/test.sh builds it)
pytestmark = pytest.mark.skipif(
    "libjpeg" not in available_decoders() and os.environ.get("RECPIPE_REQUIRE_JPEGROI") != "1",
    reason="the libjpeg decoder (recpipe._batch) is not built")


def _mismatches(expected, got):
    lines = []
    for name in expected:
        for index, (want, have) in enumerate(zip(expected[name], got[name])):
            if want != have:
                lines.append(f"{name} sample {index}: expected {want}, got {have}")
        if len(expected[name]) != len(got[name]):
            lines.append(f"{name}: {len(expected[name])} samples expected, {len(got[name])} got")
    return lines


def test_every_configuration_is_covered():
    assert sorted(REFERENCE["configs"]) == sorted(NAMES)
    assert all(len(samples) == 8 for samples in REFERENCE["configs"].values())


@pytest.mark.parametrize("threads", [1, 2])
def test_batches_equal_the_pre_rebuild_references(tmp_path, threads):
    got = run_configs(tmp_path, threads=threads)
    assert _mismatches(REFERENCE["configs"], got) == []


def test_python_path_equals_the_references_too(tmp_path, monkeypatch):
    """With recpipe._batch hidden every run takes the Python path: the same pixels."""
    import recpipe.decode.native as native

    asked = []
    monkeypatch.setattr(native, "extension", lambda name: asked.append(name))
    got = run_configs(tmp_path, names=["faces", "train", "train_jitter", "val"])
    assert "_batch" in asked
    expected = {name: REFERENCE["configs"][name] for name in got}
    assert _mismatches(expected, got) == []
