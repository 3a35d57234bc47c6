"""LoaderOptions: frozen, validated before any file is opened, shared by the adapters."""

import dataclasses
import warnings

import pytest

from recpipe.decode.loader import ImageLoader
from recpipe.decode.options import LOADER_KEYWORDS, LoaderOptions


def test_options_are_frozen_and_hold_the_augmentation():
    options = LoaderOptions.from_kwargs(32, (3, 112, 112), rand_mirror=True, shuffle=True,
                                        mean_r=127.5, std_r=127.5)
    assert options.batch_size == 32 and options.shuffle is True
    assert options.augment.rand_mirror and options.augment.dtype == "float32"  # normalising
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.batch_size = 64
    assert options.replace(prefetch=8).prefetch == 8 and options.prefetch == 2
    assert options.augment_seed == 0 and options.replace(aug_seed=5).augment_seed == 5


@pytest.mark.parametrize("keywords,match", [
    (dict(prefetch=0), "prefetch=0"),
    (dict(threads=0), "threads=0"),
    (dict(threads="many"), "threads='many'"),
    (dict(on_error="ignore"), "on_error='ignore'"),
    (dict(label_width=0), "label_width=0"),
    (dict(last_batch="keep"), "last_batch='keep'"),
    (dict(part_index=2, num_parts=2), "part_index=2"),
    (dict(shuffle="random"), "shuffle='random'"),
    (dict(timeout=0), "timeout=0"),
    (dict(max_pixels=0), "max_pixels=0"),
    (dict(seed=-1), "seed=-1"),
    (dict(shufle=True), "did you mean 'shuffle'"),
    (dict(rand_miror=True), "did you mean 'rand_mirror'"),
])
def test_bad_options_fail_before_the_file_is_opened(tmp_path, keywords, match):
    missing = str(tmp_path / "missing.rec")
    with pytest.raises(ValueError, match=match):
        ImageLoader(missing, 4, (3, 24, 24), **keywords)
    with pytest.raises(ValueError, match=match):
        LoaderOptions.from_kwargs(4, (3, 24, 24), **keywords)


def test_a_loader_takes_options_or_keywords_not_both(tmp_path):
    options = LoaderOptions.from_kwargs(4, (3, 24, 24))
    with pytest.raises(TypeError, match="not both"):
        ImageLoader(str(tmp_path / "x.rec"), options=options, shuffle=True)
    with pytest.raises(TypeError, match="batch_size and data_shape"):
        ImageLoader(str(tmp_path / "x.rec"))


def test_the_mxnet_adapter_passes_every_loader_option_through(tmp_path):
    """ImageRecordIter's recpipe extras come from LoaderOptions (run_bytes was missing)."""
    from recpipe import mxnet_keywords

    extras = mxnet_keywords.LOADER_EXTRAS
    assert {"run_bytes", "keys", "max_pixels", "lookahead", "timeout"} <= extras
    assert extras <= LOADER_KEYWORDS | {"storage_options"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # run_bytes is known: no unknown-keyword warning
        loader_kwargs, _, _ = mxnet_keywords.translate(dict(
            path_imgrec="x.rec", data_shape=(3, 8, 8), batch_size=2, run_bytes=1 << 20))
    assert loader_kwargs["run_bytes"] == 1 << 20


def test_batches_unpack_as_images_labels_and_carry_pad_and_positions(tmp_path):
    import cv2
    import numpy as np

    import recpipe

    rec = str(tmp_path / "b.rec")
    with recpipe.RecordWriter(rec) as writer:
        for i in range(10):
            img = np.full((24, 24, 3), i * 20, np.uint8)
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0),
                                      cv2.imencode(".jpg", img)[1].tobytes()))
    with ImageLoader(rec, 4, (3, 24, 24), threads=1, last_batch="pad") as loader:
        batches = list(loader)
    assert [b.pad for b in batches] == [0, 0, 2]
    images, labels = batches[-1]  # still unpacks as a pair
    assert images is batches[-1].images and labels is batches[-1].labels
    assert batches[-1].positions.tolist() == [8, 9, 0, 1]
    assert labels.tolist() == [8.0, 9.0, 0.0, 1.0]
    assert not hasattr(loader, "last_pad")  # retired: the Batch says it


def test_the_batch_memory_pool_follows_the_prefetch_depth(tmp_path):
    """The autotuner raises prefetch: the pool keeps that many batches' memory (not 2's)."""
    import cv2
    import numpy as np

    import recpipe

    rec = str(tmp_path / "p.rec")
    with recpipe.RecordWriter(rec) as writer:
        writer.write(recpipe.pack(recpipe.IRHeader(0, 0.0, 0, 0),
                                  cv2.imencode(".jpg", np.zeros((8, 8, 3), np.uint8))[1].tobytes()))
    with ImageLoader(rec, 1, (3, 8, 8), threads=1, prefetch=2) as loader:
        assert loader._buffers.keep == 4
        loader.prefetch = 16
        assert loader._buffers.keep == 18
        assert loader.batch_bytes == 3 * 8 * 8 + 4
        with pytest.raises(ValueError, match="prefetch=0"):
            loader.prefetch = 0
    assert loader.closed


def _labelled_rec(tmp_path, count=10):
    import cv2
    import numpy as np

    import recpipe

    rec = str(tmp_path / "l.rec")
    with recpipe.RecordWriter(rec) as writer:
        for i in range(count):
            img = np.full((24, 24, 3), i * 20, np.uint8)
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), 100 + i, 0),
                                      cv2.imencode(".jpg", img)[1].tobytes()))
    return rec


def test_a_label_rule_gives_the_labels_and_its_errors_go_through_on_error(tmp_path):
    """``label_rule=`` (public) replaces the header's labels; a RecordFormatError it raises is
    a bad record under ``on_error``."""
    import numpy as np

    from recpipe.errors import RecordFormatError

    rec = _labelled_rec(tmp_path)

    def rule(header, position):  # header.id is 100 + position here
        if header.id == 103:
            raise RecordFormatError("no label for id 103", path=rec, record=position)
        return np.float32(header.id * 2)

    with ImageLoader(rec, 4, (3, 24, 24), threads=2, label_rule=rule, on_error="skip",
                     last_batch="partial") as loader:
        assert loader.records.native is False  # the Python path serves a label rule
        batches = list(loader)
    labels = np.concatenate([b.labels for b in batches]).tolist()
    positions = np.concatenate([b.positions for b in batches]).tolist()
    assert positions == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    assert labels == [2.0 * (100 + p) for p in positions]
    with ImageLoader(rec, 4, (3, 24, 24), threads=1, label_rule=rule) as loader:
        with pytest.raises(RecordFormatError, match="no label for id 103"):
            list(loader)
    with pytest.raises(ValueError, match="label_rule="):
        LoaderOptions.from_kwargs(4, (3, 24, 24), label_rule="header")
    with pytest.raises(ValueError, match="did you mean 'label_rule'"):
        LoaderOptions.from_kwargs(4, (3, 24, 24), label_rules=rule)


def test_a_label_rule_is_described_not_serialised_in_the_provenance_options(tmp_path):
    """A function is not JSON: the options leave it out, but it changes the labels, so the
    digest names it (its labels go in each batch line, tests/decode/test_provenance_options)."""
    from recpipe.decode.provenance import options_digest, options_to_json

    options = LoaderOptions.from_kwargs(4, (3, 24, 24))
    ruled = options.replace(label_rule=lambda header, position: 0.0)
    assert "label_rule" not in options_to_json(ruled)
    assert options_digest(ruled) != options_digest(options)


def test_options_without_a_data_shape_serve_whole_images_and_the_loader_refuses_them(tmp_path):
    options = LoaderOptions.from_kwargs(1, None, seed=3)
    assert options.augment is None and options.seed == 3
    with pytest.raises(ValueError, match=r"\['rand_mirror'\] need data_shape"):
        LoaderOptions.from_kwargs(1, None, rand_mirror=True)
    with pytest.raises(ValueError, match="needs a data_shape"):
        ImageLoader(_labelled_rec(tmp_path), options=options)


def test_a_record_the_label_rule_has_no_label_for_is_not_quarantined(tmp_path):
    """The record is sound (the rule's list lacks it): later loaders, and later epochs of this
    one, still read it instead of skipping it as known bad."""
    import numpy as np

    from recpipe.errors import LabelError, RecordFormatError

    rec = _labelled_rec(tmp_path)
    missing = {103}

    def rule(header, position):
        if header.id in missing:
            raise RecordFormatError(f"no label for id {header.id}", path=rec, record=position)
        return np.float32(header.id)

    with ImageLoader(rec, 4, (3, 24, 24), threads=1, label_rule=rule, on_error="skip",
                     last_batch="partial", lookahead=False) as loader:
        first = np.concatenate([b.positions for b in loader]).tolist()
        missing.clear()  # the list now has it: the next epoch reads the record again
        second = np.concatenate([b.positions for b in loader]).tolist()
        assert not loader.quarantine.mask(np.arange(10)).any()
    assert 3 not in first and second == list(range(10))
    with ImageLoader(rec, 4, (3, 24, 24), threads=1, last_batch="partial") as plain:
        assert np.concatenate([b.positions for b in plain]).tolist() == list(range(10))
    missing.add(103)
    with ImageLoader(rec, 4, (3, 24, 24), threads=1, label_rule=rule) as loader:
        with pytest.raises(LabelError, match="no label for id 103") as info:
            list(loader)
    assert isinstance(info.value, RecordFormatError) and info.value.record == 3
