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
    assert loader.last_pad == 2 and loader.last_positions.tolist() == [8, 9, 0, 1]


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
