#!/usr/bin/env bash
# The README's setup: recpipe from this checkout, editable, into the active Python (the venv you
# are in, from `python -m venv` or `uv venv`, else python3; PYTHON=... chooses), with pip added
# first where the venv has none (a `uv venv`). Installs nothing system-wide. Extra arguments go to
# pip (e.g. `bash ci/install.sh '.[s3]'` instead of `.`). Then: `recpipe demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=ci/python_env.sh
. ci/python_env.sh

echo "install.sh: recpipe (editable, from $(pwd)) into $(python_where)" >&2
ensure_pip
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(-e .)
"$PY" -m pip install -q --disable-pip-version-check "${targets[@]}"

# the console script: where pip put it, and whether `recpipe` on PATH is that one
scripts=$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
if command -v pyenv >/dev/null; then
  pyenv rehash >/dev/null 2>&1 || true  # pyenv's shim for the new command
fi
found=$(command -v recpipe || true)
target=$found
case "$found" in
  */shims/recpipe) target=$(pyenv which recpipe 2>/dev/null || echo "$found") ;;
esac
if [ -z "$found" ] || [ "$(realpath "$target")" != "$(realpath "$scripts/recpipe")" ]; then
  echo "install.sh: installed; the recpipe command is $scripts/recpipe, which is not the" \
    "\`recpipe\` on PATH (${found:-none}): activate the venv, add $scripts to PATH, or run" \
    "\`$PY -m recpipe\`" >&2
else
  echo "install.sh: installed; \`recpipe\` is $found" >&2
fi
