"""The capture ring's stamps and the capture-path delay statistics (no sound server needed)."""

import numpy as np

from app.audio.capture import CaptureStats, SampleRing


def test_ring_time_of_interpolates_from_the_block_stamp():
    r = SampleRing(1000)
    r.write(np.zeros(100, np.float32), t=10.0)
    r.write(np.zeros(100, np.float32), t=10.5)
    assert r.time_of(150, rate=100) == 11.0
    assert r.time_of(50, rate=100) == 10.5
    assert r.read(95, 105).shape == (10,)


def test_delay_statistics_keep_a_bounded_window():
    s = CaptureStats()
    assert s.delay_ms() == {"p50": None, "p95": None, "n": 0}
    for i in range(10000):
        s.add_delay(0.010 if i < 5000 else 0.030)
    d = s.delay_ms()
    assert d["n"] == 10000
    assert d["p50"] == 30.0  # only the newest 4096 passes count
    assert len(s.delays) == 4096
