"""Session → Final translation: the choice persists, reaches the session's options as
`relay run --final-mt` does, and an LLM pack that is not installed is offered disabled with the
command that installs it."""

from app.models import store
from app.ui.choices import FINAL_MT_LABELS, DeviceChoices
from app.ui.window import MainWindow


def _installed_without(monkeypatch, *packs):
    real = store.installed()
    monkeypatch.setattr(store, "installed", lambda *a, **k: {k_: v for k_, v in real.items() if k_ not in packs})


def test_the_default_is_auto_and_every_choice_is_in_the_menu(window):
    assert list(window.final_mt_actions) == list(FINAL_MT_LABELS) == ["auto", "opus", "qwen-1.5b", "qwen-0.5b"]
    assert window.final_mt_actions["auto"].isChecked() and window.request().opts.final_mt == "auto"
    assert window.final_mt_actions["opus"].isEnabled()


def test_a_choice_round_trips_through_the_settings_file(window, qtbot):
    window.final_mt_actions["opus"].trigger()
    assert window.settings.get("final_mt") == "opus" and window.request().opts.final_mt == "opus"
    assert "Final translation: opus" in window.status_label.text()
    assert [c for c, a in window.final_mt_actions.items() if a.isChecked()] == ["opus"]  # one at a time
    window.save_settings()
    again = MainWindow(list_devices=DeviceChoices, preload=False)  # the next launch
    qtbot.addWidget(again)
    assert again.final_mt_actions["opus"].isChecked() and again.request().opts.final_mt == "opus"
    again.reset_settings()
    assert again.final_mt_actions["auto"].isChecked() and again.request().opts.final_mt == "auto"
    again.overlay.close()


def test_an_llm_pack_not_installed_is_disabled_and_names_its_install_command(window, monkeypatch):
    _installed_without(monkeypatch, "qwen-1.5b")
    window.refresh_final_mt()
    a = window.final_mt_actions["qwen-1.5b"]
    assert not a.isEnabled() and "relay models install qwen-1.5b" in a.toolTip()
    # chosen when it was installed, then removed: the session runs with auto, not a failing pack
    window.settings.set("final_mt", "qwen-1.5b")
    assert window.final_mt() == "auto" and window.request().opts.final_mt == "auto"
    window.set_final_mt("qwen-1.5b")
    assert "relay models install qwen-1.5b" in window.status_label.text()
    assert window.final_mt_actions["auto"].isChecked()


def test_an_installed_llm_pack_can_be_chosen(window, monkeypatch):
    real = store.installed()
    if "qwen-0.5b" not in real:  # scripts/test.sh installs it; a bare checkout may lack it
        monkeypatch.setattr(store, "installed", lambda *a, **k: {**real, "qwen-0.5b": object()})
    window.refresh_final_mt()
    assert window.final_mt_actions["qwen-0.5b"].isEnabled()
    window.final_mt_actions["qwen-0.5b"].trigger()
    assert window.request().opts.final_mt == "qwen-0.5b"


def test_a_corrupt_stored_value_reads_as_auto(window):
    window.settings.set("final_mt", "gpt-9")
    assert window.final_mt() == "auto" and window.request().opts.final_mt == "auto"
