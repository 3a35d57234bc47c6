#!/usr/bin/env bash
# The test command: sets up what the tests need on a fresh machine (Python 3.11 + pip), then runs them.
#  - libturbojpeg0 (apt) for the PyTurboJPEG decoder, when apt is usable
#  - this package with its test extras, editable, and CPU torch for the recpipe.torch tests
#  - .venv-mxnet: the real mxnet 1.9.1 with numpy<1.24, for the compatibility cross-checks
# Extra arguments go to pytest (e.g. `bash tools/test.sh tests/io -x`).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if ! ldconfig -p 2>/dev/null | grep -q libturbojpeg; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    (apt-get install -y -q libturbojpeg0 >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q libturbojpeg0 >/dev/null 2>&1; }) ||
      echo "warning: could not install libturbojpeg0; the turbojpeg decoder tests will be skipped" >&2
  else
    echo "warning: libturbojpeg0 missing and apt-get not usable; turbojpeg tests will be skipped" >&2
  fi
fi

"$PY" -m pip install -q --disable-pip-version-check -e '.[test,turbo,s3]' 'torch==2.13.0'
bash tools/setup_mxnet_venv.sh >/dev/null
exec "$PY" -m pytest -q -p no:cacheprovider "$@"
