#!/usr/bin/env bash
# The browser that tests/view/test_browser.py drives (the page of `recpipe view`): Debian's
# chromium and chromedriver (/usr/bin/chromium, /usr/bin/chromedriver, from apt when this runs
# as root) and selenium from pip (which uses that chromedriver: no driver download). Anything
# missing is a warning: those tests then skip, saying what is missing.
set -uo pipefail
PY=${PYTHON:-python3}

if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt_browser() { apt-get install -y -q chromium chromium-driver >/dev/null 2>&1; }
    apt_browser || { apt-get update -q >/dev/null 2>&1 && apt_browser; } ||
      echo "warning: could not install chromium and chromium-driver: the browser tests of" \
        "recpipe view will be skipped" >&2
  else
    echo "warning: /usr/bin/chromium or /usr/bin/chromedriver missing and apt-get not usable:" \
      "the browser tests of recpipe view will be skipped" >&2
  fi
fi
"$PY" -m pip install -q --disable-pip-version-check 'selenium==4.50.0' ||
  echo "warning: could not install selenium: the browser tests of recpipe view will be" \
    "skipped" >&2
