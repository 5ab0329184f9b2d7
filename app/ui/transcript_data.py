"""The transcript's plain data: sentence rows (``Line``), the first-pass pieces a pending row
holds (``Piece``), the live row, and the text helpers (joining pieces, the revision diff)."""

from __future__ import annotations

import difflib
import re
import unicodedata
from dataclasses import dataclass, field


def clock(t: float) -> str:
    m, s = divmod(max(0.0, t), 60)
    return f"{int(m):02d}:{s:04.1f}"


@dataclass
class Piece:
    """A first-pass piece (a ``Segment`` and its committed translation) not yet replaced by a final."""

    seq: int
    source: str
    src_start: float
    src_end: float
    target: str | None = None
    sentence_end: bool = True
    committed_at: float = 0.0
    shown_at: float | None = None


@dataclass
class Line:
    """One row: a sentence. Pending (``final_id`` None): the first-pass pieces it holds, lighter;
    final: the second pass's text, which replaced those pieces in place."""

    seq: int  # the first piece it holds or held (-1: none)
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
    pieces: list = field(default_factory=list)  # pending: Piece objects, in order
    final_id: int | None = None
    failed: bool = False  # the second pass could not run: the first pass's text, kept
    covers: tuple = ()
    words: list = field(default_factory=list)  # [text, start, end] of the source words
    first_target: str = ""  # what the first pass had shown
    revised: list = field(default_factory=list)  # (start, end) character spans of target the final changed
    revised_src: list = field(default_factory=list)
    revised_at: float | None = None  # monotonic time the final replaced the first pass

    def touch(self) -> None:
        self.version += 1

    @property
    def pending(self) -> bool:
        return self.final_id is None

    def refresh_from_pieces(self, lang: str = "") -> None:
        ps = self.pieces
        if not ps:
            return
        self.seq = ps[0].seq
        self.src_start, self.src_end = ps[0].src_start, ps[-1].src_end
        self.committed_at = ps[0].committed_at
        if not self.corrected:
            self.source = join_text([p.source for p in ps])
            done = [p.target for p in ps if p.target is not None]
            self.target = join_text(done) + (" …" if len(done) < len(ps) and done else "") if done else None
            self.machine_source, self.machine_target = self.source, self.target
        shown = [p.shown_at for p in ps if p.shown_at is not None]
        self.shown_at = max(shown) if shown else None
        self.touch()


@dataclass
class Live:
    committed: str = ""  # committed words not yet in a segment
    tentative: str = ""  # the unstable tail
    preview: str = ""  # translation preview of the tail
    version: int = 0

    @property
    def empty(self) -> bool:
        return not (self.committed or self.tentative or self.preview)


def _cjk(ch: str) -> bool:
    return unicodedata.east_asian_width(ch) in "WF"


def join_text(parts) -> str:
    """Pieces of text joined as they read: CJK next to CJK with no space, else one space."""
    out = ""
    for p in parts:
        p = (p or "").strip()
        if not p:
            continue
        if out and not (_cjk(out[-1]) and _cjk(p[0])):
            out += " "
        out += p
    return out


def revised_spans(before: str, after: str) -> list[tuple[int, int]]:
    """Character spans of ``after`` that differ from ``before``: a word diff (a character diff
    for text written without spaces)."""
    if not before or not after:
        return []
    spaced = " " in after.strip()
    if spaced:
        toks = [(m.start(), m.end()) for m in re.finditer(r"\S+", after)]
        a = [w.strip(".,;:!?\"'").lower() for w in before.split()]
        b = [after[i:j].strip(".,;:!?\"'").lower() for i, j in toks]
    else:
        toks = [(i, i + 1) for i in range(len(after))]
        a, b = list(before.replace(" ", "")), list(after)
    spans = []
    for op, _i1, _i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op in ("replace", "insert") and j2 > j1:
            spans.append((toks[j1][0], toks[j2 - 1][1]))
    return spans


@dataclass
class Transcript:
    """Plain data held by the model; exported as the session record's segment dicts."""

    lines: list[Line] = field(default_factory=list)
    final_mode: bool = False  # the session makes finals: only they are kept and exported

    def kept(self) -> list[Line]:
        if self.final_mode:
            return [ln for ln in self.lines if not ln.pending]
        return list(self.lines)

    def segments(self) -> list[dict]:
        out = []
        for ln in self.kept():
            d = {"seq": ln.seq, "src_start": ln.src_start, "src_end": ln.src_end, "source": ln.source,
                 "target": ln.target, "corrected": ln.corrected}
            if not ln.pending:
                d.update(id=ln.final_id, failed=ln.failed, covers=list(ln.covers), words=ln.words)
            out.append(d)
        return out
