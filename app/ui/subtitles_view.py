"""Live subtitles: source and target side by side or stacked, committed text solid, tentative text
lighter, auto-scroll that pauses while the user reads back, corrections in place."""

from __future__ import annotations

import time

from PySide6.QtCore import QEvent, QRect, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QTextDocument
from PySide6.QtWidgets import (
    QAbstractItemView,
    QBoxLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListView,
    QPushButton,
    QStyle,
    QStyledItemDelegate,
    QVBoxLayout,
    QWidget,
)

from app.ui import theme as themes
from app.ui.transcript import FADE_S, IS_LIVE_ROLE, LINE_ROLE, Line, Live, TranscriptModel, clock

TIME_W = 64
PAD = 8
GAP = 16


class LineEditor(QWidget):
    """Editor for one committed line: source and translation fields."""

    done = Signal()

    def __init__(self, parent, stacked: bool):
        super().__init__(parent)
        self.setAutoFillBackground(True)
        lay = QBoxLayout(QBoxLayout.TopToBottom if stacked else QBoxLayout.LeftToRight, self)
        lay.setContentsMargins(TIME_W, 2, 4, 2)
        self.source = QLineEdit(self)
        self.source.setAccessibleName("Corrected source text")
        self.target = QLineEdit(self)
        self.target.setAccessibleName("Corrected translation")
        lay.addWidget(self.source)
        lay.addWidget(self.target)
        self.setFocusProxy(self.target)
        for e in (self.source, self.target):
            e.returnPressed.connect(self.done)


class SubtitleDelegate(QStyledItemDelegate):
    def __init__(self, view: QListView):
        super().__init__(view)
        self.view = view
        self.layout = "side"
        self.theme = themes.get("dark")
        self.font = QFont()
        self._cache: dict[tuple, QSize] = {}

    def configure(self, layout: str, font: QFont, theme) -> None:
        self.layout, self.font, self.theme = layout, QFont(font), theme
        self._cache.clear()

    # geometry ---------------------------------------------------------------------------------
    def _fonts(self) -> tuple[QFont, QFont, QFont]:
        src = QFont(self.font)
        tgt = QFont(self.font)
        if self.layout == "stacked":
            src.setPointSizeF(self.font.pointSizeF() * 0.85)
            tgt.setWeight(QFont.DemiBold)
        small = QFont(self.font)
        small.setPointSizeF(max(8.0, self.font.pointSizeF() * 0.7))
        return src, tgt, small

    def _columns(self, width: int) -> tuple[QRect, QRect]:
        """Source and target text rectangles relative to the row's top-left (height unbounded)."""
        inner = max(120, width - TIME_W - 2 * PAD)
        if self.layout == "stacked":
            return QRect(TIME_W, PAD, inner, 0), QRect(TIME_W, PAD, inner, 0)
        half = (inner - GAP) // 2
        return QRect(TIME_W, PAD, half, 0), QRect(TIME_W + half + GAP, PAD, inner - half - GAP, 0)

    @staticmethod
    def _height(font: QFont, width: int, text: str) -> int:
        if not text:
            return QFontMetrics(font).height()
        return QFontMetrics(font).boundingRect(QRect(0, 0, width, 100000), Qt.TextWordWrap, text).height()

    def sizeHint(self, option, index) -> QSize:
        item = index.data(LINE_ROLE)
        width = self.view.viewport().width()
        draft = isinstance(item, Line) and item.pending and getattr(index.model(), "final_mode", False)
        key = (id(item), item.version, width, isinstance(item, Live), draft)
        hit = self._cache.get(key)
        if hit is not None and not isinstance(item, Live):
            return hit
        src_font, tgt_font, _small = self._fonts()
        if draft:
            src_font.setItalic(True)
            tgt_font.setItalic(True)
        src_r, tgt_r = self._columns(width)
        src_text, tgt_text = self._texts(item)
        hs = self._height(src_font, src_r.width(), src_text)
        ht = self._height(tgt_font, tgt_r.width(), tgt_text)
        h = hs + ht + 4 if self.layout == "stacked" else max(hs, ht)
        size = QSize(width, h + 2 * PAD)
        if len(self._cache) > 20000:
            self._cache.clear()
        self._cache[key] = size
        return size

    @staticmethod
    def _texts(item) -> tuple[str, str]:
        if isinstance(item, Live):
            return item.committed + item.tentative or "Listening…", item.preview
        return item.source, item.target if item.target is not None else "…"

    # painting ---------------------------------------------------------------------------------
    def paint(self, painter: QPainter, option, index) -> None:
        item = index.data(LINE_ROLE)
        t = self.theme
        painter.save()
        r = option.rect
        if option.state & QStyle.State_Selected:
            painter.fillRect(r, QColor(t.accent).darker(260) if t.name != "light" else QColor("#dce8fb"))
        elif index.row() % 2:
            painter.fillRect(r, QColor(t.alt_base))
        src_font, tgt_font, small = self._fonts()
        src_r, tgt_r = self._columns(r.width())
        src_r.translate(r.topLeft())
        tgt_r.translate(r.topLeft())
        src_r.setHeight(r.height() - 2 * PAD)
        tgt_r.setHeight(r.height() - 2 * PAD)
        painter.setFont(small)
        if isinstance(item, Live):
            painter.setPen(QColor(t.bad))
            painter.drawText(QRect(r.left() + PAD, r.top() + PAD, TIME_W - PAD, 20), Qt.AlignLeft, "● live")
            self._paint_live(painter, item, src_font, tgt_font, src_r, tgt_r)
        else:
            self._paint_line(painter, item, index, r, src_font, tgt_font, src_r, tgt_r)
        painter.restore()

    def _paint_line(self, painter, item: Line, index, r: QRect, src_font, tgt_font, src_r: QRect,
                    tgt_r: QRect) -> None:
        t = self.theme
        text, dim = QColor(t.text), QColor(t.dim_text)
        first_pass = item.pending and getattr(index.model(), "final_mode", False)
        painter.setPen(dim)
        painter.drawText(QRect(r.left() + PAD, r.top() + PAD, TIME_W - PAD, 20), Qt.AlignLeft, clock(item.src_start))
        note = ("✎ edited", QColor(t.accent)) if item.corrected else \
            ("⚠ kept", QColor(t.warn)) if item.failed else \
            ("⋯ draft", dim) if first_pass else None
        if note:
            painter.setPen(note[1])
            painter.drawText(QRect(r.left() + PAD, r.top() + PAD + 18, TIME_W - PAD, 20), Qt.AlignLeft, note[0])
        if first_pass:  # the first pass's text: lighter and slanted until the final replaces it
            src_font, tgt_font = QFont(src_font), QFont(tgt_font)
            src_font.setItalic(True)
            tgt_font.setItalic(True)
            text = dim
        alpha = revision_alpha(item)
        src_pen = dim if self.layout == "stacked" or first_pass else text
        self._draw(painter, src_r, src_font, src_pen, item.source, item.revised_src if alpha else (), alpha)
        if self.layout == "stacked":
            tgt_r.setTop(src_r.top() + self._height(src_font, src_r.width(), item.source) + 4)
        if item.target is None:
            self._draw(painter, tgt_r, tgt_font, dim, "…")
        elif not item.target:
            self._draw(painter, tgt_r, tgt_font, dim, "(in the line above)")
        else:
            self._draw(painter, tgt_r, tgt_font, text, item.target, item.revised if alpha else (), alpha)

    def _draw(self, painter, rect: QRect, font, pen: QColor, s: str, marks=(), alpha: float = 0.0) -> None:
        """Wrapped text; the spans in ``marks`` (words a final revised) on a fading highlight."""
        if not marks:
            painter.setFont(font)
            painter.setPen(pen)
            painter.drawText(rect, Qt.TextWordWrap, s)
            return
        hl = QColor(self.theme.accent)
        hl.setAlphaF(0.55 * alpha)
        rgba = f"rgba({hl.red()},{hl.green()},{hl.blue()},{hl.alphaF():.2f})"
        html, pos = "", 0
        for a, b in marks:
            html += _esc(s[pos:a]) + f'<span style="background-color:{rgba}">{_esc(s[a:b])}</span>'
            pos = b
        html += _esc(s[pos:])
        doc = QTextDocument()
        doc.setDefaultFont(font)
        doc.setDocumentMargin(0)
        doc.setTextWidth(rect.width())
        doc.setDefaultStyleSheet(f"body {{ color: {pen.name()}; }}")
        doc.setHtml(f'<body style="color:{pen.name()}">{html}</body>')
        painter.save()
        painter.translate(rect.topLeft())
        doc.drawContents(painter)
        painter.restore()

    def _paint_live(self, painter, live: Live, src_font, tgt_font, src_r: QRect, tgt_r: QRect) -> None:
        t = self.theme
        doc = QTextDocument()
        doc.setDefaultFont(src_font)
        doc.setDocumentMargin(0)
        doc.setTextWidth(src_r.width())
        if live.committed or live.tentative:
            doc.setHtml(f'<span style="color:{t.text}">{_esc(live.committed)}</span>'
                        f'<span style="color:{t.dim_text}">{_esc(live.tentative)}</span>')
        else:
            doc.setHtml(f'<span style="color:{t.dim_text}"><i>Listening…</i></span>')
        painter.save()
        painter.translate(src_r.topLeft())
        doc.drawContents(painter)
        painter.restore()
        if self.layout == "stacked":
            tgt_r.setTop(src_r.top() + int(doc.size().height()) + 4)
        painter.setFont(tgt_font)
        painter.setPen(QColor(t.dim_text))
        painter.drawText(tgt_r, Qt.TextWordWrap, live.preview)

    # editing ----------------------------------------------------------------------------------
    def createEditor(self, parent, option, index):
        ed = LineEditor(parent, self.layout == "stacked")
        ed.setFont(self.font)
        ed.done.connect(lambda: (self.commitData.emit(ed), self.closeEditor.emit(ed)))
        return ed

    def setEditorData(self, editor: LineEditor, index) -> None:
        src, tgt = index.data(Qt.EditRole)
        editor.source.setText(src)
        editor.target.setText(tgt)

    def setModelData(self, editor: LineEditor, model, index) -> None:
        model.setData(index, (editor.source.text(), editor.target.text()), Qt.EditRole)

    def updateEditorGeometry(self, editor, option, index) -> None:
        r = QRect(option.rect)
        r.setHeight(max(r.height(), editor.sizeHint().height()))
        editor.setGeometry(r)


def revision_alpha(line, now: float | None = None) -> float:
    """How strongly the words a final revised are marked: 1 when it arrives, fading to 0 over
    ``FADE_S``."""
    if getattr(line, "revised_at", None) is None:
        return 0.0
    age = (time.monotonic() if now is None else now) - line.revised_at
    return max(0.0, 1.0 - age / FADE_S) if age >= 0 else 1.0


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class SubtitlesView(QWidget):
    """The list, its column header and a "jump to live" button shown while the user reads back."""

    def __init__(self, model: TranscriptModel, parent=None):
        super().__init__(parent)
        self.model = model
        self.follow = True
        self.list = QListView(self)
        self.list.setObjectName("subtitles")
        self.list.setAccessibleName("Live subtitles")
        self.list.setModel(model)
        self.list.setVerticalScrollMode(QAbstractItemView.ScrollPerPixel)
        self.list.setResizeMode(QListView.Adjust)
        self.list.setUniformItemSizes(False)
        self.list.setSelectionMode(QAbstractItemView.ExtendedSelection)
        self.list.setEditTriggers(QAbstractItemView.DoubleClicked | QAbstractItemView.EditKeyPressed)
        self.list.setMouseTracking(True)
        self.delegate = SubtitleDelegate(self.list)
        self.list.setItemDelegate(self.delegate)

        self.header_src = QLabel("Source")
        self.header_tgt = QLabel("Translation")
        for h in (self.header_src, self.header_tgt):
            h.setObjectName("sectionTitle")
        head = QHBoxLayout()
        head.setContentsMargins(TIME_W + 2, 0, 0, 0)
        head.addWidget(self.header_src, 1)
        head.addWidget(self.header_tgt, 1)
        self.jump = QPushButton("↓ Back to live", self.list)
        self.jump.setToolTip("Resume auto-scrolling (End)")
        self.jump.hide()
        self.jump.clicked.connect(self.scroll_to_live)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(4)
        lay.addLayout(head)
        lay.addWidget(self.list, 1)

        sb = self.list.verticalScrollBar()
        sb.rangeChanged.connect(self._on_range)
        sb.valueChanged.connect(self._on_scroll)
        self.list.installEventFilter(self)

    def configure(self, layout: str, font_size: int, theme, src_name: str, tgt_name: str) -> None:
        f = QFont(self.font())
        f.setPointSize(font_size)
        self.delegate.configure(layout, f, theme)
        self.header_tgt.setVisible(layout == "side")
        self.header_src.setText(f"{src_name} → {tgt_name}" if layout == "stacked" else src_name)
        self.header_tgt.setText(tgt_name)
        self.list.doItemsLayout()
        if self.follow:
            self.scroll_to_live()

    def _on_range(self, _lo: int, hi: int) -> None:
        if self.follow:
            self.list.verticalScrollBar().setValue(hi)

    def _on_scroll(self, value: int) -> None:
        sb = self.list.verticalScrollBar()
        self.follow = value >= sb.maximum() - 4
        self.jump.setVisible(not self.follow)
        if not self.follow:
            self._place_jump()

    def _place_jump(self) -> None:
        self.jump.adjustSize()
        vp = self.list.viewport().geometry()
        self.jump.move(vp.right() - self.jump.width() - 16, vp.bottom() - self.jump.height() - 12)

    def scroll_to_live(self) -> None:
        self.follow = True
        self.jump.hide()
        self.list.scrollToBottom()
        sb = self.list.verticalScrollBar()
        sb.setValue(sb.maximum())

    def eventFilter(self, obj, ev):
        if obj is self.list and ev.type() == QEvent.KeyPress and ev.key() == Qt.Key_End:
            self.scroll_to_live()
            return True
        if obj is self.list and ev.type() == QEvent.Resize and self.jump.isVisible():
            self._place_jump()
        return super().eventFilter(obj, ev)

    def selected_lines(self) -> list[Line]:
        rows = sorted(i.row() for i in self.list.selectionModel().selectedIndexes())
        lines = [self.model.index(r).data(LINE_ROLE) for r in rows if not self.model.index(r).data(IS_LIVE_ROLE)]
        return [ln for ln in lines if isinstance(ln, Line)]
