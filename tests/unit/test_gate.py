"""The voice gate's hysteresis, and the level a quiet sentence is recognised at."""

import numpy as np

from app.pipeline.final_stage import level
from app.pipeline.gate import Hysteresis


def test_speech_starts_above_on_and_lasts_until_below_off_across_blocks():
    g = Hysteresis(0.3, 0.15)
    # a telephone-band sentence: Silero's probabilities hover around 0.2-0.4 (measured); a plain
    # 0.5 threshold heard none of it
    first = g(np.array([0.05, 0.2, 0.35, 0.25, 0.2]))
    assert first.tolist() == [False, False, True, True, True]
    assert g.speaking
    second = g(np.array([0.16, 0.1, 0.25, 0.31]))  # the state carries over the block boundary
    assert second.tolist() == [True, False, False, True]
    g.reset()
    assert g(np.array([0.2])).tolist() == [False]


def test_a_quiet_sentence_is_brought_up_and_a_normal_one_left_alone():
    quiet = np.full(1600, 0.02, dtype=np.float32)
    up = level(quiet)
    assert abs(float(np.max(up)) - 0.02 * 31.6) < 1e-4  # +30 dB at most (0.7 would need +31)
    assert abs(float(np.max(level(quiet * 5))) - 0.7) < 1e-4  # else to a 0.7 peak
    normal = np.full(1600, 0.5, dtype=np.float32)
    assert level(normal) is normal
    silent = np.zeros(1600, dtype=np.float32)
    assert level(silent) is silent
