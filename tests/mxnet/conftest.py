"""Cross-checks against the real mxnet 1.9.1, run in its own venv (``ci/setup_mxnet_venv.sh``).

``mxnet_python`` is ``$RECPIPE_MXNET_PYTHON`` or ``<repo>/.venv-mxnet/bin/python``; the tests skip
when neither works. mxnet code runs as subprocesses of ``mx_helpers.py`` (JSON in, JSON out).
"""

import base64
import json
import os
import struct
import subprocess
from pathlib import Path

import cv2
import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
HELPERS = HERE / "mx_helpers.py"
CALL_TIMEOUT = 120

# Image tree for the im2rec cross-checks: nested folders, .jpg/.JPG/.jpeg/.png, a space in a name.
TREE = {
    "top.jpg": (26, 34),
    "alpha/one.jpg": (30, 24),
    "alpha/Two.JPG": (22, 30),
    "alpha/deep/three.png": (28, 28),
    "beta/with space.jpg": (34, 26),
    "beta/four.jpeg": (24, 36),
    "beta/five.png": (32, 22),
    "gamma/six.JPG": (25, 31),
    "gamma/rotated.jpg": (18, 40),  # carries EXIF orientation 6: imread turns it to 40x18
    "gamma/notes.txt": None,
}


def _venv_python():
    configured = os.environ.get("RECPIPE_MXNET_PYTHON")
    return Path(configured) if configured else REPO_ROOT / ".venv-mxnet" / "bin" / "python"


@pytest.fixture(scope="session")
def mxnet_python():
    """Path of a python that imports mxnet 1.9.1; skips the test when there is none."""
    python = _venv_python()
    if not python.exists():
        pytest.skip(f"no mxnet venv at {python}: run ci/setup_mxnet_venv.sh "
                    "(or set RECPIPE_MXNET_PYTHON)")
    probe = subprocess.run([str(python), "-c", "import mxnet; print(mxnet.__version__)"],
                           capture_output=True, text=True, timeout=CALL_TIMEOUT)
    if probe.returncode != 0:
        pytest.skip(f"{python} cannot import mxnet: {probe.stderr.strip()[-300:]}")
    return str(python)


class MxHelpers:
    """Runs ``mx_helpers.py COMMAND`` in the mxnet venv, exchanging JSON through tmp files."""

    def __init__(self, python, workdir):
        self.python = python
        self.workdir = Path(workdir)
        self.calls = 0

    def __call__(self, command, spec):
        self.calls += 1
        spec_path = self.workdir / f"spec{self.calls}.json"
        out_path = self.workdir / f"out{self.calls}.json"
        spec_path.write_text(json.dumps(spec))
        done = subprocess.run([self.python, str(HELPERS), command, str(spec_path), str(out_path)],
                              capture_output=True, text=True, timeout=CALL_TIMEOUT)
        if done.returncode != 0:
            raise AssertionError(f"mx_helpers {command} failed ({done.returncode}):\n"
                                 f"{done.stderr[-3000:]}")
        return json.loads(out_path.read_text())


@pytest.fixture(scope="session")
def mx(mxnet_python, tmp_path_factory):
    return MxHelpers(mxnet_python, tmp_path_factory.mktemp("mx_helpers"))


def b64(data):
    return base64.b64encode(bytes(data)).decode("ascii")


def unb64(text):
    return base64.b64decode(text)


def smooth_image(shape, seed):
    """A smooth colour gradient (JPEG-friendly, so decoders of different versions agree closely)."""
    rng = np.random.default_rng(seed)
    h, w = shape
    base = rng.uniform(40, 200, 3)
    slope = rng.uniform(-2, 2, (2, 3))
    y, x = np.mgrid[0:h, 0:w]
    img = base + y[..., None] * slope[0] + x[..., None] * slope[1]
    return np.clip(img, 0, 255).astype(np.uint8)


def with_exif_orientation(jpeg, orientation):
    """Insert an APP1 Exif segment holding only the Orientation tag after the SOI marker."""
    entry = struct.pack("<HHIHH", 0x0112, 3, 1, orientation, 0)
    body = b"Exif\x00\x00II*\x00" + struct.pack("<IH", 8, 1) + entry + struct.pack("<I", 0)
    return jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(body) + 2) + body + jpeg[2:]


def make_tree(root):
    """Write TREE under ``root``; return the image paths relative to it."""
    images = []
    for seed, (name, shape) in enumerate(TREE.items()):
        path = Path(root) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if shape is None:
            path.write_text("not an image")
            continue
        ext = ".png" if name.lower().endswith(".png") else ".jpg"
        data = cv2.imencode(ext, smooth_image(shape, seed))[1].tobytes()
        if "rotated" in name:
            data = with_exif_orientation(data, 6)
        path.write_bytes(data)
        images.append(name)
    return images


@pytest.fixture(scope="session")
def image_tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("tree") / "images"
    make_tree(root)
    return root
