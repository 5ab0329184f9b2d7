"""The window's local/cloud switch against a real `relay serve` (TLS on loopback)."""

from pathlib import Path

import pytest

from tests.integration.test_cloud import TOKEN, Server
from tests.ui.conftest import session_threads

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"
pytestmark = pytest.mark.models


@pytest.fixture
def server(tmp_path):
    s = Server(tmp_path, pairs="zh-en")
    yield s
    s.stop()


def test_cloud_switch_runs_the_session_on_the_server_and_falls_back(window, qtbot, server):
    w = window
    w._save_cloud(server.url, TOKEN, server.cert)
    w.cloud_switch.setChecked(True)
    qtbot.waitUntil(lambda: w.cloud.state == "cloud", timeout=30_000)
    assert w.cloud_label.text() == "Cloud connected"
    # a session through the server
    assert w.set_file(str(DATA / "zh_03.wav"))
    w.dub.setChecked(False)
    w.start_session()
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=240_000)
    s = w.last_summary
    assert s is not None and not s.get("error"), s
    assert s["mode"] == "cloud/file" and s["stages"]["cloud"]["status"] == "cloud"
    assert "third quarter" in " ".join(x["target"] or "" for x in s["segments"]).lower()
    if w.summary_dialog is not None:
        w.summary_dialog.close()
    # the server dies mid-session: the light says so and the local models carry on
    assert w.set_file(str(DATA / "zh_demo_20s.wav"))
    w.start_session()
    qtbot.waitUntil(lambda: w.model.rowCount() >= 1, timeout=120_000)
    server.proc.kill()
    qtbot.waitUntil(lambda: w.cloud.state == "lost", timeout=10_000)
    assert "local" in w.cloud_label.text().lower()
    n = w.model.rowCount()
    qtbot.waitUntil(lambda: w.model.rowCount() > n + 1, timeout=60_000)
    w.toggle_session()
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=120_000)
    s = w.last_summary
    assert s is not None and not s.get("error"), s
    assert s["stages"]["cloud"]["switches"], "the fallback should be recorded"
    if w.summary_dialog is not None:
        w.summary_dialog.close()
    assert session_threads() == []
