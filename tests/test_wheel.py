"""Packaging: the manylinux wheel from ``tools/build_wheel.sh`` carries libjpeg-turbo, so installed
into a fresh venv where the system's libjpeg, libturbojpeg and headers are hidden (a private mount
namespace, /dev/null bound over each) it still has every native path; and a build from source
without the headers leaves out only the libjpeg extension (_batch), saying so once.

Hiding needs root and ``unshare -m``; the tests that hide skip, saying why, where either is
missing. The wheel is built once for this module (the running Python only), about half a minute.
Nothing depends on which kind of Python runs the tests (a venv from ``python -m venv`` or
``uv venv``, or the system's): the wheel's venv takes recpipe's dependencies from the
site-packages the tests themselves import from, not from a base interpreter's.
"""

import glob
import importlib.util
import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NATIVE = ("_batch", "_kernels", "_resize", "_colour", "_crc32c", "_plan")
LIB_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib")
HEADER_DIRS = ("/usr/include", "/usr/local/include")


def _system_jpeg_files():
    """The real files behind the system's libjpeg/libturbojpeg libraries and JPEG headers."""
    patterns = [os.path.join(d, sub, name) for d in LIB_DIRS for sub in ("", "*")
                for name in ("libjpeg.so*", "libturbojpeg.so*")]
    patterns += [os.path.join(d, sub, name) for d in HEADER_DIRS for sub in ("", "*")
                 for name in ("jpeglib.h", "jconfig.h", "jmorecfg.h", "jerror.h", "turbojpeg.h")]
    found = {os.path.realpath(p) for pattern in patterns for p in glob.glob(pattern)}
    return sorted(p for p in found if os.path.isfile(p))


def _hiding_problem(tmp_path):
    """Why files cannot be hidden here, or None."""
    if not sys.platform.startswith("linux"):
        return "hiding libraries needs Linux mount namespaces"
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "unshare/mount (util-linux) not installed"
    target = tmp_path / "probe"
    target.write_text("visible")
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            f"mount --bind /dev/null {target} && test ! -s {target}"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        return f"unshare -m / mount --bind not permitted here: {probe.stderr.strip()[:200]}"
    return None


def _hidden(command, files):
    """``command`` (argv) run with /dev/null bound over ``files`` in a private mount namespace."""
    binds = " && ".join(f"mount --bind /dev/null '{f}'" for f in files) or "true"
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            f'{binds} && exec "$@"', "hide"] + [str(part) for part in command]


def _clean_env(**extra):
    """This environment without what would let the checkout's recpipe shadow an installed one."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(extra)
    return env


def _pip():
    """pip of the running Python (tools/test.sh adds it to a venv that has none)."""
    if importlib.util.find_spec("pip") is None:
        pytest.skip(f"no pip in {sys.executable} (a uv venv has none): bash tools/test.sh adds it")
    return [sys.executable, "-m", "pip"]


def _site_dirs():
    """The site-packages folders the running tests import from: the active venv's (and its
    base's only when the venv includes them), or the system Python's, and the user's."""
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return [d for d in dirs if os.path.isdir(d)]


@pytest.fixture(scope="module")
def hide_ok(tmp_path_factory):
    problem = _hiding_problem(tmp_path_factory.mktemp("probe"))
    if problem:
        pytest.skip(problem)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The repaired manylinux wheel for the running Python."""
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler: the wheel's extensions cannot be built")
    if not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        pytest.skip("no Python.h for this interpreter: the wheel's extensions cannot be built")
    if not any(f.endswith("jpeglib.h") for f in _system_jpeg_files()):
        pytest.skip("no jpeglib.h (apt-get install libjpeg62-turbo-dev): the wheel would lack "
                    "_batch")
    _pip()  # build_wheel.sh runs `python -m pip wheel`
    out = tmp_path_factory.mktemp("dist")
    build = subprocess.run(["bash", str(ROOT / "tools" / "build_wheel.sh"), str(out),
                            sys.executable], capture_output=True, text=True, timeout=900,
                           env=_clean_env())
    assert build.returncode == 0, build.stderr[-4000:]
    wheels = sorted(out.glob("recpipe-*-manylinux_*.whl"))
    assert len(wheels) == 1, (list(out.iterdir()), build.stderr[-2000:])
    return wheels[0]


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    """A fresh venv with the wheel installed: recpipe only from the wheel; numpy, OpenCV, fsspec,
    tqdm from the site-packages the tests run with (a .pth file lists them after the venv's
    own), which hold them whether these run in a venv or on the system's Python. (A venv's
    --system-site-packages would give the base interpreter's, without them in a venv.)"""
    folder = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True,
                   timeout=300, env=_clean_env())
    python = str(folder / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path("
                              "'purelib'))"], capture_output=True, text=True, check=True,
                             timeout=60, env=_clean_env()).stdout.strip()
    Path(purelib, "recpipe-test-dependencies.pth").write_text("\n".join(_site_dirs()) + "\n")
    install = subprocess.run(_pip() + ["--python", python, "install", "-q",
                                       "--disable-pip-version-check", "--no-deps", "--no-index",
                                       str(wheel)],
                             capture_output=True, text=True, timeout=300, env=_clean_env())
    assert install.returncode == 0, install.stderr[-2000:]
    return folder


def test_wheel_carries_libjpeg_turbo(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for name in NATIVE:
        assert any(n.startswith(f"recpipe/{name}.") and n.endswith(".so") for n in names), name
    vendored = [n for n in names if n.startswith("recpipe.libs/libjpeg") and ".so" in n]
    assert len(vendored) == 1, names
    notice = zipfile.ZipFile(wheel).read("recpipe.libs/libjpeg-turbo.copyright").decode()
    assert "Independent JPEG Group" in notice  # the IJG licence's required acknowledgement
    assert "LICENSE" in " ".join(names)  # dist-info/licenses/LICENSE


_CHECK = """
import ctypes, json, sys
try:
    ctypes.CDLL("libjpeg.so.62")
    system_libjpeg = True
except OSError:
    system_libjpeg = False
import recpipe
files = {"recpipe": recpipe.__file__}
for name in %r:
    files[name] = __import__("recpipe." + name, fromlist=["_"]).__file__
maps = sorted({line.split()[-1] for line in open("/proc/self/maps") if "jpeg" in line})
print(json.dumps({"system_libjpeg": system_libjpeg, "files": files, "jpeg_maps": maps}))
""" % (NATIVE,)


def test_installed_wheel_needs_no_system_libjpeg(venv, hide_ok, tmp_path):
    hidden = _system_jpeg_files()
    python = venv / "bin" / "python"
    run = subprocess.run(_hidden([python, "-c", _CHECK], hidden), capture_output=True,
                         text=True, timeout=300, cwd=tmp_path, env=_clean_env())
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout)
    assert not report["system_libjpeg"], "the system's libjpeg.so.62 was not hidden"
    for name, path in report["files"].items():
        assert Path(path).resolve().is_relative_to(venv.resolve()), (name, path)
    assert any("/recpipe.libs/libjpeg" in m for m in report["jpeg_maps"]), report["jpeg_maps"]
    assert not [m for m in report["jpeg_maps"] if m in hidden], report["jpeg_maps"]


def test_doctor_and_demo_run_native_from_the_wheel(venv, hide_ok, tmp_path):
    hidden = _system_jpeg_files()
    recpipe = venv / "bin" / "recpipe"
    doctor = subprocess.run(_hidden([recpipe, "doctor", "--json", "--no-measure"], hidden),
                            capture_output=True, text=True, timeout=300, cwd=tmp_path,
                            env=_clean_env())
    assert doctor.returncode == 0, doctor.stderr[-3000:]
    paths = json.loads(doctor.stdout)["fast_paths"]
    assert {name: paths[name]["present"] for name in NATIVE} == dict.fromkeys(NATIVE, True)
    if any("turbojpeg" in f for f in hidden):
        assert paths["libturbojpeg"]["present"] is False  # the hiding reached the loader

    demo = subprocess.run(_hidden([recpipe, "demo", "--classes", "2", "--per-class", "16",
                                   "--seconds", "0.2", "--threads", "2", "--json"], hidden),
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=_clean_env())
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "running without" not in demo.stderr, demo.stderr  # the slow-path note
    results = json.loads(demo.stdout)
    assert set(results["configs"]) >= {"train", "val"}
    assert all(config["images_per_s"] > 0 for config in results["configs"].values())


def test_build_without_headers_leaves_out_the_libjpeg_extension_once(hide_ok, tmp_path):
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    headers = [f for f in _system_jpeg_files() if f.endswith(".h")]
    build = [sys.executable, "setup.py", "-q", "build_ext", "--build-lib", tmp_path / "lib",
             "--build-temp", tmp_path / "tmp"]
    run = subprocess.run(_hidden(build, headers), capture_output=True, text=True, timeout=300,
                         cwd=ROOT, env=_clean_env())
    assert run.returncode == 0, run.stderr[-3000:]
    built = sorted(p.name.split(".")[0] for p in (tmp_path / "lib" / "recpipe").glob("*.so"))
    assert "_resize" in built and "_colour" in built, built
    assert "_crc32c" in built and "_plan" in built and "_batch" not in built, built
    notes = [line for line in run.stderr.splitlines() if "jpeglib.h" in line]
    assert len(notes) == 1, run.stderr
    assert "without recpipe._batch (" in notes[0]
    assert "pip install recpipe" in notes[0] and "apt-get install libjpeg62-turbo-dev" in notes[0]
    assert "warning: not building" not in run.stderr, run.stderr

    strict = subprocess.run(_hidden(build, headers), capture_output=True, text=True, timeout=300,
                            cwd=ROOT, env=_clean_env(RECPIPE_REQUIRE_EXTENSIONS="1"))
    assert strict.returncode != 0
    assert "RECPIPE_REQUIRE_EXTENSIONS" in strict.stderr


def test_sdist_without_headers_builds_a_wheel_without_the_libjpeg_extension(wheel, hide_ok,
                                                                             tmp_path):
    """pip building the sdist where jpeglib.h is hidden: a wheel with _resize, _colour, _crc32c,
    _plan and the note (pip shows the build's output with -v)."""
    sdist = next(wheel.parent.glob("recpipe-*.tar.gz"))
    headers = [f for f in _system_jpeg_files() if f.endswith(".h")]
    build = [sys.executable, "-m", "pip", "wheel", "-v", "--disable-pip-version-check",
             "--no-deps", "-w", tmp_path, sdist]
    run = subprocess.run(_hidden(build, headers), capture_output=True, text=True, timeout=600,
                         cwd=tmp_path, env=_clean_env())
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    output = run.stdout + run.stderr
    assert len([line for line in output.splitlines() if "note: jpeglib.h" in line]) == 1, output
    names = zipfile.ZipFile(next(tmp_path.glob("recpipe-*.whl"))).namelist()
    built = {n.split("/")[1].split(".")[0] for n in names if n.endswith(".so")}
    assert built == {"_kernels", "_resize", "_colour", "_crc32c", "_plan"}, names
