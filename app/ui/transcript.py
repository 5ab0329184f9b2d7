"""The session transcript as a Qt list model: one row per committed segment (source, target,
timings, user corrections) and, while a session runs, one last "live" row holding the committed
tail and the tentative words, replaced in place as recognition stabilises."""

from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtCore import QAbstractListModel, QModelIndex, Qt

LINE_ROLE = Qt.UserRole + 1
IS_LIVE_ROLE = Qt.UserRole + 2


def clock(t: float) -> str:
    m, s = divmod(max(0.0, t), 60)
    return f"{int(m):02d}:{s:04.1f}"


@dataclass
class Line:
    seq: int
    src_start: float
    src_end: float
    source: str
    target: str | None = None  # None while the translation is pending
    committed_at: float = 0.0
    shown_at: float | None = None  # wall time the translation arrived
    corrected: bool = False
    machine_source: str = ""
    machine_target: str | None = None
    version: int = 0  # bumped on every change (the view caches row heights by it)

    def touch(self) -> None:
        self.version += 1


@dataclass
class Live:
    committed: str = ""  # committed words not yet in a segment
    tentative: str = ""  # the unstable tail
    preview: str = ""  # translation preview of the tail
    version: int = 0

    @property
    def empty(self) -> bool:
        return not (self.committed or self.tentative or self.preview)


@dataclass
class Transcript:
    """Plain data held by the model; exported as the session record's segment dicts."""

    lines: list[Line] = field(default_factory=list)

    def segments(self) -> list[dict]:
        return [{"seq": ln.seq, "src_start": ln.src_start, "src_end": ln.src_end, "source": ln.source,
                 "target": ln.target, "corrected": ln.corrected} for ln in self.lines]


class TranscriptModel(QAbstractListModel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.data_ = Transcript()
        self.live = Live()
        self.live_active = False
        self._row_of: dict[int, int] = {}
        self.src_lang = ""

    # -- Qt model interface -------------------------------------------------------------------
    def rowCount(self, parent=QModelIndex()) -> int:
        if parent.isValid():
            return 0
        return len(self.data_.lines) + (1 if self.live_active else 0)

    def _is_live(self, row: int) -> bool:
        return self.live_active and row == len(self.data_.lines)

    def data(self, index, role=Qt.DisplayRole):
        if not index.isValid():
            return None
        row = index.row()
        if self._is_live(row):
            if role == IS_LIVE_ROLE:
                return True
            if role == LINE_ROLE:
                return self.live
            if role == Qt.DisplayRole:
                return f"{self.live.committed}{self.live.tentative}\t{self.live.preview}"
            if role == Qt.ToolTipRole:
                return "Live: darker text is final, lighter text may still change"
            return None
        ln = self.data_.lines[row]
        if role == IS_LIVE_ROLE:
            return False
        if role == LINE_ROLE:
            return ln
        if role == Qt.DisplayRole:
            return f"{ln.source}\t{ln.target or ''}"
        if role == Qt.EditRole:
            return (ln.source, ln.target or "")
        if role == Qt.ToolTipRole:
            tip = f"Source time {clock(ln.src_start)} → {clock(ln.src_end)}"
            if ln.shown_at is not None:
                tip += f"\nTranslated at session time {clock(ln.shown_at)}"
            if ln.corrected:
                tip += "\nCorrected by you"
                if ln.machine_target is not None:
                    tip += f" (machine translation: {ln.machine_target or '—'})"
            else:
                tip += "\nDouble-click or press F2 to correct"
            return tip
        if role == Qt.AccessibleTextRole:
            return f"{clock(ln.src_start)}: {ln.source}. {ln.target or ''}"
        return None

    def flags(self, index):
        base = super().flags(index)
        if index.isValid() and not self._is_live(index.row()):
            return base | Qt.ItemIsEditable
        return base

    def setData(self, index, value, role=Qt.EditRole) -> bool:
        if role != Qt.EditRole or not index.isValid() or self._is_live(index.row()):
            return False
        source, target = (str(v).strip() for v in value)
        ln = self.data_.lines[index.row()]
        if source == ln.source and target == (ln.target or ""):
            return False
        if not ln.corrected:
            ln.machine_source, ln.machine_target = ln.source, ln.target
        ln.source, ln.target, ln.corrected = source, target, True
        ln.touch()
        self.dataChanged.emit(index, index)
        return True

    # -- updates from the pipeline (GUI thread) ------------------------------------------------
    def set_live_active(self, on: bool) -> None:
        if on == self.live_active:
            return
        n = len(self.data_.lines)
        if on:
            self.beginInsertRows(QModelIndex(), n, n)
            self.live = Live()
            self.live_active = True
            self.endInsertRows()
        else:
            self.beginRemoveRows(QModelIndex(), n, n)
            self.live_active = False
            self.endRemoveRows()

    def _live_changed(self) -> None:
        self.live.version += 1
        if self.live_active:
            i = self.index(len(self.data_.lines))
            self.dataChanged.emit(i, i)

    def add_segment(self, seq: int, text: str, src_start: float, src_end: float, at: float) -> None:
        if seq in self._row_of:
            return
        n = len(self.data_.lines)
        self.beginInsertRows(QModelIndex(), n, n)
        self.data_.lines.append(Line(seq, src_start, src_end, text, committed_at=at, machine_source=text))
        self._row_of[seq] = n
        self.endInsertRows()
        # the segment's words leave the live row's committed tail
        tail = self.live.committed.lstrip()
        if tail.startswith(text.strip()):
            self.live.committed = tail[len(text.strip()):]
        else:
            self.live.committed = ""
        self._live_changed()

    def set_translation(self, seq: int, target: str, at: float) -> None:
        row = self._row_of.get(seq)
        if row is None:
            return
        ln = self.data_.lines[row]
        if ln.corrected:  # the user's text wins; remember the machine's for the tooltip
            ln.machine_target = target
        else:
            ln.target = target
            ln.machine_target = target
        ln.shown_at = at
        ln.touch()
        i = self.index(row)
        self.dataChanged.emit(i, i)
        if self.live.preview:
            self.live.preview = ""
            self._live_changed()

    def set_tentative(self, committed_tail: str, tentative: str) -> None:
        if (committed_tail, tentative) == (self.live.committed, self.live.tentative):
            return
        self.live.committed, self.live.tentative = committed_tail, tentative
        self._live_changed()

    def set_preview(self, text: str) -> None:
        if text != self.live.preview:
            self.live.preview = text
            self._live_changed()

    def reconcile(self, segments: list[dict]) -> int:
        """Add any committed segment of the session record the view has not seen; returns how many."""
        added = 0
        for s in segments:
            if s["seq"] not in self._row_of:
                self.add_segment(s["seq"], s["source"], s["src_start"], s["src_end"], s.get("committed_at") or 0.0)
                added += 1
            if s.get("target") is not None:
                ln = self.data_.lines[self._row_of[s["seq"]]]
                if ln.target is None and not ln.corrected:
                    self.set_translation(s["seq"], s["target"], s.get("emitted_at") or 0.0)
        return added

    def clear(self) -> None:
        self.beginResetModel()
        self.data_ = Transcript()
        self._row_of.clear()
        self.live = Live()
        self.endResetModel()

    # -- export ----------------------------------------------------------------------------
    def segments(self) -> list[dict]:
        return self.data_.segments()

    def plain_text(self) -> str:
        rows = []
        for ln in self.data_.lines:
            mark = "  [corrected]" if ln.corrected else ""
            rows.append(f"[{clock(ln.src_start)} → {clock(ln.src_end)}]{mark}\n{ln.source}\n{ln.target or ''}\n")
        return "\n".join(rows)
