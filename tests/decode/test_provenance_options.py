"""Every loader option reaches the provenance log or is declared without effect, and replay
applies what the log records (issue 30 item 12: ``label_rule``, ``integrity``, ``max_scans``
were dropped; a new option must not be forgotten again)."""

import dataclasses
import json

import cv2
import numpy as np
import pytest

import recpipe
import recpipe.mx as mx
from recpipe.decode.augment import AugmentConfig
from recpipe.decode.decoders import available_decoders
from recpipe.decode.loader import ImageLoader
from recpipe.decode.options import LoaderOptions
from recpipe.decode.provenance import (NO_EFFECT_FIELDS, PER_BATCH_FIELDS, options_digest,
                                       options_from_json, options_to_json, recorded_fields)
from recpipe.io import IRHeader, pack

from .jpeg_samples import scan_bomb

BASE = LoaderOptions(batch_size=4, augment=AugmentConfig(data_shape=(3, 8, 8)), num_parts=2)
# a value other than BASE's for every field replay takes from the options: a new LoaderOptions
# field fails test_every_field_is_accounted_for until it is classified here and in provenance
OTHER_VALUES = {
    "batch_size": 3,
    "augment": AugmentConfig(data_shape=(3, 6, 10), rand_mirror=True, resize=12,
                             rotate_list=(0, 90), mean_r=1.5, dtype="float16"),
    "shuffle": "full",
    "seed": 5,
    "aug_seed": 9,
    "part_index": 1,
    "num_parts": 3,
    "last_batch": "drop",
    "label_width": 2,
    "on_error": "skip",
    "decoder": "opencv",
    "fast_dct": True,
    "fast_upsample": True,
    "run_bytes": 1 << 20,
    "max_pixels": 1000,
    "integrity": "strict",
    "max_scans": 7,
}
NO_EFFECT_VALUES = {"threads": 3, "prefetch": 5, "timeout": 7.0, "trace": True,
                    "lookahead": False, "provenance": "/tmp/elsewhere.jsonl"}


def _round_trip(options):
    return options_from_json(json.loads(json.dumps(options_to_json(options))))


def test_every_field_is_accounted_for():
    fields = {f.name for f in dataclasses.fields(LoaderOptions)}
    recorded, per_batch, no_effect = recorded_fields(), set(PER_BATCH_FIELDS), \
        set(NO_EFFECT_FIELDS)
    assert not (recorded & per_batch) and not (recorded & no_effect) \
        and not (per_batch & no_effect)
    assert recorded | per_batch | no_effect == fields
    assert set(OTHER_VALUES) == recorded, "give a test value for each recorded option"
    assert set(NO_EFFECT_VALUES) == no_effect


@pytest.mark.parametrize("name", sorted(OTHER_VALUES))
def test_a_recorded_option_survives_the_log_and_changes_the_digest(name):
    options = BASE.replace(**{name: OTHER_VALUES[name]})
    assert getattr(_round_trip(options), name) == OTHER_VALUES[name]
    assert options_digest(options) != options_digest(BASE)


@pytest.mark.parametrize("name", sorted(NO_EFFECT_VALUES))
def test_an_option_without_effect_leaves_the_digest(name):
    assert options_digest(BASE.replace(**{name: NO_EFFECT_VALUES[name]})) == \
        options_digest(BASE)


def test_every_augment_field_survives_the_log():
    config = OTHER_VALUES["augment"]
    data = options_to_json(BASE.replace(augment=config))["augment"]
    assert set(data) == {f.name for f in dataclasses.fields(AugmentConfig)}
    assert _round_trip(BASE.replace(augment=config)).augment == config


def test_a_label_rule_changes_the_digest():
    assert options_digest(BASE.replace(label_rule=_imglist_rule)) != options_digest(BASE)


# -- replay applies them -----------------------------------------------------------------------


def _jpeg(i, shape=(20, 24)):
    ys, xs = np.mgrid[0:shape[0], 0:shape[1]]
    image = np.stack([(xs * 9 + i * 13) % 256, (ys * 7) % 256, np.full(shape, i * 30)], -1)
    return cv2.imencode(".jpg", image.astype(np.uint8))[1].tobytes()


def _write(path, bodies, label=lambda i: float(i + 4)):
    with recpipe.RecordWriter(str(path)) as writer:
        for i, body in enumerate(bodies):
            writer.write(pack(IRHeader(0, label(i), i, 0), body))
    return str(path)


def _imglist_rule(header, position):
    return np.float32(header.id + 54)


def _delivered(log_path, loader):
    with loader:
        return [(b.images.copy(), b.labels.copy(), b.positions.copy()) for b in loader]


def _assert_replayed(log_path, delivered):
    for index, (images, labels, positions) in enumerate(delivered):
        again = recpipe.replay(str(log_path), batch=index, epoch=0)
        assert np.array_equal(again.positions, positions)
        assert np.array_equal(again.images, images), index
        assert np.array_equal(again.labels, labels), (index, again.labels, labels)


def test_replay_gives_the_labels_of_a_label_rule(tmp_path):
    rec = _write(tmp_path / "d.rec", [_jpeg(i) for i in range(4)])
    log = tmp_path / "log.jsonl"
    delivered = _delivered(log, ImageLoader(rec, 4, (3, 12, 12), threads=2, rand_mirror=True,
                                            label_rule=_imglist_rule, provenance=str(log)))
    assert delivered[0][1].tolist() == [54.0, 55.0, 56.0, 57.0]
    _assert_replayed(log, delivered)
    loader_line = json.loads(log.read_text().splitlines()[0])
    assert loader_line["label_rule"]["name"].endswith("_imglist_rule")


@pytest.mark.parametrize("label_width", [1, 2])
def test_replay_gives_an_imglists_labels(tmp_path, label_width):
    """recpipe.mx's ImageRecordIter with ``path_imglist``: the id table stays on the native
    path; replay gives the list's labels, not the headers' 4..7."""
    rec = _write(tmp_path / "d.rec", [_jpeg(i) for i in range(6)])
    lst = tmp_path / "d.lst"
    lst.write_text("".join(f"{i}\t" + "\t".join(str(50.0 + i + 4 + k) for k in range(label_width))
                           + f"\timg{i}.jpg\n" for i in range(6)))
    log = tmp_path / "log.jsonl"
    it = mx.io.ImageRecordIter(path_imgrec=rec, path_imglist=str(lst), data_shape=(3, 12, 12),
                               batch_size=4, label_width=label_width, rand_crop=True,
                               preprocess_threads=2, provenance=str(log))
    try:
        delivered = [(b.data[0].asnumpy().copy(), b.label[0].asnumpy().copy(), b.index)
                     for b in it]
    finally:
        it.close()
    first = delivered[0][1] if label_width == 1 else delivered[0][1][:, 0]
    assert first.tolist() == [54.0, 55.0, 56.0, 57.0]
    for index, (images, labels, _) in enumerate(delivered):
        again = recpipe.replay(str(log), batch=index, epoch=0)
        assert np.array_equal(again.images, images) and np.array_equal(again.labels, labels)


def test_replay_applies_max_scans(tmp_path):
    """A 150-scan progressive JPEG delivered with ``max_scans=None``: the default limit (100)
    would refuse it on replay."""
    bodies = [_jpeg(0), scan_bomb(16, 16, 150), _jpeg(2)]
    rec = _write(tmp_path / "d.rec", bodies)
    log = tmp_path / "log.jsonl"
    delivered = _delivered(log, ImageLoader(rec, 3, (3, 12, 12), threads=1, max_scans=None,
                                            provenance=str(log)))
    assert delivered[0][2].tolist() == [0, 1, 2]
    _assert_replayed(log, delivered)


def test_replay_applies_integrity_off(tmp_path):
    """``integrity='off'`` delivered a record whose bytes no longer match the ``.sums`` (its
    label changed 5.0 -> 2.0): the replay is that batch, not a checksum error."""
    rec = _write(tmp_path / "d.rec", [_jpeg(i) for i in range(4)])
    data = bytearray(open(rec, "rb").read())
    old = np.float32(5.0).tobytes()
    at = data.index(old)
    data[at:at + 4] = np.float32(2.0).tobytes()
    open(rec, "wb").write(bytes(data))
    with pytest.raises(recpipe.RecordFormatError):
        with ImageLoader(rec, 4, (3, 12, 12), threads=1) as loader:
            list(loader)
    log = tmp_path / "log.jsonl"
    delivered = _delivered(log, ImageLoader(rec, 4, (3, 12, 12), threads=1, integrity="off",
                                            provenance=str(log)))
    assert 2.0 in delivered[0][1].tolist()
    _assert_replayed(log, delivered)


def test_the_log_names_the_backend_auto_resolved_to(tmp_path):
    rec = _write(tmp_path / "d.rec", [_jpeg(i) for i in range(4)])
    log = tmp_path / "log.jsonl"
    with ImageLoader(rec, 4, (3, 12, 12), threads=1, provenance=str(log)) as loader:
        list(loader)
        name = loader.decoder.name
    line = json.loads(log.read_text().splitlines()[0])
    assert line["decoder"] == name == available_decoders()[0]
    assert line["native"] in (True, False)
