"""Models loaded once serve several sessions in a row (the window's Start/Stop, the server)."""

import pytest

from app.session.build import build_pipeline
from app.session.models import load_models
from app.session.options import SessionOptions
from app.session.runner import feed_array
from app.audio.files import load_audio

from .conftest import DATA

pytestmark = pytest.mark.models


def _run(models, opts, audio):
    pipe = build_pipeline(models, opts)
    pipe.start()
    feed_array(pipe, audio, realtime=False)
    pipe.finish()
    return [s["source"] for s in pipe.record.segments]


def test_second_session_on_the_same_models_hears_only_its_own_audio():
    opts = SessionOptions(pair="zh-en", no_tts=True, realtime=False, accel="numpy")
    models = load_models(opts)
    first = _run(models, opts, load_audio(DATA / "zh_03.wav"))
    second = _run(models, opts, load_audio(DATA / "zh_05.wav"))
    assert "第三季度" in "".join(first)
    text = "".join(second)
    assert "预算" in text
    assert "第三季度" not in text, f"the first session's audio leaked into the second: {second}"
