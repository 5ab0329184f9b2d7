"""Colour themes: dark (default), light and high contrast, as a palette plus a small style sheet."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication


@dataclass(frozen=True)
class Theme:
    name: str
    title: str
    window: str
    base: str
    alt_base: str
    text: str
    dim_text: str  # tentative text and secondary labels
    accent: str
    button: str
    border: str
    ok: str
    warn: str
    bad: str
    chart_sub: str
    chart_dub: str
    chart_asr: str


THEMES = {
    "dark": Theme("dark", "Dark", "#1d2026", "#15171c", "#1a1d23", "#e6e8eb", "#8a919c", "#4f9dff",
                  "#2a2e36", "#343944", "#3ecf8e", "#f0b23e", "#ef5b5b", "#4f9dff", "#3ecf8e", "#c58af9"),
    "light": Theme("light", "Light", "#f3f4f6", "#ffffff", "#f7f8fa", "#1b1e23", "#7a808a", "#1a66d6",
                   "#e4e6ea", "#cfd3d9", "#1f9d63", "#b87a00", "#c62828", "#1a66d6", "#1f9d63", "#8e44ad"),
    "contrast": Theme("contrast", "High contrast", "#000000", "#000000", "#000000", "#ffffff", "#ffd400",
                      "#00e5ff", "#000000", "#ffffff", "#00ff66", "#ffd400", "#ff4040", "#00e5ff", "#00ff66",
                      "#ff66ff"),
}


def get(name: str) -> Theme:
    return THEMES.get(name, THEMES["dark"])


def apply(app: QApplication, name: str) -> Theme:
    t = get(name)
    app.setStyle("Fusion")
    p = QPalette()
    roles = {
        QPalette.Window: t.window, QPalette.WindowText: t.text, QPalette.Base: t.base,
        QPalette.AlternateBase: t.alt_base, QPalette.Text: t.text, QPalette.Button: t.button,
        QPalette.ButtonText: t.text, QPalette.Highlight: t.accent, QPalette.ToolTipBase: t.button,
        QPalette.ToolTipText: t.text, QPalette.PlaceholderText: t.dim_text, QPalette.Link: t.accent,
    }
    for role, colour in roles.items():
        p.setColor(role, QColor(colour))
    p.setColor(QPalette.HighlightedText, QColor("#000000" if name == "contrast" else "#ffffff"))
    p.setColor(QPalette.Disabled, QPalette.Text, QColor(t.dim_text))
    p.setColor(QPalette.Disabled, QPalette.ButtonText, QColor(t.dim_text))
    p.setColor(QPalette.Disabled, QPalette.WindowText, QColor(t.dim_text))
    app.setPalette(p)
    focus_w = 2 if name == "contrast" else 1
    app.setStyleSheet(f"""
        QToolTip {{ color: {t.text}; background: {t.button}; border: 1px solid {t.border}; padding: 4px; }}
        QGroupBox {{ border: 1px solid {t.border}; border-radius: 6px; margin-top: 14px; padding: 8px 6px 6px 6px; }}
        QGroupBox::title {{ subcontrol-origin: margin; left: 10px; padding: 0 4px; color: {t.dim_text}; }}
        QPushButton {{ padding: 5px 12px; border: 1px solid {t.border}; border-radius: 5px; background: {t.button}; }}
        QPushButton:focus, QComboBox:focus, QSlider:focus, QCheckBox:focus, QLineEdit:focus, QListView:focus {{
            border: {focus_w}px solid {t.accent}; }}
        QPushButton#startButton {{ background: {t.accent}; color: #ffffff; font-weight: 600; border: none;
            padding: 7px 22px; }}
        QPushButton#startButton[running="true"] {{ background: {t.bad}; }}
        QPushButton#startButton:disabled {{ background: {t.border}; color: {t.dim_text}; }}
        QComboBox, QLineEdit {{ padding: 4px 6px; border: 1px solid {t.border}; border-radius: 5px;
            background: {t.base}; }}
        QLabel#gaugeValue {{ font-family: "DejaVu Sans Mono", monospace; }}
        QLabel#sectionTitle {{ color: {t.dim_text}; font-weight: 600; }}
        QLabel#inlineError {{ color: {t.bad}; }}
        QLabel#liveBadge {{ color: #ffffff; background: {t.bad}; border-radius: 4px; padding: 1px 6px;
            font-weight: 700; }}
        QListView {{ border: 1px solid {t.border}; border-radius: 6px; }}
        QStatusBar {{ color: {t.dim_text}; }}
    """)
    return t
