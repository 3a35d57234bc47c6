"""Provenance lines per delivered batch, and ``recpipe.replay``: the same batch, bit for bit."""

import json
import os

import numpy as np
import pytest

import recpipe
from recpipe.cli import main
from recpipe.decode.loader import ImageLoader
from recpipe.decode.provenance import decode_indices, encode_indices

from .._photos import pack_training_set

TRAIN = dict(random_resized_crop=True, min_random_area=0.3, max_aspect_ratio=0.25,
             rand_mirror=True, shuffle=True, seed=7, mean_r=123.0, std_r=58.0, dtype="float32")


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    path = tmp_path_factory.mktemp("prov") / "train.rec"
    pack_training_set(path, classes=4, per_class=9)
    return str(path)


def test_a_log_folder_that_is_not_there_is_refused_at_construction(rec, tmp_path):
    """Checked when the loader is made, before the .rec is read (here there is none), with the
    path named: not at the first batch."""
    missing = tmp_path / "missing" / "folder" / "log.jsonl"
    no_rec = str(tmp_path / "absent.rec")
    with pytest.raises(FileNotFoundError, match=f"{tmp_path / 'missing' / 'folder'} does not"):
        ImageLoader(no_rec, 4, (3, 16, 16), provenance=str(missing))
    a_file = tmp_path / "plain"
    a_file.write_text("")
    with pytest.raises(NotADirectoryError, match=f"{a_file} is not a folder"):
        ImageLoader(no_rec, 4, (3, 16, 16), provenance=str(a_file / "log.jsonl"))
    with pytest.raises(IsADirectoryError, match=f"{tmp_path} is a folder"):
        ImageLoader(no_rec, 4, (3, 16, 16), provenance=str(tmp_path))
    assert not missing.parent.exists()
    with ImageLoader(rec, 4, (3, 16, 16), provenance=str(tmp_path / "log.jsonl")) as loader:
        next(iter(loader))
    assert (tmp_path / "log.jsonl").stat().st_size > 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_log_folder_is_refused_at_construction(rec, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(PermissionError, match=f"{folder} is not writable"):
            ImageLoader(rec, 4, (3, 16, 16), provenance=str(folder / "log.jsonl"))
    finally:
        folder.chmod(0o755)


def test_index_encoding_round_trips_and_is_compact():
    rng = np.random.default_rng(0)
    for values in (np.arange(5, 133), np.r_[0:10, 20:30], rng.permutation(10**6)[:128],
                   np.array([2**40, 3]), np.zeros(0, dtype=np.int64)):
        encoded = encode_indices(values)
        assert np.array_equal(decode_indices(json.loads(json.dumps(encoded))), values)
    assert encode_indices(np.arange(5, 133)) == [[5, 133]]
    assert len(encode_indices(rng.permutation(10**6)[:128])) < 700


def test_replay_equals_delivered_batches_in_train_augmentation(rec, tmp_path):
    log = tmp_path / "prov.jsonl"
    delivered = {}
    with ImageLoader(rec, 8, (3, 40, 40), threads=2, provenance=str(log), **TRAIN) as loader:
        for epoch in range(2):
            for index, batch in enumerate(loader):
                delivered[(epoch, index)] = (batch.images.copy(), batch.labels.copy(),
                                             batch.positions.copy(), batch.pad)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert lines[0]["kind"] == "loader" and len(lines) == 1 + len(delivered)
    assert max(len(line) for line in log.read_text().splitlines()[1:]) < 400
    assert {(e["epoch"], e["batch"]) for e in lines[1:]} == set(delivered)
    for (epoch, index), (images, labels, positions, pad) in delivered.items():
        again = recpipe.replay(str(log), batch=index, epoch=epoch)
        assert again.images.dtype == images.dtype
        assert np.array_equal(again.images, images), (epoch, index)
        assert np.array_equal(again.labels, labels)
        assert np.array_equal(again.positions, positions) and again.pad == pad
    # the epochs differ (shuffle, crops): the equality above is not trivially true
    assert not np.array_equal(delivered[(0, 0)][0], delivered[(1, 0)][0])


def test_replay_single_thread_of_a_two_thread_run_and_latest_epoch(rec, tmp_path):
    log = tmp_path / "prov.jsonl"
    with ImageLoader(rec, 8, (3, 32, 32), threads=2, provenance=str(log), **TRAIN) as loader:
        loader.set_epoch(3)
        third = [b.images.copy() for b in loader][2]
    assert np.array_equal(recpipe.replay(str(log), batch=2).images, third)
    with pytest.raises(ValueError, match="no line for batch 2 of epoch 0"):
        recpipe.replay(str(log), batch=2, epoch=0)


def test_changed_file_is_named(rec, tmp_path):
    copy = tmp_path / "copy.rec"
    copy.write_bytes(open(rec, "rb").read())
    (tmp_path / "copy.idx").write_bytes(open(rec[:-4] + ".idx", "rb").read())
    log = tmp_path / "prov.jsonl"
    with ImageLoader(str(copy), 8, (3, 32, 32), threads=1, provenance=str(log)) as loader:
        first = next(iter(loader)).images.copy()
    data = bytearray(copy.read_bytes())
    data[100] ^= 0xFF
    copy.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"copy.rec changed since.*rec head"):
        recpipe.replay(str(log), batch=0)
    assert recpipe.replay(str(log), batch=0, check_file=False).images.shape == first.shape


def test_insightface_samples_differ_from_positions(tmp_path):
    from ..packing.test_extract import write_faces

    write_faces(str(tmp_path / "faces.rec"), per_id=(3, 2, 4))
    log = tmp_path / "prov.jsonl"
    with ImageLoader(str(tmp_path / "faces.rec"), 4, (3, 16, 16), threads=2, shuffle=True,
                     rand_mirror=True, provenance=str(log)) as loader:
        batches = [(b.images.copy(), b.positions.copy()) for b in loader]
    line = json.loads(log.read_text().splitlines()[1])
    assert "samples" in line
    for index, (images, positions) in enumerate(batches):
        again = recpipe.replay(str(log), batch=index)
        assert np.array_equal(again.images, images) and np.array_equal(again.positions, positions)


def test_torch_adapter_takes_the_keyword(rec, tmp_path):
    pytest.importorskip("torch")
    from recpipe.torch import TorchLoader

    log = tmp_path / "torch.jsonl"
    loader = TorchLoader(rec, 8, (3, 24, 24), rank=0, world_size=1, threads=2,
                         provenance=str(log), **TRAIN)
    try:
        batches = [images.numpy().copy() for images, _ in loader]
    finally:
        loader.loader.close()
    assert len(batches) > 1
    for index, images in enumerate(batches):
        assert np.array_equal(recpipe.replay(str(log), batch=index).images, images)


def test_cli_writes_images_and_npy(rec, tmp_path, capsys):
    log = tmp_path / "prov.jsonl"
    with ImageLoader(rec, 6, (3, 24, 24), threads=2, provenance=str(log), **TRAIN) as loader:
        delivered = [b.images.copy() for b in loader]
    out = tmp_path / "replayed"
    assert main(["replay", str(log), "--batch", "1", "--epoch", "0", "--out", str(out)]) == 0
    assert np.array_equal(np.load(out / "images.npy"), delivered[1])
    assert len(list(out.glob("*.png"))) == len(delivered[1])
    assert os.path.exists(out / "labels.npy")


def test_replaced_samples_are_logged_as_what_was_delivered(tmp_path):
    """on_error='replace': the slot of a bad record holds another sample; the batch's positions
    and the log say which, so the replay equals the delivered batch."""
    import cv2

    rng = np.random.default_rng(3)
    url = str(tmp_path / "bad.rec")
    with recpipe.RecordWriter(url) as writer:
        for i in range(10):
            body = cv2.imencode(".jpg", rng.integers(0, 255, (20, 20, 3), dtype=np.uint8))[1]
            body = body.tobytes() if i != 3 else b"\xff\xd8\xff\xe0 not a jpeg"
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), body))
    log = tmp_path / "prov.jsonl"
    with ImageLoader(url, 5, (3, 16, 16), threads=2, on_error="replace", rand_mirror=True,
                     provenance=str(log)) as loader:
        first = next(iter(loader))
        assert loader.stats()["replaced"] == 1
    assert first.positions.tolist() == [0, 1, 2, 4, 4]
    again = recpipe.replay(str(log), batch=0)
    assert np.array_equal(again.images, first.images)
    assert again.labels.tolist() == [0, 1, 2, 4, 4]
