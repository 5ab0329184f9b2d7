"""The session transcript as a Qt list model: one row per sentence (source, target, timings, user
corrections) and, while a session runs, one last "live" row holding the committed tail and the
tentative words, replaced in place as recognition stabilises.

A sentence row starts as the first pass's pieces (``Segment`` + ``Translation``), gathered until a
piece ends its sentence, shown lighter; the second pass's ``FinalSentence`` replaces, in place, the
pieces it covers, with the words it changed briefly marked. When the session makes finals, only
they are kept, exported and correctable."""

from __future__ import annotations

import time

from PySide6.QtCore import QAbstractListModel, QModelIndex, Qt, QTimer

from app.session.subtitles import to_text
from app.ui.transcript_data import Line, Live, Piece, Transcript, clock, join_text, revised_spans

__all__ = ["IS_LIVE_ROLE", "LINE_ROLE", "Line", "Live", "Piece", "Transcript", "TranscriptModel", "clock"]

LINE_ROLE = Qt.UserRole + 1
IS_LIVE_ROLE = Qt.UserRole + 2


FADE_S = 1.5  # how long the words a final revised stay marked


class TranscriptModel(QAbstractListModel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.data_ = Transcript()
        self.live = Live()
        self.live_active = False
        self._piece_line: dict[int, Line] = {}  # pending piece seq -> its row
        self._covered: set[int] = set()  # seqs a final replaced (late first-pass events are ignored)
        self._finals: dict[int, Line] = {}
        self._fading: list[Line] = []  # finals whose revised words are still marked
        self.src_lang = ""
        self.fade = QTimer(self)
        self.fade.setInterval(100)
        self.fade.timeout.connect(self._fade_tick)

    @property
    def final_mode(self) -> bool:
        return self.data_.final_mode

    @final_mode.setter
    def final_mode(self, on: bool) -> None:
        self.data_.final_mode = bool(on)

    # -- Qt model interface -------------------------------------------------------------------
    def rowCount(self, parent=QModelIndex()) -> int:
        if parent.isValid():
            return 0
        return len(self.data_.lines) + (1 if self.live_active else 0)

    def _is_live(self, row: int) -> bool:
        return self.live_active and row == len(self.data_.lines)

    def _row(self, line: Line) -> int:
        lines = self.data_.lines
        for i in range(len(lines) - 1, -1, -1):
            if lines[i] is line:
                return i
        return -1

    def _editable(self, ln: Line) -> bool:
        return not (ln.pending and self.final_mode)

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
            if ln.pending and self.final_mode:
                tip += "\nFirst pass: this sentence is being recognised and translated again"
            elif ln.failed:
                tip += "\nNot revised: the second pass could not run, the first pass's text is kept"
            if ln.corrected:
                tip += "\nCorrected by you"
                if ln.machine_target is not None:
                    tip += f" (machine translation: {ln.machine_target or '—'})"
            elif self._editable(ln):
                tip += "\nDouble-click or press F2 to correct"
            return tip
        if role == Qt.AccessibleTextRole:
            state = " (first pass)" if ln.pending and self.final_mode else ""
            return f"{clock(ln.src_start)}{state}: {ln.source}. {ln.target or ''}"
        return None

    def flags(self, index):
        base = super().flags(index)
        if index.isValid() and not self._is_live(index.row()) and self._editable(self.data_.lines[index.row()]):
            return base | Qt.ItemIsEditable
        return base

    def setData(self, index, value, role=Qt.EditRole) -> bool:
        if role != Qt.EditRole or not index.isValid() or self._is_live(index.row()):
            return False
        ln = self.data_.lines[index.row()]
        if not self._editable(ln):  # corrections apply to finals
            return False
        source, target = (str(v).strip() for v in value)
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

    def _changed(self, line: Line) -> None:
        r = self._row(line)
        if r >= 0:
            i = self.index(r)
            self.dataChanged.emit(i, i)

    def _insert(self, row: int, line: Line) -> None:
        self.beginInsertRows(QModelIndex(), row, row)
        self.data_.lines.insert(row, line)
        self.endInsertRows()

    def _remove(self, line: Line) -> None:
        r = self._row(line)
        if r >= 0:
            self.beginRemoveRows(QModelIndex(), r, r)
            del self.data_.lines[r]
            self.endRemoveRows()

    def add_segment(self, seq: int, text: str, src_start: float, src_end: float, at: float,
                    sentence_end: bool = True, lang: str = "") -> None:
        """A first-pass piece: it joins the open sentence's (lighter) row, or opens one."""
        if seq in self._piece_line or seq in self._covered:
            return
        piece = Piece(seq, text, src_start, src_end, sentence_end=sentence_end, committed_at=at)
        last = self.data_.lines[-1] if self.data_.lines else None
        if last is not None and last.pending and last.pieces and not last.pieces[-1].sentence_end \
                and not last.corrected:
            last.pieces.append(piece)
            last.refresh_from_pieces()
            self._changed(last)
            line = last
        else:
            line = Line(seq, src_start, src_end, text, committed_at=at, machine_source=text, pieces=[piece])
            line.refresh_from_pieces()
            self._insert(len(self.data_.lines), line)
        self._piece_line[seq] = line
        # the segment's words leave the live row's committed tail
        tail = self.live.committed.lstrip()
        if tail.startswith(text.strip()):
            self.live.committed = tail[len(text.strip()):]
        else:
            self.live.committed = ""
        self._live_changed()

    def set_translation(self, seq: int, target: str, at: float) -> None:
        line = self._piece_line.get(seq)
        if line is None:  # unknown, or already replaced by its final
            return
        for p in line.pieces:
            if p.seq == seq:
                p.target, p.shown_at = target, at
        if line.corrected:  # the user's text wins; remember the machine's for the tooltip
            line.machine_target = join_text(p.target for p in line.pieces if p.target is not None)
            line.shown_at = at
            line.touch()
        else:
            line.refresh_from_pieces()
        self._changed(line)
        if self.live.preview:
            self.live.preview = ""
            self._live_changed()

    def add_final(self, final_id: int, source: str, target: str, src_start: float, src_end: float,
                  covers=(), words=(), failed: bool = False, first_target: str | None = None,
                  at: float = 0.0) -> Line | None:
        """The second pass's sentence: it replaces, in place, the first-pass pieces it covers."""
        if final_id in self._finals:
            return None
        self.final_mode = True
        covers = tuple(covers)
        rows = []
        for seq in covers:
            ln = self._piece_line.pop(seq, None)
            if ln is not None and all(ln is not r for r in rows):
                rows.append(ln)
        self._covered.update(covers)
        shown_first = join_text(p.target for r in rows for p in r.pieces if p.seq in covers and p.target)
        if first_target is None:
            first_target = shown_first
        fin = Line(covers[0] if covers else -1, src_start, src_end, source, target, committed_at=at,
                   shown_at=at, machine_source=source, machine_target=target, final_id=final_id,
                   failed=failed, covers=covers, words=[list(w) for w in words], first_target=first_target)
        corrected = [r for r in rows if r.corrected]
        if corrected:  # the user corrected the first pass before the final came: their text wins
            fin.corrected = True
            fin.source = join_text(r.source for r in corrected)
            fin.target = join_text(r.target for r in corrected)
        elif not failed and (shown_first or first_target):
            fin.revised = revised_spans(shown_first or first_target, target)
            fin.revised_src = revised_spans(join_text(p.source for r in rows for p in r.pieces
                                                      if p.seq in covers), source)
            if fin.revised or fin.revised_src:
                fin.revised_at = time.monotonic()
        self._finals[final_id] = fin
        # in place: the first row that held covered pieces becomes the final when it held only those
        place = None
        for r in rows:
            r.pieces = [p for p in r.pieces if p.seq not in self._covered]
            if not r.pieces and place is None:
                place = r
        if place is not None:
            row = self._row(place)
            self.data_.lines[row] = fin
            self._changed(fin)
        else:
            row = self._final_slot(rows)
            self._insert(row, fin)
        for r in rows:
            if r is place:
                continue
            if r.pieces:
                r.refresh_from_pieces()
                self._changed(r)
            else:
                self._remove(r)
        if fin.revised_at is not None:
            self._fading.append(fin)
            if not self.fade.isActive():
                self.fade.start()
        return fin

    def _final_slot(self, rows: list[Line]) -> int:
        """Where a final that replaces no whole row goes: before the first row it took pieces
        from, else after the last final."""
        idx = [self._row(r) for r in rows]
        idx = [i for i in idx if i >= 0]
        if idx:
            return min(idx)
        lines = self.data_.lines
        for i in range(len(lines) - 1, -1, -1):
            if not lines[i].pending:
                return i + 1
        return 0

    def fading(self, now: float | None = None) -> list[Line]:
        now = time.monotonic() if now is None else now
        return [ln for ln in self._fading if ln.revised_at is not None and now - ln.revised_at < FADE_S]

    def _fade_tick(self) -> None:
        now = time.monotonic()
        for ln in self._fading:
            if now - ln.revised_at >= FADE_S + 0.2:
                ln.revised_at = None  # the mark is gone: paint once more without it
            ln.touch()
            self._changed(ln)
        self._fading = [ln for ln in self._fading if ln.revised_at is not None]
        if not self._fading:
            self.fade.stop()

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
        """Add what the session record holds that the view has not seen (finals, or first-pass
        pieces for a session without a second pass); returns how many were added."""
        added = 0
        for s in segments:
            if "covers" in s or "id" in s and "seq" not in s:
                if s["id"] not in self._finals:
                    self.add_final(s["id"], s.get("source") or "", s.get("target") or "", s["src_start"],
                                   s["src_end"], s.get("covers") or (), s.get("words") or (),
                                   bool(s.get("failed")), at=s.get("final_at") or 0.0)
                    added += 1
                continue
            if s["seq"] in self._covered:
                continue
            if s["seq"] not in self._piece_line:
                self.add_segment(s["seq"], s["source"], s["src_start"], s["src_end"],
                                 s.get("committed_at") or 0.0, s.get("sentence_end", True))
                added += 1
            if s.get("target") is not None:
                ln = self._piece_line[s["seq"]]
                p = next(p for p in ln.pieces if p.seq == s["seq"])
                if p.target is None:
                    self.set_translation(s["seq"], s["target"], s.get("emitted_at") or 0.0)
        return added

    def clear(self) -> None:
        self.beginResetModel()
        self.data_ = Transcript()
        self._piece_line.clear()
        self._covered.clear()
        self._finals.clear()
        self._fading.clear()
        self.live = Live()
        self.fade.stop()
        self.endResetModel()

    # -- what the overlay shows ----------------------------------------------------------------
    def running_target(self, max_chars: int = 600) -> tuple[str, str, str]:
        """The newest running target text: (finals, pending first pass, preview), at most about
        ``max_chars`` characters in all, oldest cut first."""
        fin, pend = [], []
        n = 0
        for ln in reversed(self.data_.lines):
            if n > max_chars:
                break
            text = (ln.target or "").removesuffix(" …").strip()
            if not text:
                continue
            (pend if ln.pending and self.final_mode else fin).append(text)
            n += len(text) + 1
        # rows are in order: pending ones come after finals; keep each group's order
        return join_text(reversed(fin)), join_text(reversed(pend)), self.live.preview.strip()

    def current_source(self) -> str:
        for ln in reversed(self.data_.lines):
            if ln.source:
                return ln.source
        return ""

    # -- export ----------------------------------------------------------------------------
    def segments(self) -> list[dict]:
        """What the exports hold: the finals (the first pass's pieces when the session makes none)."""
        return self.data_.segments()

    def plain_text(self) -> str:
        return to_text(self.segments())
