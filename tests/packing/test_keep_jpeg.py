"""``recpipe pack`` keeps JPEG bytes unless an option asks for a change, re-encodes only what
must be (other formats, CMYK, EXIF-rotated), and says which it did (issue 23, item 4)."""

import struct

import cv2
import numpy as np
import pytest

import recpipe
from recpipe.cli import main
from recpipe.packing.packer import pack_dataset

simplejpeg = pytest.importorskip("simplejpeg")


def _image(h=30, w=40, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.uniform(40, 200, 3)
    ys, xs = np.mgrid[0:h, 0:w]
    return np.clip(base + ys[..., None] * 2 + xs[..., None], 0, 255).astype(np.uint8)


def _jpeg(image, quality):
    return cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, quality])[1].tobytes()


def _with_orientation(jpeg, orientation):
    entry = struct.pack("<HHIHH", 0x0112, 3, 1, orientation, 0)
    body = b"Exif\x00\x00II*\x00" + struct.pack("<IH", 8, 1) + entry + struct.pack("<I", 0)
    return jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(body) + 2) + body + jpeg[2:]


@pytest.fixture
def folder(tmp_path):
    """Class folders holding what a photo folder holds: plain, gray, CMYK, rotated JPEGs, a PNG."""
    root = tmp_path / "photos"
    files = {
        "a/plain.jpg": _jpeg(_image(), 80),
        "a/gray.jpg": _jpeg(_image()[:, :, 0], 85),
        "b/cmyk.jpg": simplejpeg.encode_jpeg(np.dstack([_image(seed=2), _image(seed=3)[:, :, :1]]),
                                             colorspace="CMYK"),
        "b/rotated.jpg": _with_orientation(cv2.imencode(".jpg", _image(20, 50))[1].tobytes(), 6),
        "b/drawing.png": cv2.imencode(".png", _image(seed=4))[1].tobytes(),
    }
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root, files


def _payloads(rec):
    reader = recpipe.RecordReader(str(rec))
    try:
        return [recpipe.unpack(reader[i])[1] for i in range(len(reader))]
    finally:
        reader.close()


def test_by_default_jpegs_keep_their_pixels_and_only_what_must_is_reencoded(folder, tmp_path):
    root, files = folder
    summary = pack_dataset(str(root), str(tmp_path / "o"), shuffle=False, workers=1)
    # kept JPEGs get restart markers by default (recpipe.image.restart): same pixels
    assert summary.actions == {"restarted": 2, "re-encoded": 2, "transcoded": 1}
    payloads = _payloads(tmp_path / "o.rec")
    originals = [cv2.imdecode(np.frombuffer(files[name], np.uint8), cv2.IMREAD_UNCHANGED)
                 for name in ("a/plain.jpg", "a/gray.jpg")]
    kept = [p for p in payloads if any(
        np.array_equal(cv2.imdecode(np.frombuffer(p, np.uint8), cv2.IMREAD_UNCHANGED), o)
        for o in originals)]
    assert len(kept) == 2  # pixel for pixel: no lossy generation
    assert not set(kept) & set(files.values())  # rewritten with restart markers
    plain = pack_dataset(str(root), str(tmp_path / "p"), shuffle=False, workers=1, restart="off")
    assert plain.actions == {"kept": 2, "re-encoded": 2, "transcoded": 1}
    assert {files["a/plain.jpg"], files["a/gray.jpg"]} <= set(_payloads(tmp_path / "p.rec"))
    rest = [p for p in payloads if p not in kept]
    assert all(p[:3] == b"\xff\xd8\xff" for p in rest)  # PNG, CMYK, rotated: now plain JPEGs
    shapes = sorted(cv2.imdecode(np.frombuffer(p, np.uint8), cv2.IMREAD_UNCHANGED).shape
                    for p in rest)
    assert shapes == [(30, 40, 3), (30, 40, 3), (50, 20, 3)]  # CMYK -> 3 channels; rotated
    assert summary.to_dict()["actions"] == summary.actions


@pytest.mark.parametrize("asked", [dict(resize=16), dict(center_crop=True), dict(quality=90),
                                   dict(encoding=".png"), dict(color=0), dict(keep_jpeg=False)])
def test_an_option_that_asks_for_a_change_reencodes_every_image(folder, tmp_path, asked):
    root, files = folder
    summary = pack_dataset(str(root), str(tmp_path / "o"), shuffle=False, workers=1, **asked)
    assert summary.actions == {"re-encoded": 4, "transcoded": 1}
    assert not set(_payloads(tmp_path / "o.rec")) & set(files.values())


def test_pack_says_what_it_kept_and_reencoded(folder, tmp_path, capsys):
    root, files = folder
    assert main(["pack", str(root), str(tmp_path / "o"), "--no-progress", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert ("  images: 2 JPEGs kept losslessly with restart markers (same pixels); 2 JPEGs "
            "re-encoded (decoded and encoded again, lossy); 1 transcoded from other formats to "
            "the output format") in out
    assert main(["pack", str(root), str(tmp_path / "k"), "--no-progress", "--workers", "1",
                 "--restart", "off"]) == 0
    out = capsys.readouterr().out
    assert ("  images: 2 kept as they were (no re-encode); 2 JPEGs re-encoded (decoded and "
            "encoded again, lossy); 1 transcoded from other formats to the output format") in out
    assert main(["pack", str(root), str(tmp_path / "r"), "--no-progress", "--workers", "1",
                 "--reencode"]) == 0
    assert "images: 4 JPEGs re-encoded" in capsys.readouterr().out
    assert files["a/plain.jpg"] not in _payloads(tmp_path / "r.rec")
