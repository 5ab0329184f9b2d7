#!/usr/bin/env bash
# Install Relay into ./.venv and its offline model packs (pinned, sha256-checked) into the model store.
#   scripts/setup.sh          # app only
#   scripts/setup.sh test     # app + test tools
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
extra=""
[ "${1:-}" = "test" ] && extra="[test]"
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".${extra}"
export HF_HUB_OFFLINE=1
.venv/bin/relay models install
# compile the audio front-end's Numba kernels now, not during the first session (a few seconds)
.venv/bin/relay --compile-kernels > /dev/null
