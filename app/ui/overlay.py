"""Presenter overlay: a frameless, always-on-top, resizable two-line subtitle bar to put over
slides. Drag anywhere to move, the corner grip to resize, Esc or double-click to hide."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QColor, QFont, QPainter
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizeGrip, QVBoxLayout, QWidget

from app.ui.settings import Settings


class SubtitleOverlay(QWidget):
    hidden_by_user = Signal()

    def __init__(self, settings: Settings):
        super().__init__(None, Qt.FramelessWindowHint | Qt.WindowStaysOnTopHint | Qt.Tool)
        self.settings = settings
        self.setWindowTitle("Relay subtitles")
        self.setAttribute(Qt.WA_TranslucentBackground)
        self.setMinimumSize(360, 90)
        self._drag: QPoint | None = None
        self.source_label = QLabel(self)
        self.target_label = QLabel(self)
        for lab in (self.source_label, self.target_label):
            lab.setWordWrap(True)
            lab.setAlignment(Qt.AlignHCenter | Qt.AlignBottom)
            lab.setStyleSheet("color: #ffffff; background: transparent;")
            lab.setAttribute(Qt.WA_TransparentForMouseEvents)
        self.source_label.setStyleSheet("color: #c9ced6; background: transparent;")
        grip = QSizeGrip(self)
        grip.setToolTip("Drag to resize")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(18, 10, 4, 4)
        lay.setSpacing(2)
        lay.addWidget(self.source_label)
        lay.addWidget(self.target_label, 1)
        corner = QHBoxLayout()
        corner.addStretch(1)
        corner.addWidget(grip, 0, Qt.AlignBottom | Qt.AlignRight)
        lay.addLayout(corner)
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

    def set_text(self, target: str, source: str = "", tentative: bool = False) -> None:
        self.target_label.setText(target or "…")
        self.source_label.setText(source)
        colour = "#b8bec8" if tentative else "#ffffff"
        self.target_label.setStyleSheet(f"color: {colour}; background: transparent;")

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
        self.remember()

    def hideEvent(self, ev) -> None:
        self.remember()
        super().hideEvent(ev)

    def remember(self) -> None:
        self.settings.set_bytes("overlay_geometry", self.saveGeometry())
