"""A damaged provenance line is a precise error, never an empty or wrong batch (issue 30 item
17), and loaders refuse to be pickled with a message saying what to do instead."""

import json
import pickle
import warnings

import cv2
import numpy as np
import pytest

import recpipe
from recpipe.decode.loader import ImageLoader
from recpipe.decode.provenance import decode_indices
from recpipe.io import IRHeader, pack

N = 24


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    """``(rec, log, delivered)``: 3 shuffled batches of 8 logged (the positions encoded as
    base64, being shuffled)."""
    folder = tmp_path_factory.mktemp("replay_errors")
    rec = str(folder / "d.rec")
    with recpipe.RecordWriter(rec) as writer:
        for i in range(N):
            img = np.full((16, 20, 3), i * 10, np.uint8)
            writer.write(pack(IRHeader(0, float(i), i, 0), cv2.imencode(".jpg", img)[1].tobytes()))
    log = folder / "log.jsonl"
    with ImageLoader(rec, 8, (3, 8, 8), threads=1, shuffle=True, seed=3,
                     provenance=str(log)) as loader:
        delivered = [b.images.copy() for b in loader]
    return rec, log, delivered


def _with_batch_line(logged, tmp_path, change):
    """A copy of the log whose line of batch 0 went through ``change(line)``."""
    _, log, _ = logged
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    for line in lines:
        if line.get("batch") == 0:
            change(line)
    copy = tmp_path / "damaged.jsonl"
    copy.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(copy)


def test_the_fixture_logs_base64_positions(logged):
    _, log, delivered = logged
    line = json.loads(log.read_text().splitlines()[1])
    assert isinstance(line["positions"], str) and line["positions"].startswith("u4:")
    assert np.array_equal(recpipe.replay(str(log), batch=0).images, delivered[0])


@pytest.mark.parametrize("positions,message", [
    ("u4:@@not*base64@@", "not valid base64"),
    ("u4:AAAAAAE=", "not a whole number"),          # 5 bytes
    ("u4:", "not a whole number"),
    ("x9:AAAA", "not an encoded index array"),
    ([[5, 3]], r"index run \[5, 3\]"),               # a reversed run
    ([[2, 2]], r"index run \[2, 2\]"),               # an empty run
    ([[-1, 2]], r"index run \[-1, 2\]"),
    ([[0, 1.5]], "index run"),
    ([[0, 2], 7], "index run 7"),
    ({"a": 1}, "not an index array"),
    ([[0, 3], [40, 41]], "record 40 is past the last record"),
])
def test_damaged_positions_are_a_precise_error(logged, tmp_path, positions, message):
    path = _with_batch_line(logged, tmp_path, lambda line: line.update(positions=positions))
    with pytest.raises(ValueError, match=message):
        recpipe.replay(path, batch=0)


def test_samples_that_do_not_match_the_positions_are_an_error(logged, tmp_path):
    path = _with_batch_line(logged, tmp_path, lambda line: line.update(samples=[[0, 3]]))
    with pytest.raises(ValueError, match="3 sample numbers for 8 records"):
        recpipe.replay(path, batch=0)


@pytest.mark.parametrize("pad", [-1, 9, "1", True])
def test_a_bad_pad_is_an_error(logged, tmp_path, pad):
    path = _with_batch_line(logged, tmp_path, lambda line: line.update(pad=pad))
    with pytest.raises(ValueError, match="pad="):
        recpipe.replay(path, batch=0)


def test_a_truncated_line_is_skipped_and_named_when_it_was_the_one(logged, tmp_path):
    _, log, delivered = logged
    lines = log.read_text().splitlines()
    copy = tmp_path / "cut.jsonl"
    copy.write_text("\n".join(lines[:2] + [lines[2][:30], '[1, 2]', '{"batch": 1}']) + "\n")
    assert np.array_equal(recpipe.replay(str(copy), batch=0).images, delivered[0])
    with pytest.raises(ValueError, match="no line for batch 1"):
        recpipe.replay(str(copy), batch=1)


def test_decode_indices_round_trips_the_good_forms():
    assert decode_indices([]).tolist() == []
    assert decode_indices([[3, 5], [9, 10]]).tolist() == [3, 4, 9]
    assert decode_indices("u4:AQAAAAIAAAA=").tolist() == [1, 2]


# -- pickling ----------------------------------------------------------------------------------


def test_an_image_loader_refuses_pickling_with_advice(logged):
    rec = logged[0]
    with ImageLoader(rec, 4, (3, 8, 8), threads=1) as loader:
        with pytest.raises(TypeError, match="cannot be sent to another process.*RecordDataset"):
            pickle.dumps(loader)


def test_a_torch_loader_sent_to_spawn_workers_is_told_what_to_do(logged):
    torch = pytest.importorskip("torch")
    from recpipe.torch import TorchLoader

    loader = TorchLoader(logged[0], 4, (3, 8, 8), rank=0, world_size=1, threads=1)
    try:
        with pytest.raises(TypeError, match="a TorchLoader cannot be sent to another process"):
            pickle.dumps(loader)
        workers = torch.utils.data.DataLoader(loader, batch_size=None, num_workers=1,
                                              multiprocessing_context="spawn")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's own "Got pickle error" note, in some versions
            with pytest.raises(TypeError, match="iterate it directly.*RecordDataset"):
                next(iter(workers))
        assert len([images for images, _ in loader]) == N // 4  # still usable here
    finally:
        loader.close()
