#!/usr/bin/env bash
# The main job on a fresh machine: install, then interpret the bundled Chinese meeting clip live
# (real-time pace): English subtitles on stdout, the English dub in demo-dub.wav, subtitles in demo.srt.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/relay run --demo --pair zh-en --dub-out demo-dub.wav --srt demo.srt "$@"
