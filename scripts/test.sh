#!/usr/bin/env bash
# Install with the test tools and the model packs, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
# the LLM translator's integration tests use the smallest LLM pack (with its llama.cpp runtime)
HF_HUB_OFFLINE=1 .venv/bin/relay models install qwen-0.5b
# the live-audio tests need a sound server: PulseAudio with null sinks "meeting" and "dub"
bash scripts/pulse.sh
export HF_HUB_OFFLINE=1
exec .venv/bin/python -m pytest -q "$@"
