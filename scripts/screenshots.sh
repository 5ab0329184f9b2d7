#!/usr/bin/env bash
# Screenshots of the desktop window and the presenter overlay mid-session on the Chinese demo
# clip, with the real models, under a virtual X display: docs/screenshots/main.png, overlay.png.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
OUT=${1:-docs/screenshots}
if [ -z "${DISPLAY:-}" ]; then
  command -v Xvfb >/dev/null || { echo "screenshots.sh: Xvfb is not installed (apt-get install xvfb)" >&2; exit 2; }
  DISP=:${RELAY_SHOT_DISPLAY:-97}
  Xvfb "$DISP" -screen 0 1600x1000x24 -nolisten tcp >/dev/null 2>&1 &
  XPID=$!
  trap 'kill "$XPID" 2>/dev/null || true' EXIT
  export DISPLAY=$DISP
  for _ in $(seq 50); do [ -e "/tmp/.X11-unix/X${DISP#:}" ] && break; sleep 0.1; done
fi
# a bare Xvfb machine has no Chinese font: the source column would show empty boxes
if ! fc-list :lang=zh 2>/dev/null | grep -q .; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get install -y -q fonts-wqy-microhei >/dev/null 2>&1 || echo "screenshots.sh: no Chinese font could be installed" >&2
  else
    echo "screenshots.sh: no Chinese font installed (Debian: fonts-wqy-microhei or fonts-noto-cjk)" >&2
  fi
fi
export QT_QPA_PLATFORM=xcb
export RELAY_SETTINGS_DIR=$(mktemp -d)
"$PY" -m app.ui.screenshots "$OUT" "${@:2}"
