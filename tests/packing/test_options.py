"""PackOptions: validated before any file is touched, misspelt keywords get a "did you mean",
and pack_dataset takes either an options object or today's keywords."""

import dataclasses

import cv2
import numpy as np
import pytest

import recpipe
from recpipe.cli import main
from recpipe.packing.inputs import InputLimits
from recpipe.packing.options import PACK_KEYWORDS, PackOptions
from recpipe.packing.packer import pack_dataset
from recpipe.spelling import did_you_mean


def _jpeg(h, w, seed):
    rng = np.random.default_rng(seed)
    ok, buf = cv2.imencode(".jpg", rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
    assert ok
    return buf.tobytes()


@pytest.fixture
def photos(tmp_path):
    src = tmp_path / "src"
    for label, name in enumerate(("cat", "dog")):
        (src / name).mkdir(parents=True)
        for i in range(3):
            (src / name / f"img{i}.jpg").write_bytes(_jpeg(24 + i, 30 + label, 10 * label + i))
    return src


def _records(prefix):
    with recpipe.RecordReader(f"{prefix}.rec") as reader:
        return [bytes(payload) for payload in reader]


BAD_VALUES = [
    ({"on_error": "ignore"}, "on_error"),
    ({"encoding": ".gif"}, "encoding"),
    ({"color": 2}, "color"),
    ({"quality": 101}, "quality"),
    ({"workers": -1}, "workers"),
    ({"resize": -5}, "resize"),
    ({"shards": -1}, "shards"),
    ({"shard_size": -1}, "shard_size"),
    ({"val_ratio": 1.0}, "val_ratio"),
    ({"chunksize": 0}, "chunksize"),
    ({"flush_every": 0}, "flush_every"),
    ({"item_timeout": 0}, "item_timeout"),
    ({"extensions": ".jpg"}, "extensions"),
    ({"limits": {"max_file_bytes": 1}}, "limits"),
]


@pytest.mark.parametrize("changes, name", BAD_VALUES)
def test_bad_values_are_refused_before_any_file_is_touched(photos, tmp_path, changes, name):
    with pytest.raises(ValueError, match=name):
        PackOptions(**changes)
    out = tmp_path / "out" / "o"
    with pytest.raises(ValueError, match=name):
        pack_dataset(photos, out, **changes)
    assert not (tmp_path / "out").exists(), "an output was created for refused options"


def test_a_misspelt_keyword_gets_did_you_mean(photos, tmp_path):
    with pytest.raises(TypeError, match=r"'shufle' \(did you mean 'shuffle'\?\)"):
        pack_dataset(photos, tmp_path / "out" / "o", shufle=True)
    with pytest.raises(TypeError, match=r"did you mean 'val_ratio'"):
        PackOptions.from_kwargs(valratio=0.1)
    with pytest.raises(TypeError, match=r"did you mean 'resize'"):
        PackOptions().replace(resise=10)
    with pytest.raises(TypeError, match=r"unknown keyword 'zzz'$"):
        PackOptions.from_kwargs(zzz=1)
    assert not (tmp_path / "out").exists()


def test_did_you_mean_is_shared_with_the_loader():
    assert did_you_mean("shufle", ["seed", "shuffle"]) == " (did you mean 'shuffle'?)"
    assert did_you_mean("zzz", ["seed", "shuffle"]) == ""
    with pytest.raises(ValueError, match=r"did you mean 'shuffle'"):
        recpipe.LoaderOptions.from_kwargs(2, (3, 8, 8), shufle=True)


def test_options_are_frozen_and_list_every_keyword():
    options = PackOptions(resize=32)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.resize = 64  # type: ignore[misc]
    assert options.replace(resize=64).resize == 64 and options.resize == 32
    assert {"resize", "shards", "val_ratio", "limits", "dask"} <= PACK_KEYWORDS


def test_keywords_options_and_both_pack_the_same(photos, tmp_path):
    by_keywords = pack_dataset(photos, tmp_path / "a", resize=16, seed=3, workers=0)
    options = PackOptions(resize=16, seed=3, workers=0)
    by_options = pack_dataset(photos, tmp_path / "b", options)
    overridden = pack_dataset(photos, tmp_path / "c", PackOptions(resize=99, workers=0),
                              resize=16, seed=3)
    assert by_keywords.written == by_options.written == overridden.written == 6
    expected = _records(tmp_path / "a")
    assert _records(tmp_path / "b") == expected
    assert _records(tmp_path / "c") == expected
    pack_dataset(photos, tmp_path / "d", options.replace(seed=4))
    assert _records(tmp_path / "d") != expected  # the options do reach the packer


def test_the_image_options_follow_the_settings():
    assert PackOptions().image_options().keep_jpeg is True
    assert PackOptions(resize=10).image_options().keep_jpeg is False
    assert PackOptions(encoding=".jpeg").image_options().encoding == ".jpg"
    assert PackOptions(quality=80).image_options().quality == 80
    assert PackOptions(limits=InputLimits(max_file_bytes=10)).limits.max_file_bytes == 10


def test_the_cli_refuses_bad_values_before_touching_files(photos, tmp_path, capsys):
    out = tmp_path / "out" / "o"
    code = main(["pack", str(photos), str(out), "--val-ratio", "1.5", "--no-progress"])
    assert code != 0
    assert "val_ratio" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    assert main(["pack", str(photos), str(out), "--resize", "16", "--no-progress"]) == 0
    assert len(_records(out)) == 6
