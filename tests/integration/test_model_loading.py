"""The four models load side by side in threads; the libraries they need are imported before, in
one thread, since two threads importing packages that import each other can fail one import with
Python's _DeadlockError (faster_whisper from the ASR load, faster_whisper.utils from the VAD's:
seen once in CI)."""

import subprocess
import sys

import pytest

from .conftest import ROOT, relay_env

pytestmark = pytest.mark.models

PROBE = r"""
import sys
from app import session
seen = {}
def record(loaders):
    seen.update({m: m in sys.modules for m in ("faster_whisper.utils", "app.backends.whisper_ct2",
                 "app.backends.silero_vad", "app.backends.opus_ct2", "app.backends.piper_tts")})
    raise SystemExit(0 if all(seen.values()) else print(seen) or 3)
session._load_parallel = record
session.load_models(session.SessionOptions(pair="zh-en"))
"""


def test_model_libraries_are_imported_before_the_parallel_loads():
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT,
                       env=relay_env({"HF_HUB_OFFLINE": "1"}), timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
