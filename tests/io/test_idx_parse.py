"""The one .idx parser (``recpipe.io.sidecars.index.parse_idx``): plain integer lines parsed
in C (``recpipe._kernels.parse_idx``, csrc/index/idx_parse.h), whole or in chunks, to exactly
the table the text parse gives; anything else goes to the text parse, whose errors name the
line and the text."""

import numpy as np
import pytest

from recpipe._optional import native
from recpipe.errors import RecordFormatError
from recpipe.io.sidecars import index
from recpipe.io.sidecars.index import parse_idx, parse_index
from recpipe.io.sidecars.index_table import IndexTable
from recpipe.io.sources import BytesSource, LocalSource

CASES = [b"", b"0\t8\n", b"0\t8", b"5\t8\n3\t16\n", b"0\t8\r\n1\t16\r\n", b"+0\t+8\n-3\t4\n",
         b"-9223372036854775808\t0\n9223372036854775807\t9223372036854775807\n",
         b"0\t8\n\n1\t16\n", b" 0\t8\n", b"1_0\t8\n", b"007\t08\n"]


def _text(data):
    keys, offsets = parse_index(data.decode())
    return keys, offsets


@pytest.mark.parametrize("data", CASES)
def test_the_fast_parse_equals_the_text_parse(data):
    table = parse_idx(data)
    keys, offsets = _text(data)
    assert list(table.keys) == keys and table.offsets.tolist() == offsets


def test_random_indexes_whole_and_in_chunks(tmp_path, monkeypatch):
    rng = np.random.default_rng(5)
    for keyed in (False, True):
        count = 5000
        keys = rng.permutation(count * 3)[:count] if keyed else np.arange(count)
        offsets = np.cumsum(rng.integers(8, 1 << 20, count)) * 4
        data = "".join(f"{k}\t{o}\n" for k, o in zip(keys.tolist(), offsets.tolist())).encode()
        whole = parse_idx(data)
        assert whole.identity == (not keyed) and list(whole.keys) == keys.tolist()
        path = tmp_path / f"{keyed}.idx"
        path.write_bytes(data)
        for chunk_bytes in (999, 7):  # lines cut at chunk ends; lines longer than a chunk
            monkeypatch.setattr(index, "CHUNK_BYTES", chunk_bytes)
            with LocalSource(str(path)) as source:
                read = IndexTable(*index._source_arrays(source, str(path), int))
            assert read.offsets.tolist() == offsets.tolist()
            assert read.identity == (not keyed) and list(read.keys) == keys.tolist()
        assert index._source_arrays(BytesSource(data), "mem", int)[0].tolist() == \
            offsets.tolist()


@pytest.mark.parametrize("line, error", [
    (b"3\tfour\n", "index line 4: offset 'four' is not an integer"),
    (b"3\t-8\n", "index line 4: negative offset -8"),
    (b"3\t8\t9\n", "index line 4 has 3 fields"),
    (b"x\t8\n", "index line 4: key 'x' is not int"),
    (b"3\t99999999999999999999\n", "index line 4: offset 99999999999999999999 is too large")])
def test_the_text_fallback_keeps_its_precise_errors(line, error):
    data = b"0\t0\n1\t8\n2\t16\n" + line + b"4\t32\n"
    with pytest.raises(RecordFormatError, match=error):
        parse_idx(data, path="x.idx")


def test_the_c_parse_refuses_what_it_does_not_take():
    kernels = native("_kernels")
    for data in (b"0\t8\n\n", b"0 \t8\n", b"0\t-8\n", b"0\t8\t9\n", b"9223372036854775808\t0\n",
                 b"0\t8\r", b"1_0\t8\n", b"0\t\n", b"\t8\n"):
        count = kernels.idx_lines(data)
        keys, offsets = np.empty(count, np.int64), np.empty(count, np.int64)
        assert kernels.parse_idx(data, keys, offsets) == -1, data
    with pytest.raises(ValueError, match="int64 buffers"):
        kernels.parse_idx(b"0\t8\n", np.empty(2, np.int64), np.empty(2, np.int64))
