"""With a ``.sums`` sidecar, a damaged record never becomes pixels: the loader's native and
Python paths, on 1 and 2 threads, raise, skip or replace it under ``on_error``, and the
quarantine keeps later epochs and runs from reading it again."""

import os
import shutil

import numpy as np
import pytest

import recpipe
from recpipe._optional import extension
from recpipe.decode import native as native_module
from recpipe.decode.loader import ImageLoader
from recpipe.io.sidecars.quarantine import QuarantineFile

from .._damage import damage, write_pack

COUNT = 24
BAD = {2, 5, 9, 14, 17, 22}
SHAPE = (3, 48, 48)


@pytest.fixture(params=["native", "python"])
def path_kind(request, monkeypatch):
    if request.param == "native" and extension("_batch") is None:
        pytest.skip("recpipe._batch is not built")
    if request.param == "python":  # the loader's Python path: no native runs
        real = native_module.extension
        monkeypatch.setattr(native_module, "extension",
                            lambda name: None if name == "_batch" else real(name))
    return request.param


@pytest.fixture
def packs(tmp_path):
    """``(clean, damaged)``: the same pack twice, the second with BAD records damaged in their
    scan data (bit flips and zeroed 16-byte runs; lengths unchanged)."""
    clean = write_pack(tmp_path / "clean" / "d.rec", COUNT, shape=(64, 80))
    os.makedirs(tmp_path / "bad")
    for ext in ("rec", "idx", "sums"):
        shutil.copy(tmp_path / "clean" / f"d.{ext}", tmp_path / "bad" / f"d.{ext}")
    bad = str(tmp_path / "bad" / "d.rec")
    with recpipe.RecordReader(bad) as reader:
        offsets = reader.offsets.array.tolist()
    for n, i in enumerate(sorted(BAD)):
        damage(bad, offsets[i], "flip" if n % 2 else "zero", where=0.2 + 0.1 * n)
    return clean, bad


def _by_label(url, **keywords):
    images = {}
    with ImageLoader(url, 4, SHAPE, last_batch="partial", **keywords) as loader:
        for batch_images, batch_labels in loader:
            for image, label in zip(batch_images, batch_labels):
                images[int(label)] = image.copy()
        stats = loader.stats()
        native = loader.records.native
    return images, stats, native


def _changed(delivered, clean):
    return [label for label, image in delivered.items()
            if not np.array_equal(image, clean[label])]


@pytest.mark.parametrize("threads", [1, 2])
def test_skip_delivers_no_damaged_record(packs, path_kind, threads):
    clean_url, bad_url = packs
    clean, _, native = _by_label(clean_url, threads=threads)
    assert native == (path_kind == "native")
    delivered, stats, _ = _by_label(bad_url, threads=threads, on_error="skip")
    assert set(delivered) == set(range(COUNT)) - BAD
    assert _changed(delivered, clean) == []
    assert stats["skipped"] == len(BAD)


@pytest.mark.parametrize("threads", [1, 2])
def test_raise_names_path_record_and_offset(packs, path_kind, threads):
    _, bad_url = packs
    with ImageLoader(bad_url, 4, SHAPE, threads=threads) as loader:
        with pytest.raises(recpipe.RecordFormatError, match="checksum mismatch") as info:
            list(loader)
        offset = int(loader.reader.offsets[info.value.record])
    assert info.value.path == bad_url and info.value.record in BAD
    assert info.value.offset == offset


def test_replace_fills_every_slot_with_clean_pixels(packs, path_kind):
    clean_url, bad_url = packs
    clean, _, _ = _by_label(clean_url)
    with ImageLoader(bad_url, 4, SHAPE, on_error="replace", threads=2) as loader:
        batches = [(images.copy(), labels.copy()) for images, labels in loader]
        assert loader.stats()["replaced"] == len(BAD)
    labels = np.concatenate([part for _, part in batches]).astype(int).tolist()
    assert len(labels) == COUNT and not set(labels) & BAD
    for images, batch_labels in batches:
        for image, label in zip(images, batch_labels):
            assert np.array_equal(image, clean[int(label)])


def test_without_sums_damage_gets_through(packs, path_kind):
    """The control: integrity='off' delivers damaged records with changed pixels (this is
    what the sums prevent)."""
    clean_url, bad_url = packs
    clean, _, _ = _by_label(clean_url)
    delivered, _, _ = _by_label(bad_url, on_error="skip", integrity="off")
    assert set(_changed(delivered, clean)) & BAD


def test_quarantine_skips_later_epochs_and_runs_without_reading(packs, path_kind, monkeypatch):
    _, bad_url = packs
    with ImageLoader(bad_url, 4, SHAPE, on_error="skip", threads=1) as loader:
        list(loader)
        quarantine = loader.quarantine.file
    entries = quarantine.entries()
    assert sorted(e.record for e in entries.values()) == sorted(BAD)
    assert {e.kind for e in entries.values()} == {"sum"}
    reads = []
    real_check = recpipe.RecordReader.check_sum

    def counting(self, payload, offset, position=None):
        reads.append(position)
        return real_check(self, payload, offset, position)

    monkeypatch.setattr(recpipe.RecordReader, "check_sum", counting)
    delivered, stats, _ = _by_label(bad_url, on_error="skip")  # a later run
    assert set(delivered) == set(range(COUNT)) - BAD and stats["skipped"] == len(BAD)
    assert not set(reads) & BAD  # never read again (the Python path would have checked them)
    with ImageLoader(bad_url, 4, SHAPE) as loader:
        with pytest.raises(recpipe.RecordFormatError, match="quarantined") as info:
            list(loader)
    assert info.value.record in BAD


def test_integrity_off_neither_checks_nor_quarantines(packs):
    _, bad_url = packs
    with ImageLoader(bad_url, 4, SHAPE, on_error="skip", integrity="off") as loader:
        list(loader)
        assert loader.quarantine.file is None
        identity = loader.reader.identity
    assert QuarantineFile(identity).entries() == {}


def test_record_dataset_and_torch_loader_check_sums(packs):
    pytest.importorskip("torch")
    from recpipe.torch import RecordDataset, TorchLoader

    _, bad_url = packs
    dataset = RecordDataset(bad_url, SHAPE)
    assert dataset[0][1] == 0
    with pytest.raises(recpipe.RecordFormatError, match="checksum mismatch"):
        dataset[min(BAD)]
    assert RecordDataset(bad_url, SHAPE, integrity="off")[min(BAD)] is not None
    loader = TorchLoader(bad_url, batch_size=4, data_shape=SHAPE, on_error="skip", threads=1,
                         rank=0, world_size=1)
    try:
        labels = [int(v) for _, batch_labels in loader for v in batch_labels]
    finally:
        loader.close()
    assert sorted(labels) == sorted(set(range(COUNT)) - BAD)


def test_a_damaged_first_record_is_skipped_not_a_failed_open(tmp_path):
    """Opening a loader looks at record 0 for InsightFace's header: a damaged record 0 must be
    reported as a sample under on_error, not make the whole open fail."""
    url = write_pack(tmp_path / "d.rec", COUNT, shape=(64, 80))
    with recpipe.RecordReader(url) as reader:
        first = int(reader.offsets.array[0])
    damage(url, first, "flip", where=0.5)
    images, stats, _ = _by_label(url, on_error="skip", threads=1)
    assert sorted(images) == list(range(1, COUNT))
    assert stats["skipped"] == 1
    with pytest.raises(recpipe.RecordFormatError, match="checksum mismatch"):
        _by_label(url, on_error="raise", threads=1)
