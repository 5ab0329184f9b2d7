"""Help → About lists every model and library with its licence; Help → Model packs installs the
missing packs with a progress bar."""

import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"

import app.ui  # noqa: E402,F401  (before any Qt call)
from app import __version__  # noqa: E402
from app.models.catalog import PACKS, default_packs  # noqa: E402


@pytest.fixture(autouse=True)
def settings_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("RELAY_SETTINGS_DIR", str(tmp_path / "settings"))


@pytest.fixture
def window(qtbot):
    from app.ui.choices import DeviceChoices
    from app.ui.window import MainWindow

    w = MainWindow(list_devices=DeviceChoices, preload=False)
    qtbot.addWidget(w)
    w.show()
    yield w
    w.overlay.close()


def menu_action(w, text):
    for top in w.menuBar().actions():
        for a in top.menu().actions():
            if a.text().replace("&", "") == text:
                return a
    raise AssertionError(f"no menu action {text!r}")


def test_about_lists_every_model_and_library_with_its_licence(window, qtbot):
    from app.ui.about import LIBRARIES, AboutDialog

    menu_action(window, "About Relay").trigger()
    dlg = window.about_dialog
    assert isinstance(dlg, AboutDialog)
    qtbot.waitUntil(dlg.isVisible)
    text = dlg.text.toPlainText()
    assert f"Relay {__version__}" in text and "GPL-3.0-or-later" in text
    for pack in PACKS.values():
        assert pack.title in text and pack.licence in text
    assert "Jörg Tiedemann" in text and "CC-BY 4.0" in text  # OPUS-MT attribution
    assert "piper-tts" in text and "Silero VAD" in text
    for dist, _what, lic in LIBRARIES:
        assert dist in text and lic in text
    from app.ui.about import about_html

    piper_row = next(r for r in about_html().split("<tr>") if "<td>piper-tts</td>" in r)
    assert "<td>GPL-3.0-or-later</td>" in piper_row and "<td>1.8.0</td>" in piper_row  # licence and version
    dlg.reject()


def test_about_names_imported_models_too(tmp_path, monkeypatch, qtbot):
    from app.models import store
    from app.ui.about import AboutDialog

    d = tmp_path / "models" / "user-mt-en-de"
    d.mkdir(parents=True)
    store._write_manifest(d, "user-mt-en-de", "mt", ["en", "de"], "CC-BY-4.0 (my licence)", {})
    monkeypatch.setenv("RELAY_MODELS", str(tmp_path / "models"))
    dlg = AboutDialog()
    qtbot.addWidget(dlg)
    text = dlg.text.toPlainText()
    assert "user-mt-en-de" in text and "CC-BY-4.0 (my licence)" in text and str(tmp_path / "models") in text


def test_model_packs_dialog_installs_the_missing_packs_with_progress(window, qtbot, tmp_path, monkeypatch):
    from app.models import store
    from app.ui import models_dialog

    monkeypatch.setenv("RELAY_MODELS", str(tmp_path / "models"))
    calls = []

    def fake_install(pid, progress, on_bytes):  # what store.install reports, without the download
        calls.append(pid)
        progress(f"{pid}: fetching")
        for done in (0, 50, 100):
            on_bytes(done, 100)
        d = tmp_path / "models" / pid
        d.mkdir(parents=True)
        store._write_manifest(d, pid, PACKS[pid].role, list(PACKS[pid].languages), PACKS[pid].licence, {})

    dlg = models_dialog.ModelsDialog(window, install=fake_install)
    qtbot.addWidget(dlg)
    # the optional packs (the LLM translator) are not among the missing: they are installed by name
    assert dlg.missing() == default_packs() and dlg.install_button.isEnabled()
    assert not any(PACKS[p].optional for p in dlg.missing()) and len(default_packs()) < len(PACKS)
    values = []
    dlg.bar.valueChanged.connect(values.append)
    dlg.install_missing()
    qtbot.waitUntil(lambda: dlg.worker is None, timeout=10_000)
    assert calls == default_packs()
    assert values == sorted(values) and values[-1] == 1000
    assert dlg.missing() == [] and not dlg.install_button.isEnabled()
    assert dlg.status.text() == "Installed and verified."


def test_model_packs_dialog_reports_a_failed_install(qtbot, tmp_path, monkeypatch):
    from app.core.errors import UserError
    from app.ui import models_dialog

    monkeypatch.setenv("RELAY_MODELS", str(tmp_path / "models"))

    def failing(pid, progress, on_bytes):
        raise UserError(f"could not download {pid}: no route to host")

    dlg = models_dialog.ModelsDialog(install=failing)
    qtbot.addWidget(dlg)
    dlg.install_missing()
    qtbot.waitUntil(lambda: dlg.worker is None, timeout=10_000)
    assert dlg.status.text().startswith("Install failed: could not download whisper-base")
    assert dlg.install_button.isEnabled() and not dlg.bar.isVisible()
