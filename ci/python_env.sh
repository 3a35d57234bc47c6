# Sourced by ci/install.sh and ci/test.sh: which Python they install into, and pip for it.
#
#   PY             $PYTHON if set; else the active virtual environment's python ($VIRTUAL_ENV,
#                  from `python -m venv`, `uv venv`, conda...); else python3 on PATH
#   python_where   one line saying which Python that is (a venv, or the system's)
#   ensure_pip     makes `"$PY" -m pip` work: a `uv venv` has no pip; it is added with the
#                  interpreter's own ensurepip (offline), else `uv pip install pip`; a system
#                  Python that its distribution manages (PEP 668) gets a message saying to make a
#                  venv first, and a non-zero return (PIP_BREAK_SYSTEM_PACKAGES=1: go on)
# Every message goes to stderr.

if [ -n "${PYTHON:-}" ]; then
  PY=$PYTHON
elif [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
  PY=$VIRTUAL_ENV/bin/python
else
  PY=python3
fi

python_where() {
  "$PY" - <<'PY' 2>/dev/null || echo "$PY (does not run)"
import sys
kind = "virtual environment" if sys.prefix != sys.base_prefix else "system Python, no venv"
print(f"{sys.executable} (Python {sys.version.split()[0]}, {kind} {sys.prefix})")
PY
}

_externally_managed() {
  "$PY" - <<'PY' 2>/dev/null
import os, sys, sysconfig
venv = sys.prefix != sys.base_prefix
marker = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
sys.exit(0 if not venv and os.path.exists(marker) else 1)
PY
}

ensure_pip() {
  if ! "$PY" -c 'import sys' 2>/dev/null; then
    echo "error: $PY does not run; set PYTHON=/path/to/python3 (3.10 or newer)" >&2
    return 1
  fi
  if _externally_managed && [ -z "${PIP_BREAK_SYSTEM_PACKAGES:-}" ]; then
    echo "error: $PY is the system's Python, managed by its package manager (PEP 668): make a" \
      "virtual environment first, then run this again inside it:" >&2
    echo "    python3 -m venv .venv && . .venv/bin/activate     # or: uv venv && . .venv/bin/activate" >&2
    echo "(PIP_BREAK_SYSTEM_PACKAGES=1 installs into it anyway, beside the distribution's packages)" >&2
    return 1
  fi
  if "$PY" -m pip --version >/dev/null 2>&1; then
    return 0
  fi
  echo "note: no pip in $(python_where); adding it (ensurepip, else uv pip)" >&2
  if "$PY" -m ensurepip >/dev/null 2>&1 && "$PY" -m pip --version >/dev/null 2>&1; then
    return 0
  fi
  if command -v uv >/dev/null && uv pip install -q --python "$PY" pip >&2 &&
      "$PY" -m pip --version >/dev/null 2>&1; then
    return 0
  fi
  echo "error: $PY has no pip, and neither ensurepip nor uv could add it: install pip for it" \
    "(uv venv --seed makes a venv with pip; apt-get install python3-pip for the system's)" >&2
  return 1
}
