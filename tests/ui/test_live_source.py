"""The window on a live source: system audio (PulseAudio null sink monitor), dub on another sink."""

import subprocess
import time
from pathlib import Path

import pytest

from app.ui.window import MainWindow
from tests.integration.test_live_audio import start_pulse
from tests.ui.conftest import session_threads

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"

pytestmark = pytest.mark.models


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
    qtbot.waitUntil(lambda: sum(1 for ln in w.model.data_.lines if ln.target) >= 3, timeout=60_000)
    text = " ".join(ln.target for ln in w.model.data_.lines if ln.target).lower()
    assert "third quarter" in text or "sales" in text, text
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
