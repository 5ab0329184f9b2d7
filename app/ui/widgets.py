"""Small custom controls: the local/cloud switch and its status light."""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QAbstractButton, QSizePolicy, QWidget


class ToggleSwitch(QAbstractButton):
    """A checkable pill switch (Space toggles it, like a check box)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setCheckable(True)
        self.setFocusPolicy(Qt.StrongFocus)
        self.setCursor(Qt.PointingHandCursor)
        self.setSizePolicy(QSizePolicy.Fixed, QSizePolicy.Fixed)
        self.on_colour = QColor("#4f9dff")

    def sizeHint(self) -> QSize:
        return QSize(46, 24)

    def paintEvent(self, _ev) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.Antialiasing)
        r = QRectF(self.rect()).adjusted(1, 1, -1, -1)
        pal = self.palette()
        track = self.on_colour if self.isChecked() else pal.mid().color()
        if not self.isEnabled():
            track = pal.mid().color().darker(130)
        p.setPen(QColor(pal.highlight().color()) if self.hasFocus() else Qt.NoPen)
        p.setBrush(track)
        p.drawRoundedRect(r, r.height() / 2, r.height() / 2)
        d = r.height() - 6
        x = r.right() - d - 3 if self.isChecked() else r.left() + 3
        p.setPen(Qt.NoPen)
        p.setBrush(QColor("#ffffff"))
        p.drawEllipse(QRectF(x, r.top() + 3, d, d))


class StatusLight(QWidget):
    COLOURS = {"local": "#8a919c", "connecting": "#f0b23e", "cloud": "#3ecf8e", "lost": "#ef5b5b"}

    def __init__(self, parent=None):
        super().__init__(parent)
        self.state = "local"
        self.setFixedSize(14, 14)

    def set_state(self, state: str) -> None:
        self.state = state
        self.update()

    def paintEvent(self, _ev) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.Antialiasing)
        p.setPen(Qt.NoPen)
        p.setBrush(QColor(self.COLOURS.get(self.state, "#8a919c")))
        p.drawEllipse(QRectF(1, 1, 12, 12))
