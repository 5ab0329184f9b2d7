"""Issue 24's bad input through `relay run` with the real models: silence, music with no voice,
full-scale clipping square waves and an 8 kHz telephone recording each give a clean run (exit 0,
no error, no warning of lost speech where there is none) and no text made up out of non-speech
(at most a few words per minute). The 3-hour file is bench/long_file.py's (too long for CI)."""

import sys
import wave

import numpy as np
import pytest
import soxr

from .conftest import DATA, ROOT, relay, summary_of
from .test_hallucination import music

sys.path.insert(0, str(ROOT / "bench"))

pytestmark = pytest.mark.models
SR = 16000


def write(path, x: np.ndarray, rate: int = SR) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((np.clip(x, -1, 1) * 32767).astype("<i2").tobytes())


def square_waves(seconds: float) -> np.ndarray:
    """Full-scale square waves (every sample clips), stepping through pitches a voice could have."""
    t = np.arange(int(seconds * SR)) / SR
    f = np.array([110.0, 180.0, 250.0, 400.0, 700.0])[(t // 2).astype(int) % 5]
    return np.sign(np.sin(2 * np.pi * np.cumsum(f) / SR) + 1e-9).astype(np.float32)


KINDS = {
    "silence": lambda: np.zeros(60 * SR, np.float32),
    "music": lambda: music(60.0, seed=3),
    "square": lambda: square_waves(40.0),
}


@pytest.mark.parametrize("pair", ["zh-en", "en-en"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_non_speech_gives_a_clean_run_and_no_words(tmp_path, kind, pair):
    x = KINDS[kind]()
    path = tmp_path / f"{kind}.wav"
    write(path, x)
    p = relay("run", "--input", str(path), "--pair", pair, "--fast", "--no-tts", "--json")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    s = summary_of(p)
    assert "error" not in s
    words = sum(len((seg["source"] or "").split()) + len(seg["source"] or "") * (pair == "zh-en") // 2
                for seg in s["segments"])
    minutes = len(x) / SR / 60
    assert words <= 3 * minutes, f"{kind}/{pair}: made up {[seg['source'] for seg in s['segments']]}"


def test_an_8_khz_telephone_file_is_heard(tmp_path):
    from textmetrics import edit_distance, en_tokens

    with wave.open(str(DATA / "jfk.wav")) as w:
        x = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768
        rate = w.getframerate()
    phone = soxr.resample(x, rate, 8000)
    path = tmp_path / "phone8k.wav"
    write(path, np.concatenate([np.zeros(8000), phone, np.zeros(8000)]), 8000)
    p = relay("run", "--input", str(path), "--pair", "en-en", "--fast", "--no-tts", "--json", "--profanity", "raw")
    assert p.returncode == 0, p.stderr
    s = summary_of(p)
    hyp = " ".join(seg["source"] for seg in s["segments"])
    ref = en_tokens("and so my fellow americans ask not what your country can do for you ask what you "
                    "can do for your country")
    wer = 100 * edit_distance(ref, en_tokens(hyp)) / len(ref)
    assert wer <= 30, f"WER {wer:.0f} % on {hyp!r}"
    assert s["coverage"] is not None and s["coverage"] >= 0.9 and not s["warnings"]
