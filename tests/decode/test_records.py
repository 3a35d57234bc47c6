"""RecordDecoder: one read -> label -> plan -> decode -> augment sequence; its native runs
(recpipe._batch) give exactly the Python path's pixels, labels and random draws, and leave
every unusual record or image to the Python path."""

import struct

import cv2
import numpy as np
import pytest

import recpipe
from recpipe._optional import extension
from recpipe.decode.augment import AugmentConfig, Augmenter, sample_rng
from recpipe.decode.decoders import get_decoder
from recpipe.decode.records import RecordDecoder
from recpipe.errors import DecodeError, RecordFormatError
from recpipe.io.reader import RecordReader

native = pytest.mark.skipif(extension("_batch") is None, reason="recpipe._batch is not built")
NORM = dict(mean_r=127.5, mean_g=127.5, mean_b=127.5, std_r=127.5, std_g=127.5, std_b=127.5)


def _image(h, w, seed):
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    return cv2.GaussianBlur(img, (5, 5), 0)


def _jpeg(img, **params):
    flags = [cv2.IMWRITE_JPEG_QUALITY, 90]
    if params.get("progressive"):
        flags += [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]
    if params.get("sampling"):
        flags += [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, params["sampling"]]
    return cv2.imencode(".jpg", img, flags)[1].tobytes()


def _write(path, payloads):
    with recpipe.RecordWriter(str(path)) as writer:
        for payload in payloads:
            writer.write(payload)
    return str(path)


def _faces(tmp_path, count=24):
    """Face-like records: 112x112 and larger JPEGs, gray, progressive, 4:4:4, packed labels."""
    payloads = []
    for i in range(count):
        h, w = (112, 112) if i % 3 else (130 + i, 150 - i)
        img = _image(h, w, i)
        if i % 7 == 3:
            img = cv2.cvtColor(cv2.cvtColor(img, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR)
            data = cv2.imencode(".jpg", img[:, :, 0])[1].tobytes()  # a 1-channel JPEG
        else:
            data = _jpeg(img, progressive=i % 5 == 1,
                         sampling=cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444 if i % 4 == 2 else None)
        label = [float(i), float(100 + i)] if i % 2 else float(i)
        payloads.append(recpipe.pack(recpipe.IRHeader(0, label, i, 0), data))
    return _write(tmp_path / "faces.rec", payloads)


def _decoders(rec, label_width=1, **augment):
    reader = RecordReader(rec)
    augmenter = Augmenter(AugmentConfig.from_kwargs(**augment))
    decoder = get_decoder("auto")
    fast = RecordDecoder(reader, decoder, augmenter, label_width=label_width, seed=11)
    return reader, fast


def _python_fill(records, slots, positions, samples, epoch, images, labels):
    for slot, position, sample in zip(slots, positions, samples):
        labels[slot] = records.decode_into(images[slot], int(position), int(sample), epoch)


@native
@pytest.mark.parametrize("seed,epoch,sample", [(0, 0, 0), (7, 3, 12345), (11, 1, 2 ** 40 + 3),
                                               ((1 << 100) + 5, 2 ** 33, 9)])
def test_native_random_draws_equal_numpys_philox_stream(seed, epoch, sample):
    mask = (1 << 64) - 1
    expected = sample_rng(seed, epoch, sample).random(64).tolist()
    assert extension("_batch").uniforms(seed & mask, seed >> 64, sample, epoch, 64) == expected


CONFIGS = [
    dict(data_shape=(3, 112, 112), rand_mirror=True, dtype="float32", **NORM),
    dict(data_shape=(3, 112, 112), rand_mirror=True, dtype="uint8"),
    dict(data_shape=(3, 96, 100), rand_crop=True, rand_mirror=True, dtype="float32", **NORM),
    dict(data_shape=(3, 100, 96), mirror=True, dtype="float32", layout="NHWC", scale=0.5),
    dict(data_shape=(3, 112, 112), dtype="uint8", layout="NHWC", rand_crop=True),
    dict(data_shape=(3, 112, 112), rand_mirror=True, dtype="float16", **NORM),  # float16
    dict(data_shape=(3, 96, 100), rand_crop=True, dtype="float16", layout="NHWC", scale=0.5),
]


@native
@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("label_width", [1, 2])
def test_native_runs_equal_the_python_path(tmp_path, config, label_width, monkeypatch):
    rec = _faces(tmp_path)
    reader, records = _decoders(rec, label_width, **config)
    with reader:
        count = len(reader)
        if label_width == 2:  # only the records with packed labels qualify
            positions = np.arange(1, count, 2)
        else:
            positions = np.arange(count)
        samples = (positions * 7 + 3) % 1000
        slots = np.arange(len(positions))[::-1].copy()  # any slot order
        shape = (len(positions),) + records.augmenter.out_shape
        label_shape = (len(positions),) if label_width == 1 else (len(positions), label_width)
        expected = np.zeros(shape, records.augmenter.dtype)
        expected_labels = np.zeros(label_shape, np.float32)
        _python_fill(records, slots, positions, samples, 4, expected, expected_labels)
        # every sample must be done natively: the Python path would raise
        monkeypatch.setattr(records, "decode_into", _not_called)
        assert records.native
        images = np.full(shape, 7, records.augmenter.dtype)
        labels = np.zeros(label_shape, np.float32)
        assert records.fill(images, labels, slots, positions, samples, 4) == []
    np.testing.assert_array_equal(images, expected)
    np.testing.assert_array_equal(labels, expected_labels)


def _photos(tmp_path, count=16):
    """Photo-sized records: odd sizes, portrait and landscape, some well above the output (so
    that DCT scales 1/2 to 1/8 are chosen), progressive and gray ones."""
    sizes = [(300, 400), (257, 190), (500, 333), (96, 130), (640, 480), (181, 181), (420, 97),
             (333, 517)]
    payloads = []
    for i in range(count):
        h, w = sizes[i % len(sizes)]
        img = _image(h, w, 100 + i)
        if i % 6 == 5:
            data = cv2.imencode(".jpg", cv2.cvtColor(img, cv2.COLOR_BGR2GRAY))[1].tobytes()
        else:
            data = _jpeg(img, progressive=i % 4 == 1)
        payloads.append(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), data))
    return _write(tmp_path / "photos.rec", payloads)


RESAMPLING = [
    dict(data_shape=(3, 64, 64), resize=72),                                    # val
    dict(data_shape=(3, 64, 64), resize=72, dtype="float32", layout="NHWC", **NORM),
    dict(data_shape=(3, 56, 64), random_resized_crop=True, min_random_area=0.08,
         min_aspect_ratio=0.75, max_aspect_ratio=4 / 3, rand_mirror=True),      # train
    dict(data_shape=(3, 64, 64), random_resized_crop=True, min_random_area=0.3,
         max_aspect_ratio=0.25, rand_mirror=True, resize=120, dtype="float32", **NORM),
    dict(data_shape=(3, 48, 40), resize=60, rand_crop=True, mirror=True),
    dict(data_shape=(3, 90, 90), rand_crop=True, rand_mirror=True),             # some upscale
    dict(data_shape=(3, 56, 64), random_resized_crop=True, min_random_area=0.08,
         min_aspect_ratio=0.75, max_aspect_ratio=4 / 3, rand_mirror=True, brightness=0.4,
         contrast=0.4, saturation=0.4, dtype="float32", **NORM),               # colour jitter
    dict(data_shape=(3, 64, 64), resize=72, saturation=0.5, layout="NHWC"),
    dict(data_shape=(3, 90, 90), contrast=0.3, rand_mirror=True, rand_crop=True),  # contrast
    dict(data_shape=(3, 56, 64), random_resized_crop=True, min_random_area=0.08,
         min_aspect_ratio=0.75, max_aspect_ratio=4 / 3, rand_mirror=True, dtype="float16",
         **NORM),                                                               # float16
]


@native
@pytest.mark.parametrize("config", RESAMPLING)
def test_native_resizing_runs_equal_the_python_path(tmp_path, config):
    rec = _photos(tmp_path)
    reader, records = _decoders(rec, **config)
    python_path = records.decode_into
    with reader:
        assert records.native
        positions = np.arange(len(reader))
        for epoch in (0, 3):
            samples = positions * 13 + epoch
            shape = (len(positions),) + records.augmenter.out_shape
            expected = np.zeros(shape, records.augmenter.dtype)
            records.decode_into = python_path
            _python_fill(records, positions, positions, samples, epoch, expected,
                         np.zeros(len(positions), np.float32))
            records.decode_into = _not_called  # every sample is done natively
            images = np.full(shape, 3, records.augmenter.dtype)
            failures = records.fill(images, np.zeros(len(positions), np.float32), positions,
                                    positions, samples, epoch)
            assert failures == []
            np.testing.assert_array_equal(images, expected)


@native
def test_native_runs_leave_only_upscaled_images_to_python(tmp_path, monkeypatch):
    rec = _photos(tmp_path)
    reader, records = _decoders(rec, data_shape=(3, 64, 64), resize=72, rand_mirror=True)
    python_path = []
    decode_into = records.decode_into

    def counted(out, position, sample, epoch, clock=None):
        python_path.append(position)
        return decode_into(out, position, sample, epoch, clock)

    monkeypatch.setattr(records, "decode_into", counted)
    with reader:
        positions = np.arange(len(reader))
        images = np.zeros((len(positions),) + records.augmenter.out_shape, np.uint8)
        assert records.fill(images, np.zeros(len(positions), np.float32), positions, positions,
                            positions, 0) == []
    assert python_path == []  # resized to 72 first: no image is smaller than the output


def _not_called(*args, **kwargs):
    raise AssertionError("left to the Python path")


def _unusual_payloads(tmp_path):
    """Records the native path must leave to Python, with what Python makes of each."""
    small = _jpeg(_image(60, 80, 1))                      # smaller than the output: upscaled
    png = cv2.imencode(".png", _image(120, 120, 2))[1].tobytes()
    corrupt = _jpeg(_image(120, 120, 3))
    corrupt = corrupt[:len(corrupt) // 2]                 # truncated: an error in strict mode
    magic = struct.pack("<I", 0xced7230a)
    with_magic = _jpeg(_image(120, 120, 4))
    with_magic = with_magic[:-2] + magic + with_magic[-2:]  # a multi-part record when packed
    header = recpipe.IRHeader(0, 1.0, 0, 0)
    return [recpipe.pack(header, small), recpipe.pack(header, png), recpipe.pack(header, corrupt),
            recpipe.pack(header, with_magic), recpipe.pack(header, _jpeg(_image(112, 112, 5))),
            b"\x01\x00"]  # payload shorter than the image header


@native
def test_unusual_records_go_through_the_python_path(tmp_path):
    rec = _write(tmp_path / "odd.rec", _unusual_payloads(tmp_path))
    reader, records = _decoders(rec, data_shape=(3, 112, 112), dtype="float32", **NORM)
    with reader:
        positions = np.arange(len(reader))
        images = np.zeros((len(positions), 3, 112, 112), np.float32)
        labels = np.zeros(len(positions), np.float32)
        failures = records.fill(images, labels, positions, positions, positions, 0)
        expected = np.zeros_like(images)
        for position in (0, 1, 3, 4):  # decodable: equal to the Python path's pixels
            records.decode_into(expected[position], position, position, 0)
            np.testing.assert_array_equal(images[position], expected[position])
    failed = dict(failures)
    assert sorted(failed) == [2, 5]
    assert isinstance(failed[2], DecodeError) and failed[2].record == 2
    assert isinstance(failed[5], RecordFormatError) and failed[5].record == 5


@native
def test_max_pixels_is_enforced_on_the_native_path(tmp_path):
    rec = _write(tmp_path / "big.rec",
                 [recpipe.pack(recpipe.IRHeader(0, 0.0, 0, 0), _jpeg(_image(200, 200, 1)))])
    reader = RecordReader(rec)
    augmenter = Augmenter(AugmentConfig.from_kwargs(data_shape=(3, 112, 112)))
    records = RecordDecoder(reader, get_decoder("auto", max_pixels=30000), augmenter)
    with reader:
        assert records.native
        images = np.zeros((1, 3, 112, 112), augmenter.dtype)
        (slot, error), = records.fill(images, np.zeros(1, np.float32), [0], [0], [0], 0)
    assert slot == 0 and isinstance(error, DecodeError) and "max_pixels" in str(error)


def test_configurations_once_beyond_the_c_kernels_are_native_with_the_same_pixels(tmp_path):
    """Gray output with colour jitter, a resize step before the affine warp, pad with a
    random-resized crop, PCA lighting with the warp, a resize step without DCT scaling: these
    took the Python path before the renderer was one library; now C renders them, and the
    Python path (the same renderer, fed by the Python decoders) gives the same pixels."""
    rec = _faces(tmp_path, count=4)
    for config in (dict(data_shape=(1, 64, 64), brightness=0.3),  # gray + jitter
                   dict(data_shape=(3, 64, 64), max_rotate_angle=10, resize=80),  # resize first
                   dict(data_shape=(3, 64, 64), pad=4, random_resized_crop=True,
                        min_random_area=0.5),
                   dict(data_shape=(3, 64, 64), max_rotate_angle=10, pca_noise=0.1),  # + PCA
                   dict(data_shape=(3, 64, 64), resize=80, dct_scaling=False)):
        reader, records = _decoders(rec, **config)
        with reader:
            if extension("_batch") is None:
                assert not records.native
                continue
            assert records.native, config
            shape = (4,) + records.augmenter.out_shape
            native = np.zeros(shape, records.augmenter.dtype)
            python = np.zeros(shape, records.augmenter.dtype)
            labels = np.zeros(4, np.float32)
            assert records.fill(native, labels, range(4), range(4), range(4), 0) == []
            _python_fill(records, range(4), range(4), range(4), 0, python, labels)
            np.testing.assert_array_equal(native, python, err_msg=str(config))
    with open(rec, "rb") as f:
        data = f.read()
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/records/faces.rec", data)
    with open(rec[:-4] + ".idx", "rb") as f:
        fs.pipe("/records/faces.idx", f.read())
    try:
        reader, records = _decoders("memory://records/faces.rec", data_shape=(3, 112, 112))
        with reader:
            assert records.native == (extension("_batch") is not None)  # payloads handed to C
            images = np.zeros((4, 3, 112, 112), records.augmenter.dtype)
            assert records.fill(images, np.zeros(4, np.float32), range(4), range(4), range(4),
                                0) == []
            assert images.any()
    finally:
        fs.rm("/records", recursive=True)


def test_decode_returns_image_and_label(tmp_path):
    rec = _faces(tmp_path, count=2)
    reader, records = _decoders(rec, data_shape=(3, 112, 112), rand_mirror=True)
    with reader:
        image, label = records.decode(0, 0, 0)
        whole = RecordDecoder(reader, get_decoder("auto"))
        raw, raw_label = whole.decode(1, 1, 0)
    assert image.shape == (3, 112, 112) and image.dtype == records.augmenter.dtype
    assert label == 0.0
    assert raw.shape == (112, 112, 3) and raw_label == 1.0


@pytest.mark.parametrize("threads", [1, 2])
def test_loader_batches_equal_the_python_path_of_their_positions(tmp_path, threads):
    """Whatever the threads, each slot holds what the Python path makes of its record (without
    ``keys`` a sample's index is its record position, which keys its random draws)."""
    from recpipe.decode.loader import ImageLoader

    rec = _faces(tmp_path, count=40)
    config = dict(data_shape=(3, 100, 100), rand_mirror=True, rand_crop=True, **NORM)
    with ImageLoader(rec, 16, threads=threads, shuffle=True, seed=5, **config) as loader:
        assert loader.records.native == (extension("_batch") is not None)
        for _ in range(2):
            for batch in loader:
                for image, label, position in zip(*batch, batch.positions):
                    expected = np.empty_like(image)
                    assert loader.records.decode_into(expected, int(position), int(position),
                                                      loader.epoch) == label
                    np.testing.assert_array_equal(image, expected)


def test_native_run_decoder_built_when_required():
    """tools/test.sh sets RECPIPE_REQUIRE_JPEGROI=1 after installing the libjpeg headers, which
    recpipe._batch needs too: then the native tests above must not be skipped."""
    import os

    if os.environ.get("RECPIPE_REQUIRE_JPEGROI") != "1":
        pytest.skip("RECPIPE_REQUIRE_JPEGROI is not set")
    assert extension("_batch") is not None, "recpipe._batch was not built"


@native
@pytest.mark.parametrize("config", CONFIGS[:3])
def test_remote_runs_decode_fetched_payloads_natively_as_the_python_path(tmp_path, config,
                                                                          monkeypatch):
    """A remote file (memory://): the payloads are read through the reader and decoded by C from
    one buffer; pixels and labels equal the Python path's; an unreadable record is left to the
    Python path, which raises its precise error."""
    import fsspec

    rec = _faces(tmp_path)
    fs = fsspec.filesystem("memory")
    with open(rec, "rb") as f:
        data = bytearray(f.read())
    with open(rec[:-4] + ".idx", "rb") as f:
        fs.pipe("/remote/faces.idx", f.read())
    with RecordReader(rec) as local:
        bad_start, _ = local.span(3)
    data[bad_start:bad_start + 4] = b"\0\0\0\0"  # record 3 loses its magic
    fs.pipe("/remote/faces.rec", bytes(data))
    try:
        reader, records = _decoders("memory://remote/faces.rec", **config)
        with reader:
            assert records.native
            positions = np.array([p for p in range(len(reader)) if p != 3])
            samples = positions * 5 + 1
            slots = np.arange(len(positions))
            shape = (len(positions),) + records.augmenter.out_shape
            expected = np.zeros(shape, records.augmenter.dtype)
            expected_labels = np.zeros(len(positions), np.float32)
            _python_fill(records, slots, positions, samples, 2, expected, expected_labels)
            images = np.full(shape, 7, records.augmenter.dtype)
            labels = np.zeros(len(positions), np.float32)
            monkeypatch.setattr(records, "decode_into", _not_called)
            assert records.fill(images, labels, slots, positions, samples, 2) == []
            monkeypatch.undo()
            np.testing.assert_array_equal(images, expected)
            np.testing.assert_array_equal(labels, expected_labels)
            one = np.zeros((1,) + records.augmenter.out_shape, records.augmenter.dtype)
            (slot, error), = records.fill(one, np.zeros(1, np.float32), [0], [3], [3], 2)
            assert slot == 0 and isinstance(error, RecordFormatError) and error.record == 3
    finally:
        fs.rm("/remote", recursive=True)
