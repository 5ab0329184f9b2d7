"""The window's parts wired together, without a session: the display timer's rate, menus,
export, the degradation gauge, and the size of the modules the window is split into."""

import re
from pathlib import Path

from app.pipeline.policy import PolicyTransition
from app.ui.latency_dock import DISPLAY_HZ, PERCENTILES_EVERY

ROOT = Path(__file__).resolve().parents[2]


def test_gauges_refresh_at_the_rate_the_readme_states(window):
    assert window.display_timer is window.gauges_dock.timer
    assert window.display_timer.interval() == 1000 // DISPLAY_HZ
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert re.findall(r"refreshed at (\d+) Hz", readme) == [str(DISPLAY_HZ)]
    assert PERCENTILES_EVERY >= 1


def test_display_timer_runs_only_while_a_session_runs(window):
    assert not window.display_timer.isActive()
    window._on_state("running")
    assert window.display_timer.isActive() and window.live_badge.isVisible()
    window._on_state("idle")
    assert not window.display_timer.isActive() and window.start_button.text() == "Start"


def test_a_policy_transition_moves_the_degradation_gauge(window):
    window.bridge(PolicyTransition(3.0, "latency", 0, 2, 2, "p99 subtitle latency 4.1 s > 3.5 s", ("mt_beam",)))
    window.bridge.flush()
    assert window.gauges.level.value() == 2
    assert window.gauges.level_note.text() == "p99 subtitle latency 4.1 s > 3.5 s"


def test_menus_reach_the_split_out_actions(window, tmp_path):
    assert window.act_start.shortcut().toString() == "F5"
    assert window.act_srt.shortcut().toString() == "Ctrl+E"
    assert window.act_gauges.shortcut().toString() == "F9"
    assert set(window.theme_actions) and window.theme_actions[window.theme.name].isChecked()
    assert not window.export_to(str(tmp_path / "x.srt"), "srt")  # nothing to export yet
    assert window.message_box.text() == "The transcript is empty."
    window.model.add_segment(0, "大家好", 0.0, 1.0, 1.2)
    window.model.set_translation(0, "Hello everyone", 1.5)
    assert window.export_to(str(tmp_path / "x.srt"), "srt")
    assert "Hello everyone" in (tmp_path / "x.srt").read_text(encoding="utf-8")
    assert not window.export_dub_to(str(tmp_path / "dub.wav"))  # no session has run: no dub
    assert window.message_box.text() == "This session produced no dubbed speech."
    window.clear_transcript()
    assert window.model.segments() == [] and window.status_label.text() == "Transcript cleared"


def test_ui_modules_fit_in_one_sitting():
    long = {f.name: n for f in (ROOT / "app" / "ui").glob("*.py")
            if (n := len(f.read_text(encoding="utf-8").splitlines())) > 400}
    assert long == {}
