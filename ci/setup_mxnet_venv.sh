#!/usr/bin/env bash
# Build (or reuse) .venv-mxnet/ in the repository root: the real mxnet 1.9.1 for the cross-checks
# in tests/mxnet. Idempotent: a venv that already imports mxnet 1.9.1, numpy and cv2 is kept.
# Also installs this checkout's recpipe into it (editable, --no-deps, plus fsspec and tqdm) for
# the recpipe.mxnet adapter tests; also idempotent.
# Prints the venv's python path on stdout (everything else goes to stderr).
#
#   ci/setup_mxnet_venv.sh            # python3.11 (or 3.8-3.10): mxnet 1.9.1 + numpy<1.24 need <= 3.11
#   PYTHON=/usr/bin/python3.10 ci/setup_mxnet_venv.sh
#   RECPIPE_MXNET_VENV=/some/dir ci/setup_mxnet_venv.sh
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${RECPIPE_MXNET_VENV:-$repo_root/.venv-mxnet}"
venv_python="$venv/bin/python"
packages=("mxnet==1.9.1" "numpy<1.24" "opencv-python-headless<4.11")

check() {
    "$venv_python" - <<'PY' >/dev/null 2>&1
import warnings
warnings.simplefilter("ignore")
import cv2, numpy, mxnet
assert mxnet.__version__ == "1.9.1", mxnet.__version__
mxnet.recordio.MXRecordIO  # noqa: B018
PY
}

# recpipe from this checkout (checked from / so that the current directory does not count)
has_recpipe() {
    (cd / && "$venv_python" -c '
import os, sys, fsspec, tqdm, recpipe
sys.exit(os.path.realpath(os.path.dirname(recpipe.__file__)) != os.path.realpath(sys.argv[1]))
' "$repo_root/recpipe") >/dev/null 2>&1
}

install_recpipe() {
    if ! has_recpipe; then
        echo "setup_mxnet_venv: installing recpipe from $repo_root into $venv ..." >&2
        "$venv_python" -m pip install --quiet --disable-pip-version-check fsspec tqdm >&2
        "$venv_python" -m pip install --quiet --disable-pip-version-check --no-deps -e "$repo_root" >&2
    fi
}

if [ -x "$venv_python" ] && check; then
    install_recpipe
    echo "$venv_python"
    exit 0
fi

# mxnet 1.9.1 and numpy<1.24 have wheels up to CPython 3.11: prefer 3.11, accept 3.8-3.10.
pick_python() {
    local candidate
    for candidate in ${PYTHON:-} python3.11 python3.10 python3.9 python3.8 python3; do
        if command -v "$candidate" >/dev/null 2>&1 &&
           "$candidate" -c 'import sys; sys.exit(not (3, 8) <= sys.version_info[:2] <= (3, 11))'; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

if ! base_python="$(pick_python)"; then
    echo "setup_mxnet_venv: no Python 3.8-3.11 found (mxnet 1.9.1 needs one); set PYTHON=..." >&2
    exit 1
fi

if [ -e "$venv" ] && [ ! -f "$venv/pyvenv.cfg" ]; then
    echo "setup_mxnet_venv: $venv exists and is not a virtual environment; not touching it" >&2
    exit 1
fi

echo "setup_mxnet_venv: building $venv with ${packages[*]} ..." >&2
rm -rf "$venv"
"$base_python" -m venv "$venv"
"$venv_python" -m pip install --quiet --disable-pip-version-check "${packages[@]}" >&2

if ! check; then
    echo "setup_mxnet_venv: $venv was built but 'import mxnet, cv2' fails in it:" >&2
    "$venv_python" -c "import cv2, numpy, mxnet" >&2 || true
    exit 1
fi
install_recpipe
echo "$venv_python"
