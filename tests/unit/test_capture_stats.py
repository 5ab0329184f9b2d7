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


def test_stream_opens_set_their_environment_one_at_a_time():
    """The capture and the dub reopen on the same beat after a sound-server restart; libpulse
    reads PULSE_SOURCE/PULSE_SINK in C while the other thread's open restored its variable, and
    the capture came back on the default source (tests/integration/test_live_audio.py)."""
    import os
    import threading
    import time

    from app.audio.devices import env_set

    seen, inside = [], threading.Event()

    def capture_open():
        with env_set({"RELAY_TEST_SOURCE": "meeting.monitor"}):
            inside.set()
            time.sleep(0.2)  # PortAudio opening, reading the environment
            seen.append(os.environ.get("RELAY_TEST_SOURCE"))

    def dub_open():
        inside.wait(5)
        with env_set({"RELAY_TEST_SINK": "dub"}):
            seen.append("dub")

    a, b = threading.Thread(target=capture_open), threading.Thread(target=dub_open)
    a.start(), b.start()
    a.join(5), b.join(5)
    assert seen == ["meeting.monitor", "dub"]
    assert "RELAY_TEST_SOURCE" not in os.environ and "RELAY_TEST_SINK" not in os.environ
