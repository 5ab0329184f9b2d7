"""The ASR stage fed with our accel log-mel features hears what faster-whisper's own features give."""

import numpy as np
import pytest
import soundfile as sf

from app.accel.dispatch import numba_available
from app.backends.whisper_ct2 import WhisperCT2
from app.models.loader import whisper_files
from app.pipeline.stability import norm

from .conftest import DATA, relay, summary_of

pytestmark = pytest.mark.models


@pytest.fixture(scope="module")
def files():
    return whisper_files("whisper-base")


@pytest.mark.parametrize("accel", ["numpy"] + (["cpu"] if numba_available() else []))
def test_streaming_windows_same_text_as_faster_whisper_features(files, accel):
    ours = WhisperCT2(files, name="b", language="zh", frontend="incremental", accel=accel, threads=2)
    theirs = WhisperCT2(files, name="b", language="zh", frontend="faster-whisper", threads=2)
    same = total = 0
    for clip in ("zh_03.wav", "zh_05.wav", "zh_07.wav"):
        audio, _ = sf.read(str(DATA / clip), dtype="float32")
        ours._mel.reset()
        # whole utterance: identical text
        # whole utterance: the same words (a comma may tip either way: it is a near tie too)
        assert (norm("".join(w.text for w in ours.transcribe_window(audio, 0, "", []))) ==
                norm("".join(w.text for w in theirs.transcribe_window(audio, 0, "", []))))
        # growing streaming windows (0.5 s a step): a window cut inside a word is a near tie for
        # greedy decoding, where float32 rounding of either front-end may tip the last token
        for end in range(16000 * 2, len(audio), 8000):
            a = audio[:end]
            t_ours = norm("".join(w.text for w in ours.transcribe_window(a, 0, "", [])))
            t_theirs = norm("".join(w.text for w in theirs.transcribe_window(a, 0, "", [])))
            same += t_ours == t_theirs
            total += 1
            assert t_ours[:-2] == t_theirs[:-2] or abs(len(t_ours) - len(t_theirs)) <= 2, (t_ours, t_theirs)
    assert same / total >= 0.8, f"only {same}/{total} windows agree"


def test_run_reports_the_active_accel_path():
    p = relay("run", "--input", str(DATA / "zh_03.wav"), "--json", "--fast", "--no-tts", "--accel", "numpy")
    assert p.returncode == 0, p.stderr
    assert summary_of(p)["accel"] == "numpy"


def test_cuda_without_a_gpu_is_a_clear_error():
    from app.accel.dispatch import cuda_available

    if cuda_available():
        pytest.skip("a GPU is present")
    p = relay("run", "--input", str(DATA / "zh_03.wav"), "--accel", "cuda")
    assert p.returncode == 2 and "cuda" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_resampled_input_from_48k_is_recognised(tmp_path):
    audio, _ = sf.read(str(DATA / "zh_03.wav"), dtype="float32")
    import soxr

    hi = soxr.resample(audio, 16000, 48000)
    stereo = np.stack([hi, hi * 0.5], axis=1)
    f = tmp_path / "zh_48k_stereo.flac"
    sf.write(str(f), stereo, 48000)
    p = relay("run", "--input", str(f), "--json", "--fast", "--no-tts")
    assert p.returncode == 0, p.stderr
    s = summary_of(p)
    assert "第三季度" in "".join(x["source"] for x in s["segments"])
    assert abs(s["audio_s"] - len(audio) / 16000) < 0.05
