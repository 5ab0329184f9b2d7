"""The window on a live source: system audio (PulseAudio null sink monitor), dub on another sink."""

import subprocess
import time
from pathlib import Path

import pytest
from pytestqt.exceptions import TimeoutError as WaitTimeout

from app.ui.window import MainWindow
from tests.integration.test_live_audio import start_pulse
from tests.ui.conftest import session_threads

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"

pytestmark = pytest.mark.models


def diagnose(w) -> str:
    """What the session heard and did, for a failure's message."""
    pipe = w.controller.pipe
    lines = [(ln.source, ln.target) for ln in w.model.data_.lines]
    if pipe is None:
        return f"no pipeline; lines {lines}"
    return f"audio {pipe.ring.written / 16000:.1f} s; lines {lines}; stages {pipe.stage_stats()}"


def test_window_interprets_system_audio_and_plays_the_dub(qtbot, settings_dir):
    start_pulse()
    w = MainWindow(preload=False)  # the real device list
    qtbot.addWidget(w)
    w.show()
    qtbot.waitUntil(lambda: w.source.findData("meeting.monitor") >= 0, timeout=30_000)
    assert "System audio" in w.source.itemText(w.source.findData("meeting.monitor"))
    w.source.setCurrentIndex(w.source.findData("meeting.monitor"))
    w.dub.setChecked(True)
    w.output.setCurrentIndex(w.output.findData("dub"))
    w.start_session()
    qtbot.waitUntil(lambda: w.controller.state == "running", timeout=240_000)
    time.sleep(1.0)
    for clip in ("zh_03.wav", "zh_05.wav"):
        subprocess.run(["paplay", "--device=meeting", str(DATA / clip)], check=True, timeout=60)
    # two sentences (zh_03: one, zh_05: one with a comma): a line each, once their finals are in
    # (the first pass may have split one into pieces; the window shows one line per sentence)
    try:
        qtbot.waitUntil(lambda: sum(1 for ln in w.model.data_.lines if ln.target and ln.final_id is not None) >= 2,
                        timeout=60_000)
    except WaitTimeout:
        pytest.fail(f"fewer than 2 final lines 60 s after the clips: {diagnose(w)}")
    text = " ".join(ln.target for ln in w.model.data_.lines if ln.target).lower()
    assert "third quarter" in text or "sales" in text, text
    assert "budget" in text or "cost" in text, text
    qtbot.wait(3000)
    w.toggle_session()
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=120_000)
    s = w.last_summary
    assert s is not None and not s.get("error"), s
    assert s["mode"] == "pipeline/live" and s["devices"]["capture"]["device"] == "meeting.monitor"
    assert s["devices"]["playback"]["chunks"] > 0 and s["latency_ms"]["e2e_dub"]["n"] > 0
    if w.summary_dialog is not None:
        w.summary_dialog.close()
    assert session_threads() == []
    w.close()
    w.overlay.close()
