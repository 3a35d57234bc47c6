"""``recpipe pack --restart``: the JPEGs written get restart markers without changing a pixel, so
that a crop decodes only the intervals it touches (``recpipe.image.restart``)."""

import cv2
import numpy as np
import pytest

import recpipe
from recpipe._optional import extension
from recpipe.cli import main
from recpipe.image.restart import add_restarts, encoder_interval, restart_layout
from recpipe.packing.options import PackOptions
from recpipe.packing.packer import pack_dataset

pytestmark = pytest.mark.skipif(extension("_batch") is None, reason="recpipe._batch is not built")


def _photo(h, w, seed):
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (h // 5 + 1, w // 5 + 1, 3), dtype=np.uint8)
    img = cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)
    return cv2.add(img, rng.integers(0, 20, img.shape, dtype=np.uint8))


def _jpeg(img, **flags):
    params = [cv2.IMWRITE_JPEG_QUALITY, 88]
    for name, value in flags.items():
        params += [getattr(cv2, name), value]
    return cv2.imencode(".jpg", img, params)[1].tobytes()


@pytest.fixture
def folder(tmp_path):
    """Baseline JPEGs of assorted sizes and samplings, a gray one, a progressive one, a PNG."""
    root = tmp_path / "photos"
    files = {
        "a/wide.jpg": _jpeg(_photo(90, 200, 1)),
        "a/tall.jpg": _jpeg(_photo(170, 61, 2), IMWRITE_JPEG_SAMPLING_FACTOR=
                            cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444),
        "a/gray.jpg": _jpeg(cv2.cvtColor(_photo(77, 93, 3), cv2.COLOR_BGR2GRAY)),
        "b/progressive.jpg": _jpeg(_photo(64, 80, 4), IMWRITE_JPEG_PROGRESSIVE=1),
        "b/square.jpg": _jpeg(_photo(128, 128, 5)),
        "b/drawing.png": cv2.imencode(".png", _photo(40, 50, 6))[1].tobytes(),
    }
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root, files


def _records(rec):
    with recpipe.RecordReader(str(rec)) as reader:
        return [recpipe.unpack(reader[i]) for i in range(len(reader))]


def _pixels(jpeg):
    return cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_UNCHANGED)


def test_markers_change_no_pixel_and_no_label(folder, tmp_path):
    root, files = folder
    plain = pack_dataset(str(root), str(tmp_path / "plain"), shuffle=False, workers=1,
                         restart="off")
    marked = pack_dataset(str(root), str(tmp_path / "marked"), shuffle=False, workers=1,
                          restart="auto")
    assert plain.actions == {"kept": 5, "transcoded": 1}
    assert marked.actions == {"kept": 1, "restarted": 4, "transcoded": 1}  # kept: progressive
    before, after = _records(tmp_path / "plain.rec"), _records(tmp_path / "marked.rec")
    assert len(before) == len(after) == 6
    for (header_a, image_a), (header_b, image_b) in zip(before, after):
        assert header_a == header_b
        assert np.array_equal(_pixels(image_a), _pixels(image_b))
        if image_a == files["b/progressive.jpg"]:
            assert image_b == image_a
        else:
            assert image_b != image_a and restart_layout(image_b) is not None
    assert marked.output_bytes < plain.output_bytes  # optimal Huffman tables


def test_reencoded_images_get_markers_too(folder, tmp_path):
    root, _ = folder
    summary = pack_dataset(str(root), str(tmp_path / "o"), shuffle=False, workers=1,
                           resize=48, restart="auto")
    assert summary.actions == {"re-encoded": 5, "transcoded": 1}
    assert all(restart_layout(image) is not None for _, image in _records(tmp_path / "o.rec"))
    png = pack_dataset(str(root), str(tmp_path / "p"), shuffle=False, workers=1,
                       encoding=".png", restart="auto")
    assert png.actions == {"re-encoded": 5, "transcoded": 1}
    assert all(image[:4] == b"\x89PNG" for _, image in _records(tmp_path / "p.rec"))


@pytest.mark.parametrize("restart", ["auto", "2"])
@pytest.mark.parametrize("color", [1, 0])
def test_reencoding_writes_the_markers_adding_them_would(folder, tmp_path, restart, color):
    """A re-encoded image gets its markers from the encoder, in one pass: the same pixels and
    the same intervals as the plain encoding with the markers added losslessly afterwards
    (which cost a second transcoding of every image)."""
    root, _ = folder
    pack_dataset(str(root), str(tmp_path / "m"), shuffle=False, workers=1, resize=48,
                 color=color, restart=restart)
    pack_dataset(str(root), str(tmp_path / "p"), shuffle=False, workers=1, resize=48,
                 color=color, restart="off")
    marked, plain = _records(tmp_path / "m.rec"), _records(tmp_path / "p.rec")
    assert len(marked) == len(plain) == 6
    for (_, ours), (_, theirs) in zip(marked, plain):
        added = add_restarts(theirs, restart)
        assert added is not None
        assert restart_layout(ours) == restart_layout(added) is not None
        assert np.array_equal(_pixels(ours), _pixels(theirs))
        assert np.array_equal(_pixels(ours), _pixels(added))


def _dri(jpeg):
    """The restart interval of a JPEG's DRI segment (0: none)."""
    at = jpeg.find(b"\xff\xdd")
    return 0 if at < 0 else int.from_bytes(jpeg[at + 4:at + 6], "big")


def test_encoder_interval_is_the_transcoders():
    """``encoder_interval`` asks the transcoder's own rule (no copy of it in Python)."""
    for width in (1, 7, 8, 16, 17, 48, 200, 440, 4096):
        for components, gray in ((3, False), (1, True)):
            img = _photo(24, width, width) if not gray else cv2.cvtColor(
                _photo(24, width, width), cv2.COLOR_BGR2GRAY)
            for policy in ("auto", "1", "3"):
                added = add_restarts(_jpeg(img), policy)
                assert encoder_interval(policy, width, components) == _dri(added)
    assert encoder_interval("off", 440, 3) == 0


def test_cli_restart_rows(folder, tmp_path, capsys):
    root, _ = folder
    assert main(["pack", str(root), str(tmp_path / "o"), "--no-progress", "--workers", "1",
                 "--no-shuffle", "--restart", "2"]) == 0
    out = capsys.readouterr().out
    assert "4 JPEGs kept losslessly with restart markers (same pixels)" in out
    layouts = [restart_layout(image) for _, image in _records(tmp_path / "o.rec")]
    marked = [layout for layout in layouts if layout is not None]
    assert len(marked) == 5  # and the PNG, now a JPEG
    assert all(layout.interval == 2 * layout.mcus_per_row and layout.row_group == 2
               for layout in marked)


@pytest.mark.parametrize("value", ["sometimes", "0", "-2", "2.5"])
def test_a_bad_restart_value_is_refused_before_any_file_is_touched(folder, tmp_path, value,
                                                                   capsys):
    root, _ = folder
    assert main(["pack", str(root), str(tmp_path / "o"), "--no-progress", "--restart",
                 value]) != 0
    assert "restart" in capsys.readouterr().err
    assert not list(tmp_path.glob("o*"))


def test_pass_through_stores_bytes_as_they_are(folder, tmp_path):
    root, files = folder
    with pytest.raises(ValueError, match="pass_through"):
        PackOptions(pass_through=True, restart="auto")
    assert PackOptions(pass_through=True).image_options().restart == "off"
    summary = pack_dataset(str(root), str(tmp_path / "o"), shuffle=False, pass_through=True)
    assert summary.actions == {"kept": 6}
    assert {image for _, image in _records(tmp_path / "o.rec")} == set(files.values())


def test_restart_names_are_canonical_in_the_plan():
    assert PackOptions(restart="AUTO").image_options().restart == "auto"
    assert PackOptions(restart=3).image_options().restart == "3"
    assert PackOptions(restart="off").image_options().restart == "off"


def test_auto_is_the_default_where_the_extension_is_built(monkeypatch):
    import recpipe.packing.options as options

    assert PackOptions().image_options().restart == "auto"
    monkeypatch.setattr(options, "restarts_available", lambda: False)
    assert PackOptions().image_options().restart == "off"  # the default degrades quietly
    with pytest.raises(ImportError, match="libjpeg"):
        PackOptions(restart="auto").image_options()  # asked for: a clear error
    assert PackOptions(restart="off").image_options().restart == "off"


def test_default_pack_gives_markers(folder, tmp_path):
    root, _ = folder
    summary = pack_dataset(str(root), str(tmp_path / "o"), shuffle=False, workers=1)
    assert summary.actions == {"kept": 1, "restarted": 4, "transcoded": 1}


def test_inspect_counts_the_images_with_markers(folder, tmp_path, capsys):
    from recpipe.image.info import sniff

    root, files = folder
    assert sniff(files["a/wide.jpg"]).restart_interval is None
    pack_dataset(str(root), str(tmp_path / "m"), shuffle=False, workers=1, restart=2)
    pack_dataset(str(root), str(tmp_path / "p"), shuffle=False, workers=1, restart="off")
    image = _records(tmp_path / "m.rec")[0][1]
    assert sniff(image).restart_interval == restart_layout(image).interval
    assert main(["inspect", str(tmp_path / "m.rec"), "--json"]) == 0
    import json

    assert json.loads(capsys.readouterr().out)["images"]["restart_markers"] == 5  # not progressive
    assert main(["inspect", str(tmp_path / "p.rec")]) == 0
    assert "restart markers 0" in capsys.readouterr().out
