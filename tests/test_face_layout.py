"""InsightFace's layout (header record, images, identity records) in every reader, and the
``gluon.data.vision.ImageRecordDataset`` surface of ``RecordDataset``."""

import json
import subprocess
import sys

import cv2
import numpy as np
import pytest

import recpipe
from recpipe import recordio
from recpipe.decode.loader import ImageLoader
from recpipe.io.format.layout import FaceLayout, detect_face_layout
from recpipe.io.health.contents import inspect

PER_ID = [3, 1, 4, 2]


def _face(i):
    y, x = np.mgrid[0:40, 0:40]
    return np.stack([(x * 5 + i * 11) % 256, (y * 4 + i * 7) % 256,
                     np.full((40, 40), (i * 29) % 256)], axis=-1).astype(np.uint8)


def write_faces(folder, per_id=PER_ID):
    """The layout InsightFace's tools write; returns the image labels in key order."""
    rec, idx = str(folder / "train.rec"), str(folder / "train.idx")
    writer = recordio.MXIndexedRecordIO(idx, rec, "w")
    first = sum(per_id) + 1
    writer.write_idx(0, recordio.pack(recordio.IRHeader(2, [first, first + len(per_id)], 0, 0),
                                      b""))
    key, labels, ranges = 1, [], []
    for identity, count in enumerate(per_id):
        start = key
        for _ in range(count):
            writer.write_idx(key, recordio.pack_img(recordio.IRHeader(0, float(identity), key, 0),
                                                    _face(key)))
            labels.append(identity)
            key += 1
        ranges.append((start, key))
    for identity, (start, end) in enumerate(ranges):
        writer.write_idx(first + identity, recordio.pack(recordio.IRHeader(2, [start, end], 0, 0),
                                                         b""))
    writer.close()
    return rec, labels


@pytest.fixture(scope="module")
def faces(tmp_path_factory):
    return write_faces(tmp_path_factory.mktemp("faces"))


def test_layout_is_detected(faces):
    rec, labels = faces
    with recpipe.RecordReader(rec) as reader:
        assert detect_face_layout(reader) == FaceLayout(len(labels) + 1,
                                                        len(labels) + 1 + len(PER_ID))
        assert len(reader) == len(labels) + 1 + len(PER_ID)


def test_plain_multilabel_file_is_not_a_face_layout(tmp_path):
    rec = str(tmp_path / "plain.rec")
    with recpipe.RecordWriter(rec) as writer:
        for i in range(5):  # record 0 has 2 whole-number labels and an image
            writer.write(recpipe.pack(recpipe.IRHeader(0, [1.0, 3.0], i, 0),
                                      cv2.imencode(".jpg", _face(i))[1].tobytes()))
    with recpipe.RecordReader(rec) as reader:
        assert detect_face_layout(reader) is None
    with ImageLoader(rec, 2, (3, 16, 16), threads=1, resize=16) as loader:
        assert loader.num_samples == 5


def test_image_loader_serves_only_the_images(faces):
    rec, labels = faces
    with ImageLoader(rec, 4, (3, 32, 32), threads=2, resize=32, last_batch="partial") as loader:
        assert loader.num_samples == len(labels)
        got, positions = [], []
        for batch in loader:
            got += batch.labels.tolist()
            positions += batch.positions.tolist()
    assert got == labels
    assert positions == list(range(1, len(labels) + 1))


def test_explicit_keys_choose_records(faces):
    rec, labels = faces
    keys = [5, 2, 9]
    with ImageLoader(rec, 3, (3, 32, 32), threads=1, resize=32, keys=keys) as loader:
        batch, = list(loader)
        images, batch_labels = batch
        assert batch.positions.tolist() == keys  # key k is at position k here
    assert batch_labels.tolist() == [labels[k - 1] for k in keys]
    with pytest.raises(KeyError, match="keys="):
        ImageLoader(rec, 3, (3, 32, 32), threads=1, keys=[1, 999])


def test_torch_readers_serve_only_the_images(faces):
    torch = pytest.importorskip("torch")
    import recpipe.torch as rt

    rec, labels = faces
    dataset = rt.RecordDataset(rec)
    assert len(dataset) == len(labels)
    assert [int(dataset[i][1]) for i in range(len(dataset))] == labels
    assert rt.RecordDataset(rec, keys=[3, 4])[1][1].item() == labels[3]
    loader = torch.utils.data.DataLoader(dataset, batch_size=5, num_workers=2)
    assert torch.cat([batch_labels for _, batch_labels in loader]).tolist() == labels
    with rt.TorchLoader(rec, 4, (3, 32, 32), resize=32, threads=1, rank=0, world_size=1,
                        last_batch="partial") as torch_loader:
        assert len(torch_loader) == 3
        assert torch.cat([lab for _, lab in torch_loader]).tolist() == labels


def test_dataset_transform_methods_and_grayscale(faces):
    torch = pytest.importorskip("torch")
    import recpipe.torch as rt

    rec, labels = faces
    dataset = rt.RecordDataset(rec)
    image, label = dataset[0]
    assert tuple(image.shape) == (40, 40, 3)
    both = dataset.transform(lambda img, lab: (img.shape[0], lab + 100))
    assert both[2] == (40, labels[2] + 100)
    first = dataset.transform_first(lambda img: img.float().mean().item(), lazy=False)
    assert len(first) == len(labels)
    assert first[1][0] == pytest.approx(dataset[1][0].float().mean().item())
    assert first[1][1].item() == labels[1]
    chained = first.transform_first(lambda value: -value)
    assert chained[1][0] == pytest.approx(-first[1][0])
    gray = rt.RecordDataset(rec, flag=0)
    with recpipe.RecordReader(rec) as reader:
        _, expected = recordio.unpack_img(reader.read_key(1), 0)  # OpenCV's grayscale decode
    assert tuple(gray[0][0].shape) == (40, 40, 1)
    assert np.abs(gray[0][0].numpy()[:, :, 0].astype(int) - expected).max() <= 1
    with pytest.raises(ValueError, match="flag"):
        rt.RecordDataset(rec, flag=2)
    assert isinstance(torch.zeros(1), torch.Tensor)


def test_inspect_reports_the_layout(faces):
    rec, labels = faces
    summary = inspect(rec)
    assert summary["layout"] == {"kind": "insightface", "images": len(labels),
                                 "identities": len(PER_ID), "image_keys": [1, len(labels) + 1],
                                 "identity_keys": [len(labels) + 1, len(labels) + 1 + len(PER_ID)]}
    done = subprocess.run([sys.executable, "-m", "recpipe", "inspect", rec], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "InsightFace" in done.stdout
    done = subprocess.run([sys.executable, "-m", "recpipe", "inspect", rec, "--json"],
                          capture_output=True, text=True, timeout=120)
    assert json.loads(done.stdout)["layout"]["kind"] == "insightface"


def _flip_header_bit(rec):
    """One flipped bit in record 0's first label (the first identity key: 11.0 -> 10.0)."""
    import os
    import struct

    st = os.stat(rec)
    data = bytearray(open(rec, "rb").read())
    at = 8 + 24  # part head, IRHeader: then label[0] (float32)
    assert struct.unpack_from("<f", data, at)[0] == 11.0
    data[at + 2] ^= 0x10
    assert struct.unpack_from("<f", data, at)[0] == 10.0
    open(rec, "r+b").write(data)
    os.utime(rec, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.parametrize("integrity", ["strict", "auto"])
def test_a_damaged_header_record_is_an_error_not_fewer_images(tmp_path, integrity):
    rec, labels = write_faces(tmp_path)
    _flip_header_bit(rec)
    for on_error in ("raise", "skip"):
        with pytest.raises(recpipe.RecordFormatError) as info:
            ImageLoader(rec, 4, (3, 32, 32), threads=1, resize=32, integrity=integrity,
                        on_error=on_error)
        assert info.value.record == 0 and info.value.path == rec
        assert "checksum mismatch" in str(info.value) and "header" in str(info.value)
        assert info.value.fault == "checksum"
    with pytest.raises(recpipe.RecordFormatError, match="header"):
        _extract(rec, tmp_path)
    with ImageLoader(rec, 4, (3, 32, 32), threads=1, resize=32, integrity="off",
                     last_batch="partial") as loader:
        assert loader.num_samples == len(labels) - 1  # unchecked: the damaged header rules


def _extract(rec, tmp_path):
    from recpipe.packing.extract import extract_records

    return extract_records(rec, str(tmp_path / "out"))
