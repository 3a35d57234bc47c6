#!/usr/bin/env bash
# The test command: sets up what the tests need on a fresh machine, then runs them. It works in
# the active venv (`python -m venv`, `uv venv`: pip is added where there is none) or, with none
# active, on python3 (PYTHON=... chooses; tools/python_env.sh), and says first what it installs:
#  - libturbojpeg0 + libjpeg-turbo headers (apt, system-wide), when missing and apt is usable as
#    root (RECPIPE_NO_APT=1: never)
#  - this package with its test extras, editable, and CPU torch for the recpipe.torch tests
#  - .venv-mxnet: the real mxnet 1.9.1 with numpy<1.24, for the compatibility cross-checks
# Extra arguments go to pytest (e.g. `bash tools/test.sh tests/io -x`).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/python_env.sh
. tools/python_env.sh

# what will be installed where, said before anything is
need_apt=0
if ! ldconfig -p 2>/dev/null | grep -q libturbojpeg || [ ! -f /usr/include/jpeglib.h ]; then
  need_apt=1
fi
{
  echo "test.sh: before the tests, this installs"
  if [ $need_apt = 0 ]; then
    echo "  system-wide: nothing (libturbojpeg and jpeglib.h are present)"
  elif [ -n "${RECPIPE_NO_APT:-}" ]; then
    echo "  system-wide: nothing (RECPIPE_NO_APT is set; turbojpeg/region-decode tests skip)"
  elif command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "  system-wide, with apt-get: libturbojpeg0 and libjpeg62-turbo-dev (libjpeg-turbo8-dev" \
      "on Ubuntu), and apt-get update if needed (RECPIPE_NO_APT=1 leaves them out)"
  else
    echo "  system-wide: nothing (not root or no apt-get; turbojpeg/region-decode tests skip)"
  fi
  echo "  into $(python_where): pip if it has none, recpipe (editable) with its" \
    "[test,turbo,s3,dask,docs] extras, torch 2.13.0"
  echo "  into ${RECPIPE_MXNET_VENV:-.venv-mxnet/} (a venv of its own): mxnet 1.9.1," \
    "numpy<1.24, opencv-python-headless<4.11"
} >&2
ensure_pip  # before anything is installed: a uv venv gets pip, a PEP 668 system Python stops here

# libjpeg62-turbo-dev (Debian; libjpeg-turbo8-dev on Ubuntu): headers for the recpipe._batch
# C extension (region decoding, GIL-free runs), built by `pip install -e .` below when they are present
if [ $need_apt = 1 ] && [ -z "${RECPIPE_NO_APT:-}" ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt_jpeg() { apt-get install -y -q libturbojpeg0 "$1" >/dev/null 2>&1; }
    (apt_jpeg libjpeg62-turbo-dev || apt_jpeg libjpeg-turbo8-dev ||
      { apt-get update -q >/dev/null 2>&1 &&
        { apt_jpeg libjpeg62-turbo-dev || apt_jpeg libjpeg-turbo8-dev; }; }) ||
      echo "warning: could not install libturbojpeg0/libjpeg-turbo headers; the turbojpeg" \
        "decoder and region-decode tests will be skipped" >&2
  else
    echo "warning: libturbojpeg0 or jpeglib.h missing and apt-get not usable; turbojpeg" \
      "and region-decode tests will be skipped" >&2
  fi
fi
# libpng's headers: PNG records decoded in recpipe._batch's runs (csrc/png/png.h); optional
if [ ! -f /usr/include/png.h ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  apt-get install -y -q libpng-dev >/dev/null 2>&1 || echo "warning: no libpng headers: PNG" \
    "records stay on the Python path and tests/decode/test_native_png.py is skipped" >&2
fi
# with the headers and a compiler here, recpipe._batch must build (tests/decode/test_jpegroi.py)
if [ -f /usr/include/jpeglib.h ] && command -v cc >/dev/null; then
  export RECPIPE_REQUIRE_JPEGROI=1
fi

# constraints: versions known to work together, so pip resolves in seconds instead of
# backtracking for minutes through s3fs/aiobotocore/botocore/moto/dask releases
"$PY" -m pip install -q --disable-pip-version-check -c tools/constraints.txt \
  -e '.[test,turbo,s3,dask,docs]' 'torch==2.13.0'
bash tools/setup_mxnet_venv.sh >/dev/null
PYTHON="$PY" bash tools/setup_stores.sh  # GCS/Azure clients and test servers (tests/io)
bash tools/setup_browser.sh  # chromium + selenium: the page of `recpipe view` (tests/view), the docs site (tests/docs)
# the C-facing tests against ASan+UBSan builds of the extensions (tools/sanitize.sh, about 40 s);
# on full runs only, where the compiler has the sanitizer runtimes; RECPIPE_SANITIZE=0 skips it
if [ "${RECPIPE_SANITIZE:-1}" != 0 ] && [ $# -eq 0 ] && command -v "${CC:-gcc}" >/dev/null &&
    [ -f "$("${CC:-gcc}" -print-file-name=libasan.so)" ] && [ -f /usr/include/jpeglib.h ]; then
  PYTHON="$PY" bash tools/sanitize.sh
fi
exec "$PY" -m pytest -q -p no:cacheprovider "$@"
