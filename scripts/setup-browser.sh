#!/usr/bin/env bash
# The browser of the human-evaluation app's tests (tests/humaneval/test_humaneval_app.py), idempotently: Debian's
# Chromium, driven by Playwright for Python. Playwright's own browser download (`playwright install`) is
# not needed: the tests launch the system binary ($RATIO_CHROMIUM, default /usr/bin/chromium).
# scripts/setup.sh calls this with the dev extra; RATIO_SKIP_BROWSER=1 skips it (those tests then skip,
# or fail under .ci/run).
set -euo pipefail

CHROMIUM=${RATIO_CHROMIUM:-/usr/bin/chromium}
if [ "${RATIO_SKIP_BROWSER:-0}" = 1 ]; then
  exit 0
fi
if [ -x "$CHROMIUM" ] && "$CHROMIUM" --headless --no-sandbox --version >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "setup-browser: no Chromium at $CHROMIUM and no apt-get here: install Chromium and set RATIO_CHROMIUM to its binary" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
  else
    echo "setup-browser: installing Chromium needs root: run 'apt-get install -y chromium' as root, or set RATIO_CHROMIUM" >&2
    exit 1
  fi
fi
echo "setup-browser: installing Debian's chromium (apt-get)"
$SUDO apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium >/dev/null
"$CHROMIUM" --headless --no-sandbox --version
