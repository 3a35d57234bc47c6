#!/usr/bin/env bash
# Run the C-facing tests against recpipe's C extensions built with AddressSanitizer and
# UndefinedBehaviorSanitizer.
#
#   bash ci/sanitize.sh                 # the default test files below
#   bash ci/sanitize.sh -k region       # extra arguments go to pytest
#
# The working tree (tracked files, as they are on disk) is copied to a temporary folder and the
# extensions are built there with CFLAGS='-fsanitize=address,undefined,float-cast-overflow
# -fno-sanitize-recover=all -fno-omit-frame-pointer -g' (GCC leaves float-cast-overflow out of
# 'undefined'), so the normal in-place builds are left alone. Python
# itself is not instrumented, so the sanitizer runtimes are preloaded (LD_PRELOAD). Leak
# detection is off (CPython keeps memory until exit by design); any ASan report or UB aborts the
# test process, which fails the run. Needs gcc (or clang: CC=clang) with libasan/libubsan and
# the libjpeg-turbo headers; the tests need what ci/test.sh installs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
CC=${CC:-gcc}
TESTS=(tests/decode/test_jpegroi.py tests/decode/test_records.py tests/decode/test_c_overflow.py
       tests/decode/test_resize.py tests/decode/test_colour.py tests/decode/test_hostile_native.py
       tests/decode/test_bombs.py tests/decode/test_reference_batches.py
       tests/decode/test_native_contract.py tests/decode/test_native_random.py
       tests/decode/test_native_colour.py tests/decode/test_native_affine.py
       tests/decode/test_native_interp.py tests/decode/test_plan.py
       tests/decode/test_native_faces.py tests/decode/test_roi_deadline.py
       tests/decode/test_opencv_parity.py tests/decode/test_native_png.py
       tests/decode/test_restart.py tests/packing/test_retrofit.py
       tests/decode/test_draws.py tests/io/test_record_c.py)

work=$(mktemp -d "${TMPDIR:-/tmp}/recpipe-sanitize.XXXXXX")
trap 'rm -rf "$work"' EXIT
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$work"

runtime() {  # the shared sanitizer runtime $1 (libasan.so, libubsan.so) of the compiler
  local path
  path=$("$CC" -print-file-name="$1")
  [ -f "$path" ] || { echo "sanitize.sh: $CC has no $1" >&2; exit 2; }
  echo "$path"
}
ASAN_LIB=$(runtime libasan.so)
UBSAN_LIB=$(runtime libubsan.so)

(
  cd "$work"
  export CC
  export CFLAGS="-fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer -g"
  export LDFLAGS="-fsanitize=address,undefined,float-cast-overflow"
  "$PY" setup.py -q build_ext --inplace >build.log 2>&1 || { cat build.log >&2; exit 2; }
  for ext in _batch _kernels _resize _colour _crc32c _plan; do
    ls recpipe/"$ext".*.so >/dev/null 2>&1 || { echo "sanitize.sh: recpipe.$ext not built" >&2
      cat build.log >&2; exit 2; }
    nm -D recpipe/"$ext".*.so | grep __asan_ >/dev/null ||  # not -q: SIGPIPE under pipefail
    { echo "sanitize.sh: recpipe.$ext built" \
      "without ASan (CFLAGS ignored?)" >&2; exit 2; }
  done
)

cd "$work"
export PYTHONPATH="$work"
export RECPIPE_REQUIRE_JPEGROI=1
# the randomized differential test, shorter under the sanitizers (2000 configurations by default)
export RECPIPE_DIFF_CONFIGS=${RECPIPE_DIFF_CONFIGS:-400}
export RECPIPE_PARITY_CONFIGS=${RECPIPE_PARITY_CONFIGS:-400}
export LD_PRELOAD="$ASAN_LIB $UBSAN_LIB"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:halt_on_error=1:handle_segv=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
echo "sanitize.sh: ASan+UBSan extensions in $work; running ${TESTS[*]} $*" >&2
# --capture=sys: pytest captures Python's streams only, so a sanitizer report (written to file
# descriptor 2 just before the process stops) reaches the terminal
status=0
"$PY" -m pytest -q -p no:cacheprovider --capture=sys "${TESTS[@]}" "$@" || status=$?
echo "sanitize.sh: exit status $status" >&2
exit "$status"
