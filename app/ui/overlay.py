"""Presenter overlay: a frameless, always-on-top, resizable two-line subtitle bar to put over
slides. Drag anywhere to move, the corner grip to resize, Esc or double-click to hide.

It shows the last two lines of the running target text, wrapped to its width as live-caption
tools do: the finals, then the first pass's pending tail (lighter), then the tentative preview
(lighter still); new words push the older line up and out."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QPainter
from PySide6.QtWidgets import QLabel, QSizeGrip, QVBoxLayout, QWidget

from app.session.subtitles import tokens
from app.ui.settings import Settings

LINES = 2
COLOURS = {"final": "#ffffff", "pending": "#d2d6dd", "preview": "#9aa1ab"}


class SubtitleOverlay(QWidget):
    hidden_by_user = Signal()

    def __init__(self, settings: Settings):
        super().__init__(None, Qt.FramelessWindowHint | Qt.WindowStaysOnTopHint | Qt.Tool)
        self.settings = settings
        self.setWindowTitle("Relay subtitles")
        self.setAttribute(Qt.WA_TranslucentBackground)
        self.setMinimumSize(360, 90)
        self._drag: QPoint | None = None
        self._running: tuple[str, str, str] = ("", "", "")
        self.lines: list[list[tuple[str, bool, str]]] = []  # shown: lines of (token, space, kind)
        self.source_label = QLabel(self)
        self.target_label = QLabel(self)
        for lab in (self.source_label, self.target_label):
            lab.setWordWrap(True)
            lab.setAlignment(Qt.AlignHCenter | Qt.AlignBottom)
            lab.setStyleSheet("color: #ffffff; background: transparent;")
            lab.setAttribute(Qt.WA_TransparentForMouseEvents)
        self.source_label.setStyleSheet("color: #c9ced6; background: transparent;")
        self.target_label.setTextFormat(Qt.RichText)
        self.target_label.setAlignment(Qt.AlignLeft | Qt.AlignBottom)  # caption lines grow to the right
        self.source_label.setWordWrap(False)
        self.source_label.setTextFormat(Qt.PlainText)
        self.grip = QSizeGrip(self)  # in the corner, over the text's margin (it takes no row)
        self.grip.setToolTip("Drag to resize")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(18, 8, 18, 10)
        lay.setSpacing(2)
        lay.addWidget(self.source_label)
        lay.addWidget(self.target_label, 1)
        self.apply_settings()
        geo = settings.get_bytes("overlay_geometry")
        if geo is None or not self.restoreGeometry(geo):
            self.resize(1000, 130)
        self.set_text("", "")

    def apply_settings(self) -> None:
        size = self.settings.get("overlay_font_size")
        f = QFont(self.font())
        f.setPointSize(size)
        f.setWeight(QFont.DemiBold)
        self.target_label.setFont(f)
        s = QFont(self.font())
        s.setPointSize(max(10, int(size * 0.6)))
        self.source_label.setFont(s)
        self.source_label.setVisible(self.settings.get("overlay_source"))
        # room for the source line and two caption lines, whatever the font size
        need = 18 + 2 * QFontMetricsF(f).lineSpacing() + 6
        if self.settings.get("overlay_source"):
            need += QFontMetricsF(s).lineSpacing() + 2
        self.setMinimumHeight(int(need) + 1)
        self._layout()

    def set_text(self, target: str, source: str = "", tentative: bool = False) -> None:
        """One piece of text (the running text's pending tail when ``tentative``)."""
        self.set_running("" if tentative else target, target if tentative else "", "", source)

    def set_running(self, final: str, pending: str = "", preview: str = "", source: str = "") -> None:
        """The running target text: what is final, the first pass's pending tail, the preview."""
        self._running = (final, pending, preview)
        fm = QFontMetricsF(self.source_label.font())
        w = max(50, self.source_label.width() or self.width() - 30)
        self.source_label.setText(fm.elidedText(source, Qt.ElideLeft, w))
        self._layout()

    def _layout(self) -> None:
        toks = []
        for kind, text in zip(("final", "pending", "preview"), self._running):
            toks += [(t, sp or (bool(toks) and j == 0 and text[:1].isascii()), kind)
                     for j, (t, sp) in enumerate(tokens(text))]
        fm = QFontMetricsF(self.target_label.font())
        width = max(80.0, float(self.target_label.contentsRect().width() or self.width() - 30) - 4)
        space = fm.horizontalAdvance(" ")
        lines: list[list] = []
        used = 0.0
        for t, sp, kind in toks:
            tw = fm.horizontalAdvance(t)
            if lines and used + (space if sp else 0) + tw <= width:
                lines[-1].append((t, sp, kind))
                used += (space if sp else 0) + tw
            else:
                lines.append([(t, False, kind)])
                used = tw
        self.lines = lines[-LINES:]
        if not self.lines:
            self.target_label.setText("…")
            return
        html = "<br>".join("".join((" " if sp else "") + f'<span style="color:{COLOURS[k]}">{_esc(t)}</span>'
                                   for t, sp, k in ln) for ln in self.lines)
        self.target_label.setText(html)

    def shown_lines(self) -> list[str]:
        return ["".join((" " if sp else "") + t for t, sp, _ in ln) for ln in self.lines]

    def paintEvent(self, _ev) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.Antialiasing)
        p.setBrush(QColor(12, 14, 18, 215))
        p.setPen(QColor(255, 255, 255, 40))
        p.drawRoundedRect(self.rect().adjusted(0, 0, -1, -1), 12, 12)

    def mousePressEvent(self, ev) -> None:
        if ev.button() == Qt.LeftButton:
            self._drag = ev.globalPosition().toPoint() - self.frameGeometry().topLeft()

    def mouseMoveEvent(self, ev) -> None:
        if self._drag is not None and ev.buttons() & Qt.LeftButton:
            self.move(ev.globalPosition().toPoint() - self._drag)

    def mouseReleaseEvent(self, _ev) -> None:
        self._drag = None
        self.remember()

    def mouseDoubleClickEvent(self, _ev) -> None:
        self.hide()
        self.hidden_by_user.emit()

    def keyPressEvent(self, ev) -> None:
        if ev.key() == Qt.Key_Escape:
            self.hide()
            self.hidden_by_user.emit()
        else:
            super().keyPressEvent(ev)

    def resizeEvent(self, ev) -> None:
        super().resizeEvent(ev)
        self.grip.move(self.width() - self.grip.width(), self.height() - self.grip.height())
        self._layout()
        self.remember()

    def hideEvent(self, ev) -> None:
        self.remember()
        super().hideEvent(ev)

    def remember(self) -> None:
        self.settings.set_bytes("overlay_geometry", self.saveGeometry())


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
