"""A file that is not RecordIO is called so everywhere, with what it looks like (issue 23)."""

import cv2
import numpy as np
import pytest

import recpipe
from recpipe.errors import RecordFormatError
from recpipe.io import IRHeader, pack
from recpipe.io.format.sniff import looks_like


@pytest.fixture
def files(tmp_path):
    jpeg = cv2.imencode(".jpg", np.full((16, 16, 3), 90, np.uint8))[1].tobytes()
    (tmp_path / "img.jpg").write_bytes(jpeg)
    (tmp_path / "img.png").write_bytes(cv2.imencode(".png", np.zeros((4, 4, 3), np.uint8))[1])
    with recpipe.RecordWriter(str(tmp_path / "a.rec")) as writer:
        for i in range(3):
            writer.write(pack(IRHeader(0, float(i), i, 0), jpeg))
    (tmp_path / "a.lst").write_text("0\t1.000000\tcat/a.jpg\n1\t0.000000\tdog/b.jpg\n")
    (tmp_path / "junk.bin").write_bytes(b"\x01\x02\x03\x04" * 8)
    return tmp_path


@pytest.mark.parametrize("name, what", [("img.jpg", "a JPEG image"), ("img.png", "a PNG image"),
                                        ("a.idx", "an .idx index"), ("a.lst", "a .lst image list"),
                                        ("junk.bin", None)])
def test_the_reader_says_what_a_non_recordio_file_is(files, name, what):
    with pytest.raises(RecordFormatError) as caught:
        recpipe.RecordReader(str(files / name))
    message = str(caught.value)
    assert message.startswith(f"{files / name} is not a RecordIO file (it starts with 0x")
    assert "bad magic" not in message
    assert (f"this looks like {what}" in message) if what else ("looks like" not in message)
    assert caught.value.path == str(files / name) and caught.value.offset == 0


def test_looks_like_reads_only_the_first_bytes():
    assert looks_like(b"\xff\xd8\xff\xe0" + b"\0" * 100) == "a JPEG image"
    assert looks_like(b"0\t0\n1\t4096\n2\t8192\n").startswith("an .idx")
    assert looks_like(b"3\t0.5\t1\tx y/z.jpg\n4\t2\t0\tq.jpg\n5\t1") .startswith("a .lst")
    assert looks_like(b"hello world\n") is None and looks_like(b"") is None
