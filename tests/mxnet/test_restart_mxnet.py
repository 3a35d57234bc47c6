"""Files packed with restart markers (``recpipe pack --restart``) are standard JPEGs to the real
mxnet 1.9.1: ``mx.image.imdecode`` and ``mx.io.ImageRecordIter`` give the pixels they give for
the same images packed without them."""

import cv2
import numpy as np
import pytest

from recpipe._optional import extension
from recpipe.image.restart import restart_layout
from recpipe.io.reader import RecordReader
from recpipe.io.header import unpack
from recpipe.packing.packer import pack_dataset

pytestmark = pytest.mark.skipif(extension("_batch") is None, reason="recpipe._batch is not built")


def _photo(h, w, seed):
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (h // 5 + 1, w // 5 + 1, 3), dtype=np.uint8)
    img = cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)
    return cv2.add(img, rng.integers(0, 20, img.shape, dtype=np.uint8))


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    root = tmp_path_factory.mktemp("restart") / "photos"
    sizes = [(96, 128), (131, 77), (64, 200), (150, 150), (57, 61), (120, 90)]
    for i, (h, w) in enumerate(sizes):
        sampling = [cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444,
                    cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422][i % 3]
        path = root / f"c{i % 2}" / f"{i}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(cv2.imencode(".jpg", _photo(h, w, i), [
            cv2.IMWRITE_JPEG_QUALITY, 90, cv2.IMWRITE_JPEG_SAMPLING_FACTOR, sampling])[1].tobytes())
    out = root.parent
    for name, restart in (("plain", "off"), ("marked", "auto"), ("rows", 1)):
        pack_dataset(str(root), str(out / name), shuffle=False, workers=1, restart=restart)
    with RecordReader(str(out / "marked.rec")) as reader:
        assert all(restart_layout(unpack(reader[i])[1]) is not None for i in range(len(reader)))
    return out


def test_mxnet_decodes_the_same_pixels(mx, packed):
    decoded = {name: mx("decode-indexed", {"rec": str(packed / f"{name}.rec"),
                                           "idx": str(packed / f"{name}.idx")})["images"]
               for name in ("plain", "marked", "rows")}
    assert len(decoded["plain"]) == 6
    assert decoded["marked"] == decoded["plain"] == decoded["rows"]


def test_image_record_iter_reads_them_alike(mx, packed):
    runs = [dict(path_imgrec=str(packed / f"{name}.rec"), path_imgidx=str(packed / f"{name}.idx"),
                 data_shape=[3, 48, 48], resize=56, rand_crop=False)
            for name in ("plain", "marked")]
    plain, marked = mx("iter", {"runs": runs})["runs"]
    assert len(plain["labels"]) == 6
    assert marked == plain
