"""Models loaded once serve several sessions in a row (the window's Start/Stop, the server)."""

import pytest

from app import session
from app.audio.files import load_audio

from .conftest import DATA

pytestmark = pytest.mark.models


def _run(models, opts, audio):
    pipe = session.build_pipeline(models, opts)
    pipe.start()
    session.feed_array(pipe, audio, realtime=False)
    pipe.finish()
    return [s["source"] for s in pipe.record.segments]


def test_second_session_on_the_same_models_hears_only_its_own_audio():
    opts = session.SessionOptions(pair="zh-en", no_tts=True, realtime=False, accel="numpy")
    models = session.load_models(opts)
    first = _run(models, opts, load_audio(DATA / "zh_03.wav"))
    second = _run(models, opts, load_audio(DATA / "zh_05.wav"))
    assert "第三季度" in "".join(first)
    text = "".join(second)
    assert "预算" in text
    assert "第三季度" not in text, f"the first session's audio leaked into the second: {second}"
