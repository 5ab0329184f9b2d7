"""What leaves the pipeline for people: every published event's text passed through the session's
text filters (the profanity setting, app/core/profanity.py, chosen in app/session/build.py).

The pipeline knows no policy: ``ShownText`` holds two plain callables, one for text in the
recogniser's output language (``source``: words, segments, a translation's source) and one for the
translation (``target``: translations, finals, the dub's text). The event bus applies it to each
event as it is published (``EventBus(transform=…)``), so every observer — the screen, the printer,
the session record behind the summary and the exports, the cloud server's wire — sees the same
filtered text, while the stages keep the models' own text for their work (the forced target
prefix, the second pass's prompt). The dub speaks filtered text too: the TTS stage passes each
translation's target through ``target`` before it synthesises it.

A callable may offer ``words(texts) -> list[str]`` to filter a run of recognised words at once
(an entry split over two words is then still found); without it each word is filtered alone.
Filters must be pure and idempotent (text filtered twice is filtered once): the cloud client may
pass events from a server that filtered them already through its own."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from app.pipeline.messages import (CommittedWords, DubChunk, FinalSentence, Segment, TentativeText,
                                   Translation)
from app.pipeline.protocols import Word

log = logging.getLogger("relay.pipeline")
TextFn = Callable[[str], str]


@dataclasses.dataclass(frozen=True)
class ShownText:
    source: TextFn | None = None
    target: TextFn | None = None

    def __bool__(self) -> bool:
        return self.source is not None or self.target is not None

    def target_text(self, text: str) -> str:
        return self.target(text) if self.target is not None and text else text

    def source_text(self, text: str) -> str:
        return self.source(text) if self.source is not None and text else text

    def words(self, words: tuple[Word, ...]) -> tuple[Word, ...]:
        f = self.source
        if f is None or not words:
            return words
        texts = [w.text for w in words]
        many = getattr(f, "words", None)
        new = many(texts) if many is not None else [_one_word(f, t) for t in texts]
        if new == texts:
            return words
        return tuple(w if t == w.text else Word(t, w.start, w.end, w.probability)
                     for w, t in zip(words, new, strict=True))

    def __call__(self, ev):
        """The event as people see it (the same object when nothing in it changes)."""
        if not self:
            return ev
        if isinstance(ev, Translation):
            seg = self(ev.segment) if ev.segment is not None else None
            return _replace(ev, source=self.source_text(ev.source), target=self.target_text(ev.target),
                            segment=seg)
        if isinstance(ev, FinalSentence):
            return _replace(ev, words=self.words(ev.words), source=self.source_text(ev.source),
                            target=self.target_text(ev.target), first_source=self.source_text(ev.first_source),
                            first_target=self.target_text(ev.first_target))
        if isinstance(ev, (Segment, CommittedWords)):
            return _replace(ev, words=self.words(ev.words))
        if isinstance(ev, TentativeText):
            return _replace(ev, words=self.words(ev.words), committed_tail=self.source_text(ev.committed_tail))
        if isinstance(ev, DubChunk):
            return _replace(ev, text=self.target_text(ev.text))
        return ev


def _replace(ev, **changes):
    """``dataclasses.replace`` only where a field changed (most events carry nothing to filter)."""
    changed = {k: v for k, v in changes.items() if getattr(ev, k) is not v and getattr(ev, k) != v}
    return dataclasses.replace(ev, **changed) if changed else ev


def _one_word(f: TextFn, text: str) -> str:
    """A recognised word (Whisper writes a leading space before each word of a spaced language)
    through a text filter: its space stays, unless nothing but punctuation is left of it."""
    core = text.lstrip()
    new = f(core)
    if new == core:
        return text
    if not new.strip():
        return ""
    return new.strip() if not new[0].isalnum() else text[: len(text) - len(core)] + new
