"""RecordIO's framing, image header and label rules are defined once, in C (csrc/record/record.h,
which recpipe._batch reads records with): the Python functions are thin calls to its
recpipe._kernels binding, checked here against struct/dict references and for their errors."""

import random
import struct

import numpy as np
import pytest

from recpipe._optional import native
from recpipe.decode import labels as labels_module
from recpipe.decode.labels import IdLabels, header_labels
from recpipe.errors import LabelError, RecordFormatError
from recpipe.io.format import framing
from recpipe.io.format import header as header_module
from recpipe.io.format.header import IRHeader, pack, unpack, unpack_header

kernels = native("_kernels")


def _spy(monkeypatch, name):
    calls = []
    real = getattr(kernels, name)

    def spy(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(kernels, name, spy)
    return calls


def test_python_functions_call_the_c_definition(monkeypatch):
    head = struct.pack("<II", framing.MAGIC, 3 << 29 | 77)
    calls = {name: _spy(monkeypatch, name)
             for name in ("decode_head", "padded", "image_header", "label_rule", "id_row")}
    assert framing.decode_head(head, 0) == (framing.MAGIC, 3, 77)
    assert framing.padded(77) == 80
    header, end = unpack_header(pack(IRHeader(0, 2.5, 7, 0), b"img"))
    assert (header, end) == (IRHeader(0, 2.5, 7, 0), 24)
    assert header_labels(header, 1) == np.float32(2.5)
    assert IdLabels({7: np.float32(4)}, 1, source="list")(header, 0) == np.float32(4)
    assert {name: len(made) for name, made in calls.items()} == dict.fromkeys(calls, 1)


def test_constants_are_the_c_ones():
    assert framing.MAGIC == kernels.RECORD_MAGIC
    assert framing.HEAD_SIZE == kernels.RECORD_HEAD
    assert framing.MAX_RECORD_SIZE == kernels.MAX_RECORD_SIZE
    assert header_module.HEADER_SIZE == kernels.IMAGE_HEADER


def test_decode_head_matches_struct():
    rng = random.Random(5)
    for _ in range(2000):
        data = bytes(rng.getrandbits(8) for _ in range(16))
        pos = rng.randrange(0, 9)
        magic, lrec = struct.unpack_from("<II", data, pos)
        assert framing.decode_head(data, pos) == (magic, lrec >> 29, lrec & ((1 << 29) - 1))
        assert framing.decode_head(memoryview(data), pos - 16) == framing.decode_head(data, pos)
    with pytest.raises(struct.error):
        framing.decode_head(b"\0" * 7, 0)
    with pytest.raises(struct.error):
        framing.decode_head(b"\0" * 16, 9)


@pytest.mark.parametrize("length", [0, 1, 2, 3, 4, 5, 77, (1 << 29) - 1, 1 << 40])
def test_padded_rounds_up_to_four(length):
    assert framing.padded(length) == -(-length // 4) * 4


def test_unpack_header_matches_struct():
    rng = random.Random(9)
    for _ in range(1000):
        flag = rng.choice([0, 0, 1, 2, 5, rng.getrandbits(32)])
        fields = (flag, rng.uniform(-1e6, 1e6), rng.getrandbits(64), rng.getrandbits(64))
        payload = struct.pack("<IfQQ", *fields) + bytes(rng.getrandbits(8)
                                                        for _ in range(rng.randrange(0, 40)))
        ref = struct.unpack_from("<IfQQ", payload)
        if 24 + 4 * flag > len(payload):
            with pytest.raises(RecordFormatError, match=f"header says {flag} labels but the "
                               f"payload has {len(payload)} bytes"):
                unpack_header(payload, path="x.rec", record=3)
            continue
        header, end = unpack_header(payload)
        assert end == 24 + 4 * flag
        assert (header.flag, header.id, header.id2) == (ref[0], ref[2], ref[3])
        if flag:
            assert header.label.dtype == np.float32
            assert header.label.tobytes() == payload[24:end]
        else:
            assert header.label == ref[1] and isinstance(header.label, float)
        assert unpack(payload)[1] == payload[end:]


def test_unpack_header_errors_name_path_and_record():
    with pytest.raises(RecordFormatError, match="payload of 10 bytes is shorter than the "
                       "24-byte image header") as caught:
        unpack_header(b"\0" * 10, path="x.rec", record=4)
    assert (caught.value.path, caught.value.record) == ("x.rec", 4)


@pytest.mark.parametrize("flag,width,outcome", [
    (0, 1, "scalar"), (0, 2, "not scalar"), (1, 1, "packed"), (3, 2, "packed"),
    (2, 3, "too few"), (5, 5, "packed")])
def test_label_rule(flag, width, outcome):
    labels = np.arange(max(flag, 1), dtype=np.float32) + 1
    header = IRHeader(flag, 7.0 if flag == 0 else labels, 1, 0)
    if outcome == "scalar":
        assert header_labels(header, width) == np.float32(7)
    elif outcome == "packed":
        got = header_labels(header, width)
        assert np.array_equal(np.atleast_1d(got), labels[:width])
    else:
        message = "single label" if outcome == "not scalar" else f"{flag} packed labels"
        with pytest.raises(LabelError, match=message):
            header_labels(header, width, path="x.rec", record=2)


def test_id_labels_look_ids_up_as_a_dict_would():
    rng = random.Random(3)
    table = {rng.getrandbits(64): np.float32(rng.random()) for _ in range(300)}
    table[0] = np.float32(1)
    table[(1 << 64) - 1] = np.float32(2)
    rule = IdLabels(table, 1, source="list.lst", path="x.rec")
    for key, value in table.items():
        assert rule(IRHeader(0, 0.0, key, 0), 1) == value
    for missing in (5, (1 << 64) - 2, -1, 1 << 64, 2.5):
        if missing in table:
            continue
        with pytest.raises(LabelError, match=f"image id {missing} is not in list.lst"):
            rule(IRHeader(0, 0.0, missing, 0), 9)
    wide = IdLabels({4: np.array([1, 2], np.float32)}, 2, source="list.lst")
    got = wide(IRHeader(0, 0.0, 4, 0), 0)
    assert got.dtype == np.float32 and got.tolist() == [1, 2]
    got[0] = 9  # a copy: the table stays
    assert wide(IRHeader(0, 0.0, 4, 0), 0).tolist() == [1, 2]


def test_no_python_copy_of_the_arithmetic_is_left():
    assert not hasattr(framing, "_LENGTH_MASK")
    assert "image_header" in header_module.unpack_header.__code__.co_names
    assert "_IR_FORMAT" not in header_module.unpack_header.__code__.co_names
    assert "label_rule" in labels_module.header_labels.__code__.co_names
