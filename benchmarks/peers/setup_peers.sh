#!/usr/bin/env bash
# Build .venv-peers/: the interpreter that runs the peer contenders of benchmarks/suites/peers.py
# (PyTorch DataLoader + torchvision, NVIDIA DALI's CPU pipeline, and recpipe itself).
# Idempotent: re-running only installs what is missing. MXNet lives in its own venv
# (ci/setup_mxnet_venv.sh -> .venv-mxnet/), because mxnet 1.9.1 needs numpy<1.24.
#
#   bash benchmarks/peers/setup_peers.sh            # build or complete .venv-peers
#   PEERS_VENV=/path bash benchmarks/peers/setup_peers.sh
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${PEERS_VENV:-$repo_root/.venv-peers}"
python_bin="${PYTHON:-python3}"

torch_req="torch==2.14.1"
torchvision_req="torchvision==0.29.1"
dali_req="nvidia-dali-cuda120"

if [[ ! -x "$venv/bin/python" ]]; then
    echo "creating $venv"
    "$python_bin" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check)

# Probe imports from / so the repo's own recpipe/ folder in the cwd cannot fake an install.
has() { (cd / && "$venv/bin/python" -c "import $1") >/dev/null 2>&1; }
quiet() { grep -v "is ignored: it is neither a file nor a directory" || true; }

install() { "${pip[@]}" install -q "$@" 2>&1 | quiet; return "${PIPESTATUS[0]}"; }

has pip && has setuptools || install --upgrade pip setuptools wheel
has numpy && has cv2 || install numpy opencv-python-headless
has torch && has torchvision || install "$torch_req" "$torchvision_req"
has nvidia.dali || install "$dali_req"
has recpipe && has turbojpeg && has simplejpeg || install -e "$repo_root[turbo]"

# DALI must run without a GPU: a CPU-only pipeline is built with device_id=None.
cd / && "$venv/bin/python" - <<'EOF'
import numpy, cv2, torch, torchvision, recpipe
from nvidia.dali import pipeline_def, fn, types  # noqa: F401
import nvidia.dali as dali
print("peers venv ok: torch", torch.__version__, "torchvision", torchvision.__version__,
      "dali", dali.__version__, "numpy", numpy.__version__, "cv2", cv2.__version__)
EOF
