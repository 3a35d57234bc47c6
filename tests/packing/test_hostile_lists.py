"""Lists and folders that would pack the wrong files or labels without a word (issue 20,
item 9): tabs and newlines in file names, odd .lst labels, a class folder changed mid-pack."""

import math
import os

import cv2
import numpy as np
import pytest

import recpipe
from recpipe.io.sidecars.index import format_list_line, parse_list, read_list
from recpipe.packing import packer
from recpipe.packing.listing import make_lists
from recpipe.packing.packer import pack_dataset


def _jpeg(value, size=20):
    return cv2.imencode(".jpg", np.full((size, size, 3), value, np.uint8))[1].tobytes()


@pytest.mark.parametrize("name", ["a\tb.jpg", "a\nb.jpg", "a\rb.jpg", " a.jpg", "\u00a0a.jpg"])
def test_a_file_name_that_would_shift_lst_columns_is_refused(tmp_path, name):
    root = tmp_path / "images"
    root.mkdir()
    (root / "ok.jpg").write_bytes(_jpeg(1))
    (root / name).write_bytes(_jpeg(2))
    with pytest.raises(ValueError, match="cannot be written to a .lst line"):
        make_lists(str(tmp_path / "out"), str(root))
    assert not os.path.exists(tmp_path / "out.lst")  # nothing half-written published
    with pytest.raises(ValueError, match=repr(name)[1:-1].replace("\\", "\\\\")):
        format_list_line(0, (1.0,), name)


@pytest.mark.parametrize("label", ["nan", "inf", "-inf", "1e309", "1_0", "\u0661", "0x10", "",
                                   "1.0.0"])
def test_odd_lst_labels_are_rejected_by_default(label):
    entries, skipped = parse_list(f"0\t2.5\tgood.jpg\n1\t{label}\tbad.jpg\n")
    assert [e.path for e in entries] == ["good.jpg"] and skipped == [2]


def test_odd_lst_indexes_are_rejected():
    entries, skipped = parse_list("1_0\t1\ta.jpg\n\u0661\t1\tb.jpg\n+3\t-.5e1\tc.jpg\n")
    assert skipped == [1, 2] and entries == [(3, (-5.0,), "c.jpg")]


def test_non_finite_labels_are_accepted_on_request(tmp_path):
    lst = tmp_path / "x.lst"
    lst.write_text("0\tnan\ta.jpg\n1\t-inf\tb.jpg\n2\t1e309\tc.jpg\n3\t1_0\td.jpg\n")
    entries, skipped = read_list(str(lst), allow_nonfinite=True)
    assert math.isnan(entries[0].labels[0]) and entries[1].labels == (-math.inf,)
    assert entries[2].labels == (math.inf,) and skipped == [4]
    assert read_list(str(lst))[1] == [1, 2, 3, 4]


def test_a_class_folder_changed_mid_pack_is_reported(tmp_path, monkeypatch):
    src = tmp_path / "src"
    for cls in ("cat", "dog"):
        (src / cls).mkdir(parents=True)
        for i in range(3):
            (src / cls / f"{i}.jpg").write_bytes(_jpeg(10 * i + (cls == "dog") * 100))
    real_load = packer.load_items

    def listed_then_replaced(*args, **kwargs):
        listed = real_load(*args, **kwargs)
        for i in range(3):  # another process replaces the dog folder's images
            (src / "dog" / f"{i}.jpg").write_bytes(_jpeg(200, size=64))
        return listed

    monkeypatch.setattr(packer, "load_items", listed_then_replaced)
    summary = pack_dataset(str(src), str(tmp_path / "out"), workers=0, pass_through=True)
    assert not summary.ok
    assert sorted(e["path"] for e in summary.errors) == [f"dog/{i}.jpg" for i in range(3)]
    assert all("changed since it was listed" in e["reason"] for e in summary.errors)
    with recpipe.RecordReader(str(tmp_path / "out.rec")) as reader:
        assert len(reader) == 3


def test_an_image_replaced_by_one_of_the_same_size_is_reported(tmp_path, monkeypatch):
    src = tmp_path / "src"
    (src / "cls").mkdir(parents=True)
    for i in range(3):
        (src / "cls" / f"{i}.jpg").write_bytes(_jpeg(10 * i))
    real_load = packer.load_items

    def listed_then_replaced(*args, **kwargs):
        listed = real_load(*args, **kwargs)
        victim = src / "cls" / "1.jpg"
        data = bytearray(victim.read_bytes())
        data[-3] ^= 0xFF  # same size, other bytes, a later modification time
        victim.write_bytes(bytes(data))
        info = os.stat(victim)
        os.utime(victim, ns=(info.st_atime_ns, info.st_mtime_ns + 10 ** 9))
        return listed

    monkeypatch.setattr(packer, "load_items", listed_then_replaced)
    summary = pack_dataset(str(src), str(tmp_path / "out"), workers=0, pass_through=True)
    assert [e["path"] for e in summary.errors] == ["cls/1.jpg"]
    assert "modified after the listing" in summary.errors[0]["reason"]
