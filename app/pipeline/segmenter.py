"""Dynamic segmentation of committed words into translatable pieces."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.text import CLAUSE_END, SENTENCE_END, units, unspaced
from app.pipeline.messages import Segment, join_words
from app.pipeline.protocols import Word


@dataclass
class SegmenterConfig:
    lang: str = "zh"
    min_clause_units: int = 6  # a clause boundary needs at least this many units (CJK chars or words)
    max_units: int = 28  # cut here even without punctuation
    max_duration_s: float = 6.0
    completeness_threshold: float = 0.7
    eager_units: int = 5  # at a stable point (end of a commit) this many units make a segment


ZH_NUMERALS = set("零〇一二两三四五六七八九十百千万亿")


def dangling_number(words: list[Word]) -> bool:
    """The pending text ends in a number that may go on: digits ("23" of "2300万"), or a word
    of Chinese numerals ("六十五" of "六十五万元": cut there, it was translated "$65", then
    "million.")."""
    last = words[-1].text.strip() if words else ""
    return bool(last) and (last[-1].isdigit() or all(c in ZH_NUMERALS for c in last))


class Segmenter:
    """Boundary on sentence punctuation, on a VAD pause, on a completeness score (a clause mark
    after a long-enough clause), or at a maximum length/duration."""

    def __init__(self, config: SegmenterConfig, clock_now, word_boundaries=None):
        self.cfg = config
        self._now = clock_now
        # for unspaced scripts: text -> character offsets where words end
        self._boundaries = word_boundaries
        self._pending: list[Word] = []
        self._seq = 0
        self.durations: list[float] = []

    def completeness(self, words: list[Word], stable_point: bool = False) -> float:
        """How ready the pending words are to be translated on their own, 0..1: a sentence mark
        is complete; a clause mark more so the longer the clause; the end of a commit (the
        recogniser has stopped revising there) counts by length; a dangling number never does."""
        if not words:
            return 0.0
        last = words[-1].text.strip()
        n = units(join_words(words, self.cfg.lang), self.cfg.lang)
        if last and last[-1] in SENTENCE_END:
            return 1.0
        if dangling_number(words):
            return 0.0
        if last and last[-1] in CLAUSE_END:
            return min(1.0, 0.5 + 0.5 * n / max(1, self.cfg.min_clause_units))
        if stable_point:
            return 0.7 * min(1.0, n / max(1, self.cfg.eager_units))
        return 0.0

    def _emit(self, reason: str, sentence_end: bool) -> Segment:
        seg = Segment(self._seq, tuple(self._pending), reason, sentence_end, self._now(), self.cfg.lang)
        self._seq += 1
        self.durations.append(seg.src_end - seg.src_start)
        self._pending = []
        return seg

    def _hold_back(self, lookahead: str) -> list[Word]:
        """Words at the end of the pending text that belong to a word continuing into the
        not-yet-committed text; they wait for the next piece."""
        if not unspaced(self.cfg.lang) or len(self._pending) < 2:
            return []
        texts = [w.text for w in self._pending]
        committed = "".join(texts)
        if self._boundaries is not None:
            ends = set(self._boundaries(committed + lookahead))
            hold = 0
            pos = len(committed)
            while hold < len(texts) - 1 and pos not in ends:
                hold += 1
                pos -= len(texts[-hold])
            return self._pending[len(self._pending) - hold:] if hold else []
        return self._pending[-1:]  # no segmenter: most words are two characters

    def feed(self, words: list[Word], pause_after: bool = False, lookahead: str = "") -> list[Segment]:
        out: list[Segment] = []
        for w in words:
            self._pending.append(w)
            t = w.text.strip()
            if t and t[-1] in SENTENCE_END:
                out.append(self._emit("punctuation", True))
                continue
            if self.completeness(self._pending) >= self.cfg.completeness_threshold and t and t[-1] in CLAUSE_END:
                out.append(self._emit("completeness", False))
                continue
            n = units(join_words(self._pending, self.cfg.lang), self.cfg.lang)
            dur = self._pending[-1].end - self._pending[0].start
            if (n >= self.cfg.max_units or dur >= self.cfg.max_duration_s) and not dangling_number(self._pending):
                out.append(self._emit("max_length", False))
        if (self._pending and not pause_after and self.cfg.eager_units
                and self.completeness(self._pending, stable_point=True) >= self.cfg.completeness_threshold):
            # CJK text has no word spaces and a commit may end inside a word: hold the last
            # character back so it joins the next piece (most words are two characters)
            hold = self._hold_back(lookahead)
            if hold:
                self._pending = self._pending[: len(self._pending) - len(hold)]
            if (units(join_words(self._pending, self.cfg.lang), self.cfg.lang) >= max(1, self.cfg.eager_units - 1)
                    and not dangling_number(self._pending)):  # what is held back may end a number
                out.append(self._emit("completeness", False))
                self._pending = hold
            else:
                self._pending += hold
        if pause_after and self._pending:
            out.append(self._emit("pause", True))
        elif pause_after and out:
            # the pause closes the sentence even when the last segment ended on a clause mark
            last = out[-1]
            out[-1] = Segment(last.seq, last.words, last.reason, True, last.emitted_at, last.lang)
        return out

    def flush(self) -> list[Segment]:
        return [self._emit("flush", True)] if self._pending else []

    @property
    def pending_text(self) -> str:
        return join_words(self._pending, self.cfg.lang)

    @property
    def mean_duration(self) -> float:
        return sum(self.durations) / len(self.durations) if self.durations else 0.0
