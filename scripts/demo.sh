#!/usr/bin/env bash
# The main job on a fresh machine: install, then interpret the bundled Chinese meeting clip live
# (real-time pace). With a screen (DISPLAY/WAYLAND_DISPLAY) it opens the desktop window and starts
# interpreting the clip there; without one (or with RELAY_HEADLESS=1, or with extra arguments) it
# runs headless: English subtitles on stdout, the English dub in demo-dub.wav, subtitles in demo.srt.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ $# -eq 0 ] && [ -z "${RELAY_HEADLESS:-}" ] && [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
  exec .venv/bin/relay window --demo
fi
exec .venv/bin/relay run --demo --pair zh-en --dub-out demo-dub.wav --srt demo.srt "$@"
