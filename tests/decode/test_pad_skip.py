"""``on_error='skip'`` with a padded last batch (issue 30 item 8): a bad record that is also
a filler is skipped (and counted) once, ``pad`` counts the filler rows actually in the batch,
so ``images[:len(images) - pad]`` (MXNet-style evaluation) keeps every good record."""

import cv2
import numpy as np
import pytest

import recpipe
import recpipe.mx as mx
from recpipe.decode.loader import ImageLoader
from recpipe.io import IRHeader, pack


def _jpeg(i):
    ys, xs = np.mgrid[0:24, 0:32]
    image = np.stack([(xs * 7 + i * 11) % 256, (ys * 5) % 256, np.full((24, 32), i * 20)], -1)
    return cv2.imencode(".jpg", image.astype(np.uint8))[1].tobytes()


def _write(path, count, bad):
    with recpipe.RecordWriter(str(path)) as writer:
        for i in range(count):
            body = b"\xff\xd8 not a jpeg" if i in bad else _jpeg(i)
            writer.write(pack(IRHeader(0, float(i), i, 0), body))
    return str(path)


def _real_labels(batches):
    """What MXNet-style evaluation keeps: each batch without its last ``pad`` rows."""
    kept = []
    for images, labels, pad in batches:
        assert len(images) == len(labels)
        kept.extend(labels[:len(labels) - pad].tolist())
    return kept


@pytest.mark.parametrize("integrity", ["auto", "off"])
@pytest.mark.parametrize("count,batch_size,bad", [
    (7, 4, {0}),        # record 0 bad: skipped in batch 0 and a filler of the last batch
    (5, 4, {1}),        # last batch [4, 0, 1, 2]: one bad filler among three
    (5, 4, {0, 2}),     # two bad fillers
    (9, 4, {8, 0}),     # a bad real record and a bad filler in the same last batch
])
def test_skip_keeps_every_good_record_and_counts_each_bad_one_once(tmp_path, count, batch_size,
                                                                   bad, integrity):
    url = _write(tmp_path / "data.rec", count, bad)
    with ImageLoader(url, batch_size, (3, 16, 16), on_error="skip", threads=2,
                     integrity=integrity) as loader:
        batches = [(b.images.copy(), b.labels.copy(), b.pad) for b in loader]
        stats = loader.stats()
    assert _real_labels(batches) == [float(i) for i in range(count) if i not in bad]
    assert stats["skipped"] == len(bad)
    assert stats["images"] == count - len(bad)
    for images, _, pad in batches:
        assert 0 <= pad <= len(images)


def test_replace_counts_a_bad_filler_once(tmp_path):
    url = _write(tmp_path / "data.rec", 7, {0})
    with ImageLoader(url, 4, (3, 16, 16), on_error="replace", threads=2) as loader:
        batches = [(b.images.copy(), b.labels.copy(), b.pad) for b in loader]
        stats = loader.stats()
    assert [len(images) for images, _, _ in batches] == [4, 4]
    assert batches[-1][2] == 1
    assert _real_labels(batches) == [1.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert stats["replaced"] == 1 and stats["images"] == 7


def test_mx_image_record_iter_pad_after_a_skipped_filler(tmp_path):
    url = _write(tmp_path / "data.rec", 7, {0})
    it = mx.io.ImageRecordIter(path_imgrec=url, data_shape=(3, 16, 16), batch_size=4,
                               on_error="skip", preprocess_threads=2)
    try:
        kept = []
        for batch in it:
            labels = batch.label[0].asnumpy()
            kept.extend(labels[:len(labels) - batch.pad].tolist())
        assert kept == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        assert it.stats()["skipped"] == 1
    finally:
        it.close()
