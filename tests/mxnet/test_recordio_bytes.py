"""RecordWriter / pack / unpack byte-for-byte against mx.recordio (mxnet 1.9.1)."""

import numpy as np
import pytest

import recpipe
from recpipe.io import pack

from .conftest import b64, unb64

pytestmark = pytest.mark.mxnet

MAGIC = bytes.fromhex("0a23d7ce")


def random_payloads(seed=11):
    """Payloads exercising dmlc's magic escaping: aligned/unaligned magic, empties, all-magic."""
    rng = np.random.RandomState(seed)
    payloads = [b"", MAGIC, MAGIC * 3, b"x" + MAGIC, b"ab" + MAGIC + b"c", MAGIC + b"\0",
                b"1234" + MAGIC + MAGIC + b"5678", b"\n", b"abc" + MAGIC[:2]]
    for _ in range(40):
        n = int(rng.randint(0, 120))
        data = bytearray(rng.randint(0, 256, n, dtype=np.uint8).tobytes())
        for _ in range(int(rng.randint(0, 4))):
            if len(data) >= 4:
                at = int(rng.randint(0, len(data) - 3))
                data[at:at + 4] = MAGIC  # aligned or not, depending on `at`
        payloads.append(bytes(data))
    payloads.append(rng.randint(0, 256, 70000, dtype=np.uint8).tobytes() + MAGIC)
    return payloads


@pytest.fixture(scope="module")
def written(mx, tmp_path_factory):
    """The same records written by MXIndexedRecordIO and by RecordWriter, keys shuffled."""
    tmp = tmp_path_factory.mktemp("bytes")
    payloads = random_payloads()
    keys = [int(k) for k in np.random.RandomState(3).permutation(len(payloads)) * 7]
    mx("write-indexed", {"rec": str(tmp / "mx.rec"), "idx": str(tmp / "mx.idx"),
                         "records": [[k, b64(p)] for k, p in zip(keys, payloads)]})
    with recpipe.RecordWriter(str(tmp / "ours.rec")) as writer:
        for key, payload in zip(keys, payloads):
            writer.write(payload, key=key)
    return tmp, keys, payloads


def test_rec_and_idx_are_byte_identical_to_mxindexedrecordio(written):
    tmp, _, payloads = written
    assert any(MAGIC in p for p in payloads)
    assert (tmp / "ours.rec").read_bytes() == (tmp / "mx.rec").read_bytes()
    assert (tmp / "ours.idx").read_bytes() == (tmp / "mx.idx").read_bytes()


def test_mxnet_reads_every_key_we_wrote(written, mx):
    tmp, keys, payloads = written
    result, = mx("read-indexed", {"files": [[str(tmp / "ours.rec"), str(tmp / "ours.idx")]],
                                  "headers": False})["files"]
    assert result["keys"] == keys
    assert [unb64(r["payload"]) for r in result["records"]] == payloads
    assert result["sequential"] == len(payloads)


def test_we_read_every_key_mxnet_wrote(written):
    tmp, keys, payloads = written
    with recpipe.RecordReader(str(tmp / "mx.rec")) as reader:
        assert list(reader.keys) == keys
        assert [reader.read_key(k) for k in keys] == payloads
        assert list(reader) == payloads


HEADERS = [
    (0, 3.0, 1, 0),
    (5, 2.5, 42, 9),            # scalar label: mxnet forces flag 0
    (0, [1.5, 2.5], 7, 3),      # list label: flag = 2, labels after the header
    (0, [4.0], 8, 0),           # one-element list: flag 1, not 0
    (1, [1.0, -2.0, 3.25, 1e6], 2**40, 2**63),
]


def test_pack_and_unpack_match_mx_recordio(mx):
    rng = np.random.RandomState(5)
    datas = [rng.randint(0, 256, int(n), dtype=np.uint8).tobytes() for n in (0, 1, 17, 64, 301)]
    ours = [pack(recpipe.IRHeader(*h), d) for h, d in zip(HEADERS, datas)]
    result = mx("pack", {"items": [{"header": list(h), "data": b64(d), "ours": b64(o)}
                                   for h, d, o in zip(HEADERS, datas, ours)]})
    assert [unb64(p) for p in result["packed"]] == ours
    for (_, label, id_, id2), data, theirs in zip(HEADERS, datas, result["unpacked"]):
        flag = 0 if isinstance(label, float) else len(label)
        assert (theirs["flag"], theirs["id"], theirs["id2"]) == (flag, id_, id2)
        assert theirs["label"] == label
        assert unb64(theirs["image"]) == data
    for packed, theirs in zip(result["packed"], result["unpacked"]):
        header, image = recpipe.unpack(unb64(packed))
        assert header.flag == theirs["flag"] and image == unb64(theirs["image"])
        assert np.asarray(header.label).tolist() == theirs["label"]
