"""The main window's menu bar: every action, its shortcut and the window method it calls.

``build_menus`` sets the actions other code reads on the window (``act_start``, ``act_overlay``,
``act_preload``, ``theme_actions``, ``profanity_actions``, ``final_mt_actions``…)."""

from __future__ import annotations

from PySide6.QtGui import QAction, QActionGroup, QKeySequence

from app.ui import theme as themes
from app.ui.choices import FINAL_MT_LABELS, PROFANITY_CHOICES


def build_menus(win) -> None:
    def act(menu, text: str, slot, shortcut=None, checkable: bool = False) -> QAction:
        a = QAction(text, win)
        if shortcut:
            a.setShortcut(QKeySequence(shortcut))
        a.setCheckable(checkable)
        (a.toggled if checkable else a.triggered).connect(slot)
        menu.addAction(a)
        return a

    mb = win.menuBar()
    f = mb.addMenu("&File")
    act(f, "&Open audio file…", win.choose_file, QKeySequence.Open)
    f.addSeparator()
    win.act_srt = act(f, "Export subtitles as &SRT…", lambda: win.export_dialog("srt"), "Ctrl+E")
    act(f, "Export subtitles as &VTT…", lambda: win.export_dialog("vtt"), "Ctrl+Shift+E")
    act(f, "Export transcript as &text…", lambda: win.export_dialog("txt"), "Ctrl+Shift+T")
    win.act_dub = act(f, "Export &dub as WAV…", win.export_dub_dialog, "Ctrl+Shift+D")
    f.addSeparator()
    act(f, "&Quit", win.close, QKeySequence.Quit)

    e = mb.addMenu("&Edit")
    act(e, "&Copy transcript", win.copy_transcript, "Ctrl+Shift+C")
    act(e, "C&lear transcript", win.clear_transcript, "Ctrl+K")
    act(e, "Co&rrect selected line", win._edit_current, "F2")
    e.addSeparator()
    act(e, "&Reset settings…", win.reset_settings)

    s = mb.addMenu("&Session")
    win.act_start = act(s, "&Start", win.toggle_session, "F5")
    act(s, "&Cloud server…", win.cloud_settings, "Ctrl+,")
    act(s, "&Metrics export…", win.metrics_settings)
    win.act_preload = act(s, "&Load models at launch", win.set_preload, checkable=True)
    win.act_preload.setChecked(win.settings.get("preload_models"))
    pm = s.addMenu("&Profanity")
    pm.setToolTipsVisible(True)
    profanity_group = QActionGroup(win)
    win.profanity_actions = {}
    for mode, label in PROFANITY_CHOICES.items():
        a = act(pm, label, lambda on, m=mode: on and win.set_profanity(m), checkable=True)
        a.setToolTip("What subtitles, exports and the dub make of profanity (from the next session)")
        profanity_group.addAction(a)
        win.profanity_actions[mode] = a
    fm = s.addMenu("&Final translation")
    fm.setToolTipsVisible(True)
    final_group = QActionGroup(win)
    win.final_mt_actions = {}
    for choice, label in FINAL_MT_LABELS.items():
        a = act(fm, label, lambda on, c=choice: on and win.set_final_mt(c), checkable=True)
        final_group.addAction(a)
        win.final_mt_actions[choice] = a
    fm.aboutToShow.connect(win.refresh_final_mt)  # a pack installed meanwhile is offered at once
    win.act_summary = act(s, "Last session s&ummary", win.show_summary)

    v = mb.addMenu("&View")
    win.act_overlay = act(v, "Presenter &overlay", win.set_overlay, "F8", checkable=True)
    win.act_overlay_src = act(v, "Overlay shows &source line", win._overlay_source, checkable=True)
    win.act_gauges = win.gauges_dock.toggleViewAction()
    win.act_gauges.setShortcut(QKeySequence("F9"))
    v.addAction(win.act_gauges)
    v.addSeparator()
    layout_group = QActionGroup(win)
    win.act_side = act(v, "Side &by side", lambda on: on and win.set_layout("side"), "Ctrl+1", True)
    win.act_stacked = act(v, "S&tacked", lambda on: on and win.set_layout("stacked"), "Ctrl+2", True)
    layout_group.addAction(win.act_side)
    layout_group.addAction(win.act_stacked)
    v.addSeparator()
    act(v, "&Larger text", lambda: win.set_font_size(win.settings.get("font_size") + 1), QKeySequence.ZoomIn)
    act(v, "S&maller text", lambda: win.set_font_size(win.settings.get("font_size") - 1), QKeySequence.ZoomOut)
    th = v.addMenu("T&heme")
    theme_group = QActionGroup(win)
    win.theme_actions = {}
    for name, t in themes.THEMES.items():
        a = act(th, t.title, lambda on, n=name: on and win.apply_theme(n), checkable=True)
        theme_group.addAction(a)
        win.theme_actions[name] = a

    h = mb.addMenu("&Help")
    act(h, "&Model packs…", win.model_packs)
    act(h, "&About Relay", win.about)
