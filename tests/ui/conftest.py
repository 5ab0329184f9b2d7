"""GUI tests: offscreen Qt, settings in a temporary folder, no OS keyring writes."""

import os
import threading

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"

import app.ui  # noqa: E402,F401  (the shiboken 6.12 reference-count shim, before any Qt call)
from app.ui.choices import DeviceChoices  # noqa: E402
from app.ui.window import MainWindow  # noqa: E402


@pytest.fixture(autouse=True)
def settings_dir(tmp_path, monkeypatch):
    d = tmp_path / "settings"
    monkeypatch.setenv("RELAY_SETTINGS_DIR", str(d))
    return d


@pytest.fixture
def window(qtbot, settings_dir):
    # no background model loading at launch: each test starts (and loads) when it means to
    w = MainWindow(list_devices=DeviceChoices, preload=False)
    qtbot.addWidget(w)
    w.show()
    yield w
    if w.controller.busy:
        w.controller.stop()
        qtbot.waitUntil(lambda: not w.controller.busy, timeout=120_000)
    w.overlay.close()


def session_threads() -> list[str]:
    names = ("asr", "mt", "tts", "serial", "relay-session", "playback")
    return [t.name for t in threading.enumerate() if t.is_alive() and t.name in names]
