"""The window end to end: a real session with the real models, and bad inputs."""

import socket
import threading
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.models import store
from app.session.subtitles import parse_srt
from app.ui import controller as ui_controller
from app.ui.choices import DeviceChoices
from app.ui.window import MainWindow
from tests.ui.conftest import session_threads

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def _have_models() -> bool:
    return all(p in store.installed() for p in ("whisper-base", "opus-mt-zh-en", "piper-joe-en"))


@pytest.mark.models
def test_live_session_subtitles_gauges_overlay_export_stop(window, qtbot, tmp_path):
    if not _have_models():
        pytest.fail("model packs are not installed: run `relay models install` first")
    w = window
    assert w.pair.currentData() == "zh-en"
    assert w.set_file(str(DATA / "zh_demo_20s.wav"))
    port = free_port()
    assert w.set_metrics(True, port)  # Session ▸ Metrics export: the running session is exported
    w.start_session()
    qtbot.waitUntil(lambda: w.controller.state == "running", timeout=240_000)
    # committed subtitles with their translation, while the file is still playing
    qtbot.waitUntil(lambda: sum(1 for ln in w.model.data_.lines if ln.target) >= 2, timeout=60_000)
    assert w.controller.state == "running"
    assert w.model.final_mode  # the session makes finals: pieces show as drafts until replaced
    text = " ".join(ln.target for ln in w.model.data_.lines if ln.target).lower()
    assert "hear" in text or "everyone" in text, text  # 大家好…能听到我说话吗？
    assert all(ln.source for ln in w.model.data_.lines)
    # gauges received values on the display timer
    qtbot.waitUntil(lambda: w.gauges.cells["e2e_final"][3].text() not in ("–", "0"), timeout=10_000)
    assert w.gauges.updates > 0
    assert float(w.gauges.cells["e2e_final"][0].text().split()[0]) > 0
    assert float(w.gauges.cells["e2e_first_display"][0].text().split()[0]) > 0
    assert len(w.gauges.series["e2e_subtitle"]) > 0
    # the same latencies, scraped from the Prometheus exporter on loopback
    samples = scrape(port)
    assert samples[("e2e_latency_seconds_count", (("output", "subtitle"),))] > 0
    assert samples[("asr_first_token_latency_seconds_count", ())] > 0
    assert ("relay_degradation_level", ()) in samples
    # presenter overlay
    w.act_overlay.trigger()
    assert w.overlay.isVisible()
    qtbot.waitUntil(lambda: w.overlay.target_label.text() not in ("", "…"), timeout=30_000)
    w.act_overlay.trigger()
    assert not w.overlay.isVisible()
    # one row per sentence: a final replaces the first pass's pieces in place
    qtbot.waitUntil(lambda: any(not ln.pending for ln in w.model.data_.lines), timeout=60_000)
    assert not w.model.data_.lines[0].pending and w.model.data_.lines[0].covers
    # correct a final, export SRT, parse it back
    first = w.model.index(0)
    assert w.model.setData(first, (w.model.data_.lines[0].source, "Corrected by the interpreter"))
    srt = tmp_path / "live.srt"
    assert w.export_to(str(srt), "srt")
    cues = parse_srt(srt.read_text(encoding="utf-8"))
    assert cues and cues[0][2] == "Corrected by the interpreter"
    assert all(a <= b for a, b, _ in cues)
    # Stop: clean shutdown, every committed segment kept, summary shown
    w.toggle_session()
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=120_000)
    assert w.last_summary is not None and not w.last_summary.get("error")
    assert w.last_summary["interrupted"]
    rec = [s["id"] for s in w.controller.pipe.record.segments]
    assert [s["id"] for s in w.model.segments()] == rec
    assert all(not ln.pending for ln in w.model.data_.lines)  # every piece ended in a final
    assert w.model.segments()[0]["target"] == "Corrected by the interpreter"
    assert w.summary_dialog is not None and w.summary_dialog.isVisible()
    w.summary_dialog.close()
    assert session_threads() == []
    # Start again with the loaded models, then close the window mid-session
    w.start_session()
    qtbot.waitUntil(lambda: w.controller.state == "running", timeout=30_000)
    qtbot.waitUntil(lambda: w.model.rowCount() >= 2, timeout=30_000)
    w.close()
    qtbot.waitUntil(lambda: not w.isVisible(), timeout=120_000)
    assert not w.controller.busy and w.controller.wait(5)
    assert session_threads() == []
    assert len(w.model.segments()) == len(w.controller.pipe.record.segments)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def scrape(port: int) -> dict:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {(smp.name, tuple(sorted(smp.labels.items()))): smp.value
            for fam in text_string_to_metric_families(body) for smp in fam.samples}


def test_metrics_export_setting_serves_on_loopback_and_reports_a_busy_port(window, qtbot):
    w = window
    port = free_port()
    w.metrics_settings()  # Session ▸ Metrics export…: the dialog
    dlg = w.metrics_dialog
    assert not dlg.enabled() and not dlg.port_box.isEnabled()
    dlg.enable.setChecked(True)
    dlg.port_box.setValue(port)
    assert dlg.url.text() == f"http://127.0.0.1:{port}/metrics"
    dlg.accept()
    assert w.exporter is not None and w.exporter.host == "127.0.0.1" and w.exporter.port == port
    samples = scrape(port)  # no session yet: the families exist, empty
    assert ("e2e_latency_seconds_count", (("output", "subtitle"),)) not in samples
    assert ("relay_dropped_blocks_total", (("where", "ring_overrun"),)) not in samples
    assert w.metrics_label.isVisible() and str(port) in w.metrics_label.text()
    assert w.settings.get("metrics_enabled") and w.settings.get("metrics_port") == port
    # off: the port is closed again
    assert w.set_metrics(False, port)
    with pytest.raises(OSError):
        scrape(port)
    assert not w.metrics_label.isVisible() and not w.settings.get("metrics_enabled")
    # a port something else holds: one clear message, export stays off
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        assert not w.set_metrics(True, taken)
        qtbot.waitUntil(lambda: w.message_box is not None and w.message_box.isVisible(), timeout=5_000)
        text = w.message_box.text()
        assert text.startswith("Cannot serve metrics: cannot listen on 127.0.0.1:") and str(taken) in text
        assert "--metrics-port" not in text
    assert w.exporter is None and not w.settings.get("metrics_enabled")


@pytest.mark.models
def test_models_load_at_launch_and_start_uses_them(qtbot, monkeypatch):
    if not _have_models():
        pytest.fail("model packs are not installed: run `relay models install` first")
    calls = []
    real = ui_controller.load_models

    def counting(opts, *a, **k):
        calls.append((threading.current_thread().name, opts.pair))
        return real(opts, *a, **k)

    monkeypatch.setattr(ui_controller, "load_models", counting)
    w = MainWindow(list_devices=DeviceChoices)  # "Load models at launch" is on by default
    qtbot.addWidget(w)
    w.show()
    assert w.act_preload.isChecked()
    qtbot.waitUntil(lambda: "Models ready (zh-en)" in w.status_label.text(), timeout=240_000)
    assert calls == [("relay-preload", "zh-en")]
    assert w.set_file(str(DATA / "zh_03.wav"))
    w.start_session()
    qtbot.waitUntil(lambda: w.controller.state == "running", timeout=15_000)
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=120_000)
    assert calls == [("relay-preload", "zh-en")], "Start loaded the models again"
    assert w.last_summary is not None and w.last_summary["segments"]
    # another pair: its models load in the background too (and replace the first set)
    w.pair.setCurrentIndex(w.pair.findData("en-en"))
    qtbot.waitUntil(lambda: len(calls) == 2 and not w.controller._preloading[1].is_alive(), timeout=120_000)
    assert calls[1] == ("relay-preload", "en-en")
    assert [k[0] for k in w.controller._models] == ["en-en"]
    # switched off: remembered, and a pair change loads nothing
    w.act_preload.trigger()
    assert not w.settings.get("preload_models")
    w.pair.setCurrentIndex(w.pair.findData("zh-en"))
    qtbot.wait(1000)
    assert len(calls) == 2
    w.close()


def test_invalid_cloud_url_is_an_inline_error(window, qtbot):
    dlg = window.cloud_settings()
    dlg.url.setText("http://relay.example.org")
    dlg.accept()
    assert dlg.isVisible() and dlg.error.isVisible()
    assert "wss://" in dlg.error.text()
    assert window.settings.get("cloud_url") == ""  # nothing saved
    dlg.url.setText("wss://relay.example.org:8765")
    dlg.accept()
    assert not dlg.isVisible()
    assert window.settings.get("cloud_url") == "wss://relay.example.org:8765"


def test_cloud_switch_without_server_stays_local(window, qtbot):
    window.cloud_switch.setChecked(True)
    assert window.cloud.state == "local"
    assert "no cloud server configured" in window.status_label.text()


def test_missing_model_pack_names_the_install_command(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("RELAY_HOME", str(tmp_path / "empty-home"))
    monkeypatch.delenv("RELAY_MODELS", raising=False)
    w = MainWindow(list_devices=DeviceChoices)  # loading at launch finds nothing to load: no error
    qtbot.addWidget(w)
    w.show()
    assert w.pair.currentText() == "No models installed"
    assert w.set_file(str(DATA / "zh_03.wav"))
    w.start_session()
    qtbot.waitUntil(lambda: w.message_box is not None and w.message_box.isVisible(), timeout=30_000)
    assert "relay models install whisper-base" in w.message_box.text()
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=10_000)
    assert w.start_button.isEnabled() and w.start_button.text() == "Start"


def test_a_file_that_is_not_audio_is_refused(window, qtbot, tmp_path):
    bad = tmp_path / "notes.wav"
    bad.write_text("these are meeting notes, not audio\n" * 20)
    assert not window.set_file(str(bad))
    assert window.message_box is not None and window.message_box.isVisible()
    assert "notes.wav" in window.message_box.text() and "audio" in window.message_box.text()
    assert window.file_edit.text() != str(bad)
    # typed into the field directly: refused when the session starts, with a message, no traceback
    window.message_box.close()
    window.file_edit.setText(str(bad))
    window.start_session()
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=30_000)
    assert window.message_box.isVisible() and "notes.wav" in window.message_box.text()
    assert window.controller.pipe is None
