"""Our log-mel front-end against faster-whisper's FeatureExtractor, on real speech."""

import numpy as np
import pytest
import soundfile as sf
from faster_whisper.feature_extractor import FeatureExtractor

from app.accel.logmel import IncrementalLogMel, log_mel_reference

from ..conftest import DATA


@pytest.fixture(scope="module")
def speech():
    a, sr = sf.read(str(DATA / "zh_demo_20s.wav"), dtype="float32")
    assert sr == 16000
    return a


@pytest.mark.parametrize("n_mels", [80, 128])
@pytest.mark.parametrize("n", [401, 16000, 48123, 160000])
def test_reference_matches_faster_whisper(speech, n_mels, n):
    ref = FeatureExtractor(feature_size=n_mels)(speech[:n])
    ours = log_mel_reference(speech[:n], n_mels)
    assert ours.shape == ref.shape
    assert np.abs(ours - ref).max() <= 1e-3


def test_incremental_equals_full_recompute_and_reuses_frames(speech):
    fe = FeatureExtractor(feature_size=80)
    inc = IncrementalLogMel(80)
    windows = [(0, 8000 * k) for k in range(2, 12)] + [(48000, 48000 + 8000 * k) for k in range(2, 12)]
    full_frames = 0
    for start, end in windows:
        f = inc.features(speech[start:end], start)
        r = fe(speech[start:end])
        assert f.shape == r.shape
        assert np.abs(f - r).max() <= 1e-3
        full_frames += r.shape[1]
    # growing by 0.5 s per step: most frames come from the cache
    assert inc.frames_computed < full_frames / 3


def test_edge_cases():
    assert log_mel_reference(np.zeros(1, np.float32)).shape == (80, 1)
    assert log_mel_reference(np.zeros(0, np.float32)).shape == (80, 1)
    silent = log_mel_reference(np.zeros(16000, np.float32))
    assert np.isfinite(silent).all()
    loud = log_mel_reference(np.ones(16000, np.float32))
    assert np.isfinite(loud).all()
    with pytest.raises(ValueError, match="NaN"):
        log_mel_reference(np.array([0.0, np.nan] * 500, np.float32))
    with pytest.raises(ValueError, match="NaN"):
        IncrementalLogMel().features(np.array([np.inf] * 1000, np.float32), 0)
