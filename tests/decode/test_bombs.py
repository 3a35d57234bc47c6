"""Decompression and aspect bombs: work and memory per sample are bounded by the output size
and ``max_pixels``, on every decoder and path."""

import os
import struct
import subprocess
import sys
import textwrap

import cv2
import numpy as np
import pytest

import recpipe
from recpipe.decode import augment as augment_module
from recpipe.decode.augment import render
from recpipe.decode.decoders import DEFAULT_MAX_PIXELS, available_decoders, get_decoder
from recpipe.decode.loader import ImageLoader
from recpipe.errors import DecodeError

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _jpeg(img, quality=90):
    return cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, quality])[1].tobytes()


def declaring(jpeg, height, width):
    """``jpeg`` with its SOF segment claiming ``height`` x ``width`` (the data stays small)."""
    data = bytearray(jpeg)
    pos = 2
    while data[pos + 1] not in (0xC0, 0xC1, 0xC2):
        pos += 2 + struct.unpack_from(">H", data, pos + 2)[0]
    struct.pack_into(">HH", data, pos + 5, height, width)
    return bytes(data)


def png_declaring(height, width):
    png = bytearray(cv2.imencode(".png", np.zeros((8, 8, 3), np.uint8))[1].tobytes())
    struct.pack_into(">II", png, 16, width, height)
    return bytes(png)


SMALL = _jpeg(np.full((16, 16, 3), 128, np.uint8))
BOMBS = {"jpeg 20000x20000": declaring(SMALL, 20000, 20000),
         "jpeg 65500x65500": declaring(SMALL, 65500, 65500),
         "png 30000x30000": png_declaring(30000, 30000)}


@pytest.mark.parametrize("name", available_decoders())
@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_every_decoder_refuses_a_declared_huge_image_before_decoding(name, bomb):
    decoder = get_decoder(name)
    data = BOMBS[bomb]
    with pytest.raises(DecodeError, match="max_pixels"):
        decoder.size(data)
    with pytest.raises(DecodeError, match="max_pixels"):
        decoder.decode(data)
    with pytest.raises(DecodeError, match="max_pixels"):
        decoder.decode_region(data, (0, 0, 8, 8))


def test_max_pixels_is_configurable():
    data = _jpeg(np.full((40, 50, 3), 90, np.uint8))
    with pytest.raises(DecodeError, match="2000 pixels"):
        get_decoder("opencv", max_pixels=1999).decode(data)
    assert get_decoder("opencv", max_pixels=2000).decode(data).shape == (40, 50, 3)
    assert get_decoder("opencv", max_pixels=None).size(BOMBS["jpeg 20000x20000"]) == (20000, 20000)
    assert DEFAULT_MAX_PIXELS == 89_478_485
    with pytest.raises(ValueError, match="max_pixels"):
        get_decoder("opencv", max_pixels=0)


def test_a_bomb_in_a_loader_is_a_decode_error_under_the_policy(tmp_path):
    rec = str(tmp_path / "bombs.rec")
    with recpipe.RecordWriter(rec) as writer:
        for i, data in enumerate([SMALL, BOMBS["jpeg 20000x20000"], SMALL,
                                  BOMBS["png 30000x30000"]]):
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), data))
    with ImageLoader(rec, 4, (3, 16, 16), threads=2, pad=2) as loader:
        with pytest.raises(DecodeError, match="max_pixels") as caught:
            list(loader)
    assert caught.value.record in (1, 3) and caught.value.path == rec
    with ImageLoader(rec, 4, (3, 16, 16), threads=2, on_error="skip",
                     max_rotate_angle=10) as loader:
        (images, labels), = list(loader)
        assert labels.tolist() == [0.0, 2.0]
        assert loader.stats()["skipped"] == 2


BOMB_SCRIPT = textwrap.dedent("""
    import resource, sys
    import cv2, numpy as np, recpipe
    from recpipe.decode.loader import ImageLoader
    img = np.zeros((1, 65500, 3), np.uint8)
    img[:, ::2] = 200
    with recpipe.RecordWriter(sys.argv[1]) as writer:
        writer.write(recpipe.pack(recpipe.IRHeader(0, 1.0, 0, 0), cv2.imencode(".jpg",
        img)[1].tobytes()))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with ImageLoader(sys.argv[1], 1, (3, 224, 224), threads=1, **eval(sys.argv[2])) as loader:
        images, _ = next(iter(loader))
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    rows_equal = bool((images[0] == images[0][:, :1, :]).all())  # one source row everywhere
    print(grown // 1024, rows_equal, float(images.mean()))
""")


@pytest.mark.parametrize("options", ["{}", "{'rand_crop': True}", "{'dct_scaling': False}"])
def test_an_aspect_bomb_costs_what_the_output_costs(tmp_path, options):
    """A valid 15 KB 1x65500 JPEG: upscaled whole before the crop it would take ~10 GB."""
    done = subprocess.run([sys.executable, "-c", BOMB_SCRIPT, str(tmp_path / "aspect.rec"),
                           options],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=REPO_ROOT))
    assert done.returncode == 0, done.stderr[-2000:]
    grown_mb, rows_equal, mean = done.stdout.split()
    assert int(grown_mb) < 200, done.stdout  # peak RSS growth for one sample
    assert rows_equal == "True" and float(mean) > 20, done.stdout


def test_cropping_before_upscaling_matches_the_full_upscale(monkeypatch):
    """The bounded path samples where the full resize does (within interpolation rounding)."""
    img = cv2.resize(np.random.default_rng(0).integers(0, 255, (6, 9, 3), dtype=np.uint8),
                     (30, 20), interpolation=cv2.INTER_LINEAR)
    data = _jpeg(img, 95)
    decoder = get_decoder("opencv")
    outputs = []
    for limit in (1 << 30, 0):  # exact full upscale, then crop-first
        monkeypatch.setattr(render, "EXACT_UPSCALE_PIXELS", limit)
        augmenter = augment_module.Augmenter(augment_module.AugmentConfig.from_kwargs(
            data_shape=(3, 96, 96), dtype="uint8", rand_crop=True))
        out = np.empty(augmenter.out_shape, np.uint8)
        pixels, plan, window = augmenter.decode_planned(decoder, data,
                                                        augment_module.sample_rng(3, 0, 1))
        assert plan.upscale is not None
        augmenter.apply(pixels, plan, out, window=window)
        outputs.append(out.astype(int))
    assert np.abs(outputs[0] - outputs[1]).max() <= 2
