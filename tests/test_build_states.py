"""recpipe's two build states: with libjpeg (every extension) and without (``_resize``,
``_colour``, ``_crc32c``, ``_plan``; no ``_batch``). The state without libjpeg is built here on
purpose (``RECPIPE_WITHOUT_LIBJPEG=1``, in a copy of the tracked tree) and must decode on the Python
path with the same pixels as this checkout; a required extension that cannot be built fails the
build.
"""

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

from recpipe._optional import extension, native

ROOT = Path(__file__).resolve().parents[1]
REQUIRED = ("_kernels", "_resize", "_colour", "_crc32c", "_plan")

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                reason="no C compiler: nothing can be built")


def _env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "RECPIPE_WITHOUT_LIBJPEG", "RECPIPE_REQUIRE_EXTENSIONS")}
    env.update(extra)
    return env


def _tracked_copy(target):
    """The tracked files of this checkout, as they are on disk, under ``target``."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True,
                           timeout=60).stdout.decode().split("\0")
    target.mkdir()
    for name in filter(None, names):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


@pytest.fixture(scope="module")
def without_libjpeg(tmp_path_factory):
    """A copy of the tree built in place in the state without libjpeg, and the build's stderr."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    tree = _tracked_copy(tmp_path_factory.mktemp("state") / "tree")
    build = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
                           cwd=tree, capture_output=True, text=True, timeout=600,
                           env=_env(RECPIPE_WITHOUT_LIBJPEG="1"))
    assert build.returncode == 0, build.stderr[-3000:]
    return tree, build.stderr


def test_the_required_extensions_are_built_here():
    for name in REQUIRED:
        assert native(name) is not None and extension(name) is native(name)


def test_without_libjpeg_only_the_libjpeg_extension_is_left_out(without_libjpeg):
    tree, stderr = without_libjpeg
    built = sorted(p.name.split(".")[0] for p in (tree / "recpipe").glob("*.so"))
    assert built == sorted(REQUIRED), built
    notes = [line for line in stderr.splitlines() if "RECPIPE_WITHOUT_LIBJPEG" in line]
    assert len(notes) == 1 and "recpipe._batch" in notes[0], stderr


def test_requiring_every_extension_refuses_the_state_without_libjpeg(tmp_path):
    run = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--build-lib",
                          tmp_path / "lib", "--build-temp", tmp_path / "tmp"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600,
                         env=_env(RECPIPE_WITHOUT_LIBJPEG="1", RECPIPE_REQUIRE_EXTENSIONS="1"))
    assert run.returncode != 0
    assert "RECPIPE_REQUIRE_EXTENSIONS" in run.stderr and "Traceback" not in run.stderr


def test_a_required_extension_that_cannot_be_built_fails_the_build(tmp_path):
    run = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--build-lib",
                          tmp_path / "lib", "--build-temp", tmp_path / "tmp"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600,
                         env=_env(CC=str(tmp_path / "no-such-compiler")))
    assert run.returncode != 0
    errors = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "recpipe._kernels could not be built" in errors[0], run.stderr
    assert "needs a C compiler" in errors[0] and "Traceback" not in run.stderr
    assert "jpeglib.h" not in run.stderr  # the compiler is what is missing, not libjpeg
    assert not list((tmp_path / "lib").rglob("*.so"))


# one batch per decoder and recipe, as sha256 of its bytes; run by this Python in both states
_BATCHES = r"""
import hashlib, json, sys
# an editable install's finder (pip install -e .) would serve recpipe._batch from the checkout
# when the PYTHONPATH tree has none: this tree's modules only
sys.meta_path[:] = [f for f in sys.meta_path
                    if not getattr(f, "__module__", "").startswith("__editable__")]
import numpy as np
from recpipe import ImageLoader
from recpipe._optional import extension
from recpipe.decode.decoders import available_decoders
from recpipe.report.doctor import diagnose

rec, recipes = sys.argv[1], json.loads(sys.argv[2])
out = {"batch": extension("_batch") is not None, "decoders": available_decoders(),
       "doctor": {k: v["present"] for k, v in diagnose(measure=False)["fast_paths"].items()},
       "build": diagnose(measure=False)["build"],
       "sums": {}}
for decoder in ("opencv", "turbojpeg"):
    if decoder not in available_decoders():
        continue
    for name, keywords in recipes.items():
        with ImageLoader(rec, 8, (3, 40, 48), decoder=decoder, seed=7, threads=1,
                         **keywords) as loader:
            native = loader.records.native
            digest = hashlib.sha256()
            for images, labels in loader:
                digest.update(np.ascontiguousarray(images).tobytes())
                digest.update(labels.tobytes())
        out["sums"][f"{decoder}/{name}"] = [digest.hexdigest(), native]
print(json.dumps(out))
"""
RECIPES = {
    "centre": dict(dtype="uint8"),
    "train": dict(rand_crop=True, rand_mirror=True, resize=56, brightness=0.3, contrast=0.3,
                  saturation=0.3, mean_r=120.0, std_g=50.0),
    "rrc": dict(random_resized_crop=True, min_random_area=0.3, max_aspect_ratio=1.3,
                min_aspect_ratio=0.75, rand_mirror=True, dtype="float16", scale=1 / 255),
    "affine": dict(max_rotate_angle=10, pad=3, fill_value=9, pca_noise=0.1),
}


def _pack(path):
    import cv2

    import recpipe

    rng = np.random.default_rng(3)
    with recpipe.RecordWriter(str(path)) as writer:
        for i in range(20):
            h, w = int(rng.integers(48, 140)), int(rng.integers(48, 140))
            img = cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (7, 7), 0)
            flags = [cv2.IMWRITE_JPEG_QUALITY, 90, cv2.IMWRITE_JPEG_PROGRESSIVE, int(i % 3 == 0)]
            data = cv2.imencode(".jpg", img, flags)[1].tobytes()
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i % 4), i, 0), data))
    return str(path)


def _batches(pythonpath, rec, cwd):
    run = subprocess.run([sys.executable, "-c", _BATCHES, rec, json.dumps(RECIPES)], cwd=cwd,
                         capture_output=True, text=True, timeout=600,
                         env=_env(PYTHONPATH=str(pythonpath)))
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


def test_the_state_without_libjpeg_decodes_the_same_pixels(without_libjpeg, tmp_path):
    tree, _ = without_libjpeg
    rec = _pack(tmp_path / "mixed.rec")
    bare = _batches(tree, rec, tmp_path)
    full = _batches(ROOT, rec, tmp_path)
    assert not bare["batch"] and "libjpeg" not in bare["decoders"]
    assert bare["doctor"]["_batch"] is False and bare["build"] == "without libjpeg"
    assert all(bare["doctor"][name] for name in REQUIRED), bare["doctor"]
    assert set(bare["sums"]) == set(full["sums"]) and bare["sums"]
    for key, (digest, native_run) in bare["sums"].items():
        assert not native_run, key  # no _batch: every run takes the Python path
        assert digest == full["sums"][key][0], key  # and gives the full build's pixels
    if full["batch"] and "turbojpeg" in full["decoders"]:
        assert full["sums"]["turbojpeg/train"][1]  # the full build did run it natively


def test_sdist_tarball_lists_the_region_decoder_header(tmp_path):
    """csrc/batch/batch.c includes csrc/jpeg/region.h: the sdist must carry it (a wheel built
    from the sdist would fail to compile otherwise)."""
    run = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", tmp_path], cwd=ROOT,
                         capture_output=True, text=True, timeout=600, env=_env())
    if run.returncode != 0:
        pytest.skip(f"setup.py sdist does not run here: {run.stderr[-300:]}")
    with tarfile.open(next(tmp_path.glob("recpipe-*.tar.gz"))) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"csrc/batch/batch.c", "csrc/jpeg/region.h", "csrc/jpeg/roi.h"} <= names
