"""Bicubic resizes against the real mxnet 1.9.1: MXNet's wheel carries its own OpenCV, whose
8-bit bicubic is OpenCV's own fixed-point arithmetic, the one recpipe's Python path gets by
turning Intel IPP off (recpipe.image.opencv.resize) and recpipe._batch reproduces; the
opencv-python wheel's default (IPP) bicubic is further from MXNet's."""

import cv2
import numpy as np

from recpipe.image.opencv import resize

from .conftest import b64, unb64

# (source h, w), (output w, h): up, down, mixed, a large ratio
CASES = [((61, 83), (150, 120)), ((240, 320), (57, 43)), ((100, 100), (224, 224)),
         ((375, 500), (256, 341)), ((33, 47), (20, 90)), ((20, 30), (224, 160))]


def _images():
    rng = np.random.default_rng(1)
    for i, ((h, w), size) in enumerate(CASES):
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        yield (img if i % 2 else cv2.GaussianBlur(img, (5, 5), 0)), size


def test_mxnet_bicubic_is_opencvs_own_arithmetic(mx):
    images = list(_images())
    answer = mx("imresize", {"items": [{"image": b64(img.tobytes()), "shape": list(img.shape),
                                        "size": list(size), "interp": 2}
                                       for img, size in images]})
    ours_differ = ipp_differ = total = 0
    for (img, (w, h)), data in zip(images, answer["resized"]):
        theirs = np.frombuffer(unb64(data), np.uint8).reshape(h, w, 3)
        ours = resize(img, (w, h), interpolation=cv2.INTER_CUBIC)
        ours_differ += int((ours != theirs).sum())
        ipp_differ += int((cv2.resize(img, (w, h), interpolation=cv2.INTER_CUBIC)
                           != theirs).sum())
        total += theirs.size
    # measured: 1 of 0.59M values differs (MXNet's older OpenCV); IPP's: 24480 (4.2%)
    assert ours_differ <= total * 1e-5, (ours_differ, total)
    if cv2.ipp.useIPP():
        assert ipp_differ > total * 0.01, (ipp_differ, total)
