"""The differential harness of the native contract, shared by test_native_contract.py and
test_native_random.py: JPEG kinds packed into one ``.rec``, a value space for every
``AugmentConfig`` field, and ``native_and_python``, which renders the same samples through
``recpipe._batch.fill`` (called directly, so nothing the C leaves is silently redone in Python)
and through the Python path (``RecordDecoder.decode_into``, the reference).

``SPACE`` draws values for every AugmentConfig field; a field it does not know is drawn from its
type and default (``draw_value``), so a field added to ``NATIVE_AUGMENT_FIELDS`` is exercised by
the randomized test as soon as it is allowed, with no change here.
"""

import dataclasses
import struct
from concurrent.futures import ThreadPoolExecutor

import cv2
import numpy as np

import recpipe
from recpipe.errors import DecodeError
from recpipe.decode.augment import AugmentConfig, Augmenter
from recpipe.decode.native import native_module, run_options
from recpipe.decode.records import RecordDecoder

_MASK64 = (1 << 64) - 1
DEFAULTS = {f.name: f.default for f in dataclasses.fields(AugmentConfig)
            if f.default is not dataclasses.MISSING}


# -- JPEG kinds --------------------------------------------------------------------------------

def _exif_segment():
    """An APP1 Exif segment with a little-endian TIFF header and one empty IFD (no orientation)."""
    tiff = b"II*\x00" + struct.pack("<I", 8) + struct.pack("<H", 0) + struct.pack("<I", 0)
    body = b"Exif\x00\x00" + tiff
    return b"\xff\xe1" + struct.pack(">H", len(body) + 2) + body


def _segment(marker, body):
    return bytes([0xFF, marker]) + struct.pack(">H", len(body) + 2) + body


def with_app_segments(data):
    """``data`` (a JPEG) with an Exif APP1, an APP13 and a COM segment after its SOI."""
    extra = (_exif_segment() + _segment(0xED, b"Photoshop 3.0\x00" + bytes(20))
             + _segment(0xFE, b"recpipe differential test"))
    return data[:2] + extra + data[2:]


def _encode(img, kind, rng):
    flags = [cv2.IMWRITE_JPEG_QUALITY, int(rng.integers(60, 98))]
    if kind == "gray":
        img = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
    sampling = {"420": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420,
                "422": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422,
                "444": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444}
    if kind in sampling:
        flags += [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, sampling[kind]]
    if kind == "progressive":
        flags += [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]
    if kind == "restart":
        flags += [cv2.IMWRITE_JPEG_RST_INTERVAL, int(rng.integers(1, 5))]
    data = cv2.imencode(".jpg", img, flags)[1].tobytes()
    return with_app_segments(data) if kind == "app" else data


# (kind, height range): baseline 4:2:0/4:2:2/4:4:4, progressive, gray, restart markers, Exif and
# other APP segments; odd sizes throughout, and tiny images (smaller than most outputs)
KINDS = ("420", "422", "444", "progressive", "gray", "restart", "app", "tiny")


def pack_kinds(path, rng, per_kind=2):
    """A ``.rec`` of ``per_kind`` JPEGs of every kind (labels: the record's index); returns
    ``(path, kinds)``."""
    kinds = []
    with recpipe.RecordWriter(str(path)) as writer:
        for index in range(per_kind * len(KINDS)):
            kind = KINDS[index % len(KINDS)]
            if kind == "tiny":
                h, w = int(rng.integers(1, 12)), int(rng.integers(1, 12))
                encoded_as = str(rng.choice(["420", "444", "gray"]))
            else:
                h, w = int(rng.integers(17, 241)) | 1, int(rng.integers(17, 241))  # odd heights
                encoded_as = kind
            noise = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            img = cv2.GaussianBlur(noise, (5, 5), 0) if min(h, w) >= 5 else noise
            data = _encode(img, encoded_as, rng)
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(index), index, 0), data))
            kinds.append(kind)
    return str(path), kinds


# -- the value space ---------------------------------------------------------------------------

def _maybe(rng, default, draw, chance=0.5):
    return draw() if rng.random() < chance else default


def _draw_rrc(rng, values):
    low_area = float(rng.uniform(0.05, 1.0))
    values["min_random_area"] = low_area
    values["max_random_area"] = float(rng.uniform(low_area, 1.0))
    low = float(rng.uniform(0.3, 1.0))
    values["min_aspect_ratio"] = _maybe(rng, None, lambda: low, 0.8)
    values["max_aspect_ratio"] = float(rng.uniform(1.0, 1 / low))


# field -> draw(rng, h, w): a value other than (mostly) the default, valid for AugmentConfig
SPACE = {
    "resize": lambda rng, h, w: int(rng.integers(max(2, min(h, w) // 2), 2 * max(h, w) + 3)),
    "rand_crop": lambda rng, h, w: bool(rng.integers(2)),
    "random_resized_crop": lambda rng, h, w: True,
    "min_random_area": lambda rng, h, w: float(rng.uniform(0.05, 1.0)),
    "max_random_area": lambda rng, h, w: float(rng.uniform(0.5, 1.0)),
    "min_aspect_ratio": lambda rng, h, w: float(rng.uniform(0.3, 1.0)),
    # alone, MXNet's aspect jitter: [1 - m, 1 + m] (with random_resized_crop: _draw_rrc)
    "max_aspect_ratio": lambda rng, h, w: float(rng.uniform(0.0, 0.9)),
    "rand_mirror": lambda rng, h, w: bool(rng.integers(2)),
    "mirror": lambda rng, h, w: True,
    "brightness": lambda rng, h, w: float(rng.uniform(0.0, 0.6)),
    "contrast": lambda rng, h, w: float(rng.uniform(0.0, 0.6)),
    "saturation": lambda rng, h, w: float(rng.uniform(0.0, 0.6)),
    "pca_noise": lambda rng, h, w: float(rng.uniform(0.0, 0.5)),
    "pad": lambda rng, h, w: int(rng.integers(1, 9)),
    "fill_value": lambda rng, h, w: int(rng.integers(0, 256)),
    "mean_r": lambda rng, h, w: float(rng.uniform(0, 255)),
    "mean_g": lambda rng, h, w: float(rng.uniform(0, 255)),
    "mean_b": lambda rng, h, w: float(rng.uniform(0, 255)),
    "std_r": lambda rng, h, w: float(rng.uniform(0.5, 90)),
    "std_g": lambda rng, h, w: float(rng.uniform(0.5, 90)),
    "std_b": lambda rng, h, w: float(rng.uniform(0.5, 90)),
    # float16 extremes: subnormal results (tiny scales) and overflow to inf (large ones)
    "scale": lambda rng, h, w: float(10.0 ** rng.uniform(-9, 4)),
    "inter_method": lambda rng, h, w: int(rng.choice([0, 1, 2, 3, 4, 9, 10])),
    "max_rotate_angle": lambda rng, h, w: int(rng.integers(1, 40)),
    "rotate": lambda rng, h, w: int(rng.integers(0, 360)),
    "rotate_list": lambda rng, h, w: tuple(int(a) for a in rng.integers(0, 360, 3)),
    "max_shear_ratio": lambda rng, h, w: float(rng.uniform(0.01, 0.4)),
    "max_random_scale": lambda rng, h, w: float(rng.uniform(1.0, 1.6)),
    "min_random_scale": lambda rng, h, w: float(rng.uniform(0.5, 1.0)),
    "max_img_size": lambda rng, h, w: float(rng.integers(max(h, w), 4 * max(h, w) + 1)),
    "min_img_size": lambda rng, h, w: float(rng.integers(1, max(h, w) + 1)),
    "max_crop_size": lambda rng, h, w: int(rng.integers(max(h, w), 2 * max(h, w) + 1)),
    "min_crop_size": lambda rng, h, w: int(rng.integers(max(1, min(h, w) // 2), max(h, w) + 1)),
    "random_h": lambda rng, h, w: int(rng.integers(1, 181)),
    "random_s": lambda rng, h, w: int(rng.integers(1, 101)),
    "random_l": lambda rng, h, w: int(rng.integers(1, 101)),
    "max_random_contrast": lambda rng, h, w: float(rng.uniform(0.0, 0.6)),
    "max_random_illumination": lambda rng, h, w: float(rng.uniform(0.0, 40.0)),
    "dtype": lambda rng, h, w: str(rng.choice(["uint8", "float32", "float16"])),
    "layout": lambda rng, h, w: str(rng.choice(["NCHW", "NHWC"])),
    "dct_scaling": lambda rng, h, w: bool(rng.integers(2)),
}


def draw_value(name, rng, h, w):
    """A value for ``AugmentConfig.name``: from ``SPACE``, else from its default's type."""
    if name in SPACE:
        return SPACE[name](rng, h, w)
    default = DEFAULTS[name]
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default + int(rng.integers(1, 5))
    if isinstance(default, float):
        return default + float(rng.uniform(0.05, 0.5))
    return default  # an unknown str/tuple field: only its default is known to be valid


# what uint8 output (raw pixels, as ImageRecordUInt8Iter) refuses
NORMALISING = frozenset({"mean_r", "mean_g", "mean_b", "std_r", "std_g", "std_b", "scale",
                         "max_random_contrast", "max_random_illumination"})


# MXNet's affine step and pad, and the fields that went with them into C last (a resize step,
# random-resized crops, HLS, PCA, ...): a configuration draws from one side, the other or (15%)
# both
GEOMETRIC = frozenset({"max_rotate_angle", "rotate", "rotate_list", "max_shear_ratio",
                       "max_random_scale", "min_random_scale", "max_img_size", "min_img_size",
                       "pad", "fill_value"})
NOT_GEOMETRIC = frozenset({"resize", "random_resized_crop", "min_random_area", "max_random_area",
                           "min_aspect_ratio", "random_h", "random_s", "random_l", "pca_noise",
                           "max_random_contrast", "max_random_illumination", "inter_method"})


def random_config(rng, fields, *, dct_off=0.2, geometric=0.35):
    """``(keywords, AugmentConfig or None)``: ``data_shape`` (3 or 1 channels, odd sizes) and
    each of ``fields`` (an allow-list) away from its default half of the time, from the
    ``GEOMETRIC`` side (probability ``geometric``) or the other; ``dct_scaling`` off with
    probability ``dct_off``. A combination AugmentConfig refuses is repaired by putting
    drawn fields back to their defaults, one at a time (None: still refused)."""
    h, w = int(rng.integers(4, 73)), int(rng.integers(4, 73))
    values = {"data_shape": (1 if rng.random() < 0.15 else 3, h, w)}  # gray output too
    side = rng.random()
    left_out = NOT_GEOMETRIC if side < geometric else (GEOMETRIC if side < 0.85 else frozenset())
    names = sorted(set(fields) - {"data_shape"} - left_out)
    if "dtype" in names and rng.random() < 0.75:
        values["dtype"] = draw_value("dtype", rng, h, w)
    for name in names:
        if name in values or (values.get("dtype") == "uint8" and name in NORMALISING):
            continue
        if rng.random() < 0.5:
            values[name] = draw_value(name, rng, h, w)
    if values.get("random_resized_crop"):
        _draw_rrc(rng, values)
    if rng.random() < dct_off:
        values["dct_scaling"] = False
    for _ in range(12):
        try:
            return values, AugmentConfig(**values)
        except (ValueError, NotImplementedError):
            drawn = sorted(set(values) - {"data_shape"})
            if not drawn:
                break
            del values[drawn[int(rng.integers(len(drawn)))]]
    return values, None  # still refused: uncounted


# the four kinds the kernel tests pack (a smaller set than KINDS)
BASIC_KINDS = ("gray", "420", "444", "progressive")


def pack_basic_kinds(path, *, seed, copies, sides, keyed=False):
    """``path``: ``copies`` x ``BASIC_KINDS`` blurred-noise JPEGs (quality 90), each side drawn
    from ``sides`` (low, high), labelled by position (written under their positions as keys
    with ``keyed``). Returns ``str(path)``."""
    rng = np.random.default_rng(seed)
    with recpipe.RecordWriter(str(path)) as writer:
        for i, kind in enumerate(BASIC_KINDS * copies):
            h, w = int(rng.integers(*sides)), int(rng.integers(*sides))
            img = cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (5, 5), 0)
            flags = [cv2.IMWRITE_JPEG_QUALITY, 90]
            if kind == "gray":
                img = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
            elif kind == "444":
                flags += [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444]
            elif kind == "progressive":
                flags += [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]
            data = cv2.imencode(".jpg", img, flags)[1].tobytes()
            payload = recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), data)
            writer.write(payload, i) if keyed else writer.write(payload)
    return str(path)


# -- native and Python, side by side -------------------------------------------------------------

class Rendered:
    """One configuration's samples: ``native`` (None when the gate refuses), ``python``, ``done``
    (bool per sample: C rendered it), ``labels`` (C's labels)."""

    def __init__(self, native, python, done, labels, options):
        self.native, self.python, self.done, self.labels = native, python, done, labels
        self.options = options

    def mismatches(self):
        """Indices of samples C rendered with pixels other than the Python path's."""
        if self.native is None:
            return []
        return [i for i in np.flatnonzero(self.done)
                if self.native[i].tobytes() != self.python[i].tobytes()]


def native_and_python(reader, decoder, config, *, seed, epoch, threads=1, augmenter=None):
    """Every record of ``reader`` rendered under ``config`` by ``recpipe._batch.fill`` (in
    ``threads`` concurrent calls over slices of the run) and by the Python path."""
    augmenter = Augmenter(config) if augmenter is None else augmenter
    records = RecordDecoder(reader, decoder, augmenter, seed=seed)
    positions = np.arange(len(reader), dtype=np.int64)
    samples = positions * 31 + epoch
    shape = (len(positions),) + augmenter.out_shape
    python = np.zeros(shape, augmenter.dtype)
    refused = np.zeros(len(positions), bool)  # the Python path raises (e.g. max_crop_size)
    for position, sample in zip(positions.tolist(), samples.tolist()):
        try:
            records.decode_into(python[position], position, sample, epoch)
        except DecodeError:
            refused[position] = True
    options = run_options(augmenter, decoder)
    if options is None or native_module() is None:
        return Rendered(None, python, np.zeros(len(positions), bool), None, options)
    images = np.full(shape, 3, augmenter.dtype)
    labels = np.full(len(positions), -1, np.float32)
    status = np.zeros(len(positions), np.uint8)
    key = seed & ((1 << 128) - 1)
    fd = reader.local_descriptor()

    def run(part):
        slots = np.ascontiguousarray(positions[part])
        starts, ends = reader.spans(slots)
        part_status = np.zeros(len(slots), np.uint8)
        native_module().fill(fd, reader.size, starts, ends, np.ascontiguousarray(samples[part]),
                             slots, images, labels, part_status, key & _MASK64, key >> 64,
                             epoch & _MASK64, options, b"")
        status[part] = part_status

    parts = [slice(i, None, threads) for i in range(threads)]
    if threads == 1:
        run(parts[0])
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(run, parts))
    assert not (status.astype(bool) & refused).any(), "C rendered a sample Python refuses"
    return Rendered(images, python, status.astype(bool), labels, options)
