"""What a session produced, kept in memory for its summary and exports: the final sentences,
the first pass's pieces, the dub, and the erasure of the display's revisions."""

from __future__ import annotations

import threading

import numpy as np

from app.pipeline.messages import (
    CommittedWords,
    DubChunk,
    FinalSentence,
    Segment,
    Translation,
)


class SessionRecord:
    """Observer that keeps what a session produced, in memory only: the final sentences (the
    second pass, or the serial cascade's utterances) and the first pass's pieces. ``segments``,
    what stays (summary, exports), are the finals when the session makes them, else the pieces."""

    def __init__(self, finals: bool = False):
        self.final_mode = finals
        self.pieces: list[dict] = []
        self.finals: list[dict] = []
        self.revised_chars = 0  # target characters the finals took off the screen
        self.final_chars = 0
        self._by_seq: dict[int, dict] = {}
        self.dub: list[DubChunk] = []
        # the dub's audio, for exporting it afterwards (--dub-out, the window's export): about
        # 0.3 GB per hour of speech, so a run that will not export it turns this off
        self.keep_dub_audio = True
        self.committed_words = 0
        # (start, end) of every word that stayed, for coverage (app.pipeline.coverage): the first
        # pass's committed words, and the finals' words (a final that kept the first pass's text:
        # its span)
        self.first_spans: list[tuple[float, float]] = []
        self.final_spans: list[tuple[float, float]] = []
        self._lock = threading.Lock()

    def __call__(self, ev) -> None:
        with self._lock:
            if isinstance(ev, CommittedWords):
                self.committed_words += len(ev.words)
                self.first_spans += [(w.start, w.end) for w in ev.words if w.text.strip()]
            elif isinstance(ev, Segment):
                d = {"seq": ev.seq, "src_start": round(ev.src_start, 3), "src_end": round(ev.src_end, 3),
                     "source": ev.text, "target": None, "emitted_at": None, "reason": ev.reason,
                     "sentence_end": ev.sentence_end, "committed_at": round(ev.emitted_at, 3)}
                self._by_seq[ev.seq] = d
                self.pieces.append(d)
            elif isinstance(ev, FinalSentence):
                self.finals.append(final_dict(ev))
                if ev.words:
                    self.final_spans += [(w.start, w.end) for w in ev.words if w.text.strip()]
                elif ev.failed and ev.source.strip():
                    self.final_spans.append((ev.src_start, ev.src_end))
                self.final_chars += len(ev.target)
                self.revised_chars += erased_chars(ev.first_target, ev.target)
            elif isinstance(ev, Translation) and not ev.preview:
                d = self._by_seq.get(ev.seq)
                if d is not None:
                    d["target"] = ev.target
                    d["emitted_at"] = round(ev.emitted_at, 3)
            elif isinstance(ev, DubChunk) and not ev.skipped and self.keep_dub_audio:
                self.dub.append(ev)

    @property
    def segments(self) -> list[dict]:
        return self.finals if self.final_mode else self.pieces

    def word_spans(self) -> list[tuple[float, float]]:
        """The spans of the words that stay: the finals' when the session makes them."""
        with self._lock:
            return list(self.final_spans if self.final_mode else self.first_spans)

    def erasure(self) -> float | None:
        """Target characters removed from the screen by revisions per character of final text."""
        if not self.final_mode or not self.final_chars:
            return None
        return round(self.revised_chars / self.final_chars, 3)

    def dub_timeline(self, arrival_start: float, realtime: bool) -> tuple[np.ndarray, int] | None:
        """The dub on the source timeline, silence elsewhere. Real time: a chunk that started
        playing at wall time ``start_at`` lands at source time ``start_at - arrival_start``.
        Fast mode has no such wall mapping: chunks start at their segment's source end, in order."""
        chunks = [c for c in self.dub if len(c.audio)]
        if not chunks:
            return None
        sr = chunks[0].sample_rate
        placed = []
        cursor = 0.0
        for c in chunks:
            t = c.start_at - arrival_start if realtime else max(c.src_end, cursor)
            t = max(t, cursor)
            placed.append((t, c.audio))
            cursor = t + len(c.audio) / sr
        out = np.zeros(int(cursor * sr) + sr // 10, dtype=np.float32)
        for t, audio in placed:
            i = int(round(t * sr))
            out[i : i + len(audio)] += audio[: len(out) - i]
        np.clip(out, -1.0, 1.0, out=out)
        return out, sr


def final_dict(ev: FinalSentence) -> dict:
    """A final sentence as the summary and the exports keep it."""
    shown = ev.first_shown_at if ev.first_shown_at is not None else ev.final_at
    return {"id": ev.id, "src_start": round(ev.src_start, 3), "src_end": round(ev.src_end, 3),
            "source": ev.source, "target": ev.target, "emitted_at": round(min(shown, ev.final_at), 3),
            "final_at": round(ev.final_at, 3), "started_at": round(ev.started_at, 3), "failed": ev.failed, "reason": ev.reason,
            "mt": ev.mt, "covers": list(ev.covers), "words": [[w.text, round(w.start, 3), round(w.end, 3)] for w in ev.words]}


def erased_chars(shown: str, final: str) -> int:
    """Characters of ``shown`` a display replacing it with ``final`` takes away: all after their
    common prefix (the erasure of Arivazhagan et al., 2020, in characters)."""
    n = 0
    for a, b in zip(shown, final):
        if a != b:
            break
        n += 1
    return len(shown) - n
