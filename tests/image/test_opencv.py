"""recpipe.image.opencv: OpenCV loaded in one place, and the one imdecode with one failure
behaviour (a DecodeError naming what failed) for every way OpenCV can fail; resize, whose
bicubic runs with Intel IPP off in the calling thread (ipp_off)."""

import os
import subprocess
import sys
import threading

import cv2
import numpy as np
import pytest

from recpipe.errors import DecodeError
from recpipe.image.opencv import imdecode, ipp_off, resize

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_imdecode_returns_opencvs_pixels():
    image = np.arange(8 * 8 * 3, dtype=np.uint8).reshape(8, 8, 3)
    png = cv2.imencode(".png", image)[1]
    assert np.array_equal(imdecode(png.tobytes(), cv2.IMREAD_COLOR), image)
    assert np.array_equal(imdecode(memoryview(png.tobytes()), cv2.IMREAD_COLOR), image)


@pytest.mark.parametrize("data, reason", [(b"", "no bytes"),
                                          (b"not an image at all", "unknown format"),
                                          (b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, "")])
def test_every_failure_is_one_decode_error_naming_what_failed(data, reason):
    with pytest.raises(DecodeError, match=f"OpenCV cannot decode the {len(data)}-byte file x.png"
                                          f".*{reason}") as caught:
        imdecode(data, cv2.IMREAD_COLOR, what="file x.png", path="a/x.png", record=7)
    assert caught.value.path == "a/x.png" and caught.value.record == 7


def test_the_callers_share_the_failure(tmp_path):
    import recpipe
    from recpipe.image import imdecode as mx_imdecode

    payload = recpipe.pack(recpipe.IRHeader(0, 1.0, 42, 0), b"garbage")
    for call in (lambda: recpipe.unpack_img(payload), lambda: mx_imdecode(b"garbage")):
        with pytest.raises(DecodeError, match="OpenCV cannot decode the 7-byte"):
            call()


SCRIPT = """
import os, sys
import recpipe, recpipe.decode, recpipe.packing.packer
assert "cv2" not in sys.modules or sys.argv[1] == "skip"
before = os.environ.get("OPENCV_IO_MAX_IMAGE_PIXELS")
from recpipe.image.opencv import load_cv2
load_cv2()
print(before, os.environ.get("OPENCV_IO_MAX_IMAGE_PIXELS"))
"""


def test_importing_recpipe_sets_no_environment_and_loading_opencv_sets_its_limit():
    env = {k: v for k, v in os.environ.items() if k != "OPENCV_IO_MAX_IMAGE_PIXELS"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, "check"], capture_output=True, text=True,
                          timeout=120, env=dict(env, PYTHONPATH=REPO_ROOT))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "89478485"]


# ------------------------------------------------------------------ bicubic without Intel IPP


def _bicubic_case():
    rng = np.random.default_rng(3)
    img = cv2.GaussianBlur(rng.integers(0, 256, (37, 52, 3), dtype=np.uint8), (3, 3), 0)
    return img, (71, 45)


def test_ipp_off_switches_the_calling_thread_only_and_restores_its_setting():
    before = cv2.ipp.useIPP()
    seen = []
    with ipp_off():
        assert not cv2.ipp.useIPP()
        other = threading.Thread(target=lambda: seen.append(cv2.ipp.useIPP()))
        other.start()
        other.join()
        with ipp_off():  # nested: the outer block's setting (off) comes back
            assert not cv2.ipp.useIPP()
        assert not cv2.ipp.useIPP()
    assert cv2.ipp.useIPP() == before
    assert seen == [before]  # OpenCV keeps the switch per thread: another thread keeps its own
    with pytest.raises(KeyError):
        with ipp_off():
            raise KeyError("boom")
    assert cv2.ipp.useIPP() == before


def test_resize_makes_bicubic_opencvs_own_arithmetic_whatever_the_threads_setting():
    img, size = _bicubic_case()
    with ipp_off():
        generic = cv2.resize(img, size, interpolation=cv2.INTER_CUBIC)
    before = cv2.ipp.useIPP()
    np.testing.assert_array_equal(resize(img, size, interpolation=cv2.INTER_CUBIC), generic)
    assert cv2.ipp.useIPP() == before
    out = np.zeros((45, 71, 3), np.uint8)
    assert resize(img, size, dst=out, interpolation=cv2.INTER_CUBIC) is out
    np.testing.assert_array_equal(out, generic)
    scaled = resize(img, None, fx=1.3, fy=0.7, interpolation=cv2.INTER_CUBIC)
    with ipp_off():
        np.testing.assert_array_equal(scaled, cv2.resize(img, None, fx=1.3, fy=0.7,
                                                         interpolation=cv2.INTER_CUBIC))
    for method in (cv2.INTER_NEAREST, cv2.INTER_LINEAR, cv2.INTER_AREA, cv2.INTER_LANCZOS4):
        np.testing.assert_array_equal(resize(img, size, interpolation=method),
                                      cv2.resize(img, size, interpolation=method))
    if before:  # with IPP (the pip wheels) cv2's own bicubic differs: the reason for the switch
        assert not np.array_equal(cv2.resize(img, size, interpolation=cv2.INTER_CUBIC), generic)
