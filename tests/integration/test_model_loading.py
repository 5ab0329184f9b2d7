"""Model loading. The four models load side by side in threads; the libraries they need are imported before, in
one thread, since two threads importing packages that import each other can fail one import with
Python's _DeadlockError (faster_whisper from the ASR load, faster_whisper.utils from the VAD's:
seen once in CI). The voice's ONNX session is made once, with our thread settings."""

import subprocess
import sys

import pytest

from .conftest import ROOT, relay_env

pytestmark = pytest.mark.models

PROBE = r"""
import sys
from app.session import models as session
from app.session.options import SessionOptions
seen = {}
def record(loaders):
    seen.update({m: m in sys.modules for m in ("faster_whisper.utils", "app.backends.whisper_ct2",
                 "app.backends.silero_vad", "app.backends.opus_ct2", "app.backends.piper_tts")})
    raise SystemExit(0 if all(seen.values()) else print(seen) or 3)
session._load_parallel = record
session.load_models(SessionOptions(pair="zh-en"))
"""


def test_model_libraries_are_imported_before_the_parallel_loads():
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT,
                       env=relay_env({"HF_HUB_OFFLINE": "1"}), timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_voice_is_loaded_once_with_our_thread_settings(monkeypatch):
    import onnxruntime

    from app.models.loader import load_tts
    from app.session.models import check_models
    from app.session.options import SessionOptions

    made = []
    real = onnxruntime.InferenceSession

    def counting(*a, **kw):
        made.append(kw.get("sess_options"))
        return real(*a, **kw)

    monkeypatch.setattr(onnxruntime, "InferenceSession", counting)
    tts = load_tts(check_models(SessionOptions(pair="zh-en")), threads=1)
    assert len(made) == 1 and made[0].intra_op_num_threads == 1
    audio = next(iter(tts.synthesize("Good morning, everyone.")))
    assert len(audio) > 0.5 * tts.sample_rate and abs(audio).max() > 0.1
