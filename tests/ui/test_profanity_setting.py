"""Session → Profanity: the setting persists, reaches the session's options, and what a filtered
session publishes is what the window shows and exports."""

from app.pipeline.engine import EventBus
from app.pipeline.messages import FinalSentence, Segment, Translation
from app.pipeline.protocols import Word
from app.session.build import shown_text
from app.ui.choices import PROFANITY_CHOICES, DeviceChoices
from app.ui.window import MainWindow


def test_the_default_is_masked_and_the_menu_says_so(window):
    assert set(window.profanity_actions) == set(PROFANITY_CHOICES) == {"masked", "removed", "raw"}
    assert window.profanity_actions["masked"].isChecked()
    assert window.request().opts.profanity == "masked"


def test_the_setting_round_trips_through_the_settings_file(window, qtbot):
    window.profanity_actions["removed"].trigger()
    assert window.settings.get("profanity") == "removed"
    assert window.request().opts.profanity == "removed"
    assert "Profanity: removed" in window.status_label.text()
    assert [m for m, a in window.profanity_actions.items() if a.isChecked()] == ["removed"]  # one at a time
    window.save_settings()
    again = MainWindow(list_devices=DeviceChoices, preload=False)  # the next launch
    qtbot.addWidget(again)
    assert again.profanity_actions["removed"].isChecked() and again.request().opts.profanity == "removed"
    again.reset_settings()
    assert again.profanity_actions["masked"].isChecked() and again.request().opts.profanity == "masked"
    again.overlay.close()


def test_a_corrupt_stored_value_reads_as_the_default(window):
    window.settings.set("profanity", "bleep")  # edited by hand, or from a later version
    assert window.profanity() == "masked" and window.request().opts.profanity == "masked"


def test_the_window_shows_and_exports_what_a_filtered_session_publishes(window):
    bus = EventBus(shown_text("masked", "en", "en"))
    bus.subscribe(window.bridge)
    w = (Word(" a", 0.0, 0.5), Word(" fucking", 0.5, 1.0), Word(" day.", 1.0, 1.5))
    seg = Segment(0, w, "pause", True, 0.5, "en")
    bus.publish(seg)
    bus.publish(Translation(0, seg.text, "A fucking day.", 0.0, 1.5, 0.6, segment=seg))
    window.bridge.flush()
    assert "f******" in window.model.plain_text() and "fucking" not in window.model.plain_text()
    window.model.final_mode = True
    bus.publish(FinalSentence(0, w, "a fucking day.", "What a shit day.", 0.0, 1.5, 2.0, 0.6, (0,),
                              "a fucking day.", "A fucking day."))
    window.bridge.flush()
    srt = window.export_text("srt")
    assert "What a s*** day." in srt and "shit" not in srt and "fucking" not in window.export_text("txt")
