"""Coverage: the share of the voiced audio whose span produced words that stayed, and the
warning a session gives when it lost speech (issue 24: a loud recording lost 80 % of its words
and the summary looked normal)."""

import numpy as np
import pytest

from app.pipeline.coverage import VoicedLog, coverage, warning
from app.pipeline.engine import PipelineConfig, StreamingPipeline
from app.pipeline.mt_stage import MTConfig
from app.pipeline.recognizer import ASRConfig
from app.pipeline.segmenter import SegmenterConfig

from .fakes import SR, FakeASR, FakeMT, FakeVAD, speech


def test_voiced_log_merges_frames_and_short_gaps():
    log = VoicedLog(merge_s=0.3)
    fs = 512
    log.add(0, np.array([0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], bool), fs)
    spans = log.spans()
    assert len(spans) == 2
    assert spans[0] == pytest.approx((fs / SR, 5 * fs / SR))  # 1 frame gap (32 ms) merged
    assert spans[1] == pytest.approx((17 * fs / SR, 18 * fs / SR))
    log.add(18 * fs, np.array([1, 1], bool), fs)  # continues the last span across calls
    assert log.spans()[-1] == pytest.approx((17 * fs / SR, 20 * fs / SR))


def test_coverage_counts_voiced_stretches_no_word_touches():
    voiced = [(0.0, 10.0), (12.0, 14.0)]
    words = [(0.1 + 0.4 * i, 0.4 + 0.4 * i) for i in range(10)]  # words over 0.1-4.0 s
    c = coverage(voiced, words)
    # 4.3-10.0 lost (words widened by 0.3 s), 12-14 lost: 7.7 s of 12
    assert c["lost_speech_s"] == pytest.approx(7.7, abs=0.01)
    assert c["coverage"] == pytest.approx(1 - 7.7 / 12, abs=1e-3)
    assert c["lost_spans"] == [[4.3, 10.0], [12.0, 14.0]]
    assert "gave no words" in warning(c)
    full = coverage([(0.0, 4.0)], words)
    assert full["coverage"] == 1.0 and full["lost_speech_s"] == 0 and warning(full) is None
    # edges under 0.5 s are not lost speech; no voiced audio: no figure
    assert coverage([(0.0, 4.6)], words)["coverage"] == 1.0
    assert coverage([], words)["coverage"] is None


class GatedASR(FakeASR):
    """Hears nothing past ``deaf_from`` seconds: a recogniser whose gate dropped the speech."""

    def __init__(self, deaf_from):
        super().__init__()
        self.deaf_from = deaf_from

    def transcribe_window(self, audio, window_start_sample, prompt, prefix):
        words = super().transcribe_window(audio, window_start_sample, prompt, prefix)
        return [w for w in words if window_start_sample / SR + w.start < self.deaf_from]


def run(asr):
    cfg = PipelineConfig(asr=ASRConfig(catch_up=False), mt=MTConfig(previews=False),
                         segmenter=SegmenterConfig(lang="en", eager_units=0))
    pipe = StreamingPipeline(asr, FakeMT(), None, FakeVAD(), cfg)
    pipe.start()
    audio = speech(4.0, 1.0, repeats=4)
    for off in range(0, len(audio), 1600):
        pipe.push_audio(audio[off:off + 1600], wait_if_full=True)
    pipe.finish(timeout=30)
    return pipe


def test_a_session_that_lost_speech_says_so_and_a_whole_one_does_not():
    whole = run(FakeASR()).coverage()
    assert whole["voiced_s"] == pytest.approx(16.0, abs=0.3)
    assert whole["coverage"] >= 0.97 and warning(whole) is None
    lost = run(GatedASR(deaf_from=9.5)).coverage()
    # speech at 10-14 and 15-19 s gave no words: about 8 s of 16
    assert lost["lost_speech_s"] == pytest.approx(8.0, abs=0.6)
    assert lost["coverage"] < 0.6 and warning(lost)
