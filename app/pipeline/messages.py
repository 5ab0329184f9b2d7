"""Typed, timestamped messages that flow between stages and out to observers.

Times: ``src_*`` are seconds on the source audio timeline (sample index / 16 kHz); ``*_at`` are
wall times from the pipeline's monotonic clock (seconds since the session started).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from app.core.text import unspaced
from app.pipeline.protocols import Word


@dataclass(frozen=True)
class TentativeText:
    """The current unstable tail of recognition; replaced by the next one (coalesced)."""

    words: tuple[Word, ...]
    committed_tail: str  # committed words not yet in a segment (they precede the tentative ones)
    emitted_at: float

    @property
    def text(self) -> str:
        return join_words(self.words)


@dataclass(frozen=True)
class CommittedWords:
    """Words that will never change again, with the time each first appeared in a hypothesis."""

    words: tuple[Word, ...]
    first_seen_at: tuple[float, ...]
    emitted_at: float
    pause_after: bool = False  # a VAD pause follows the last word


@dataclass(frozen=True)
class Segment:
    """A translatable piece of committed source text."""

    seq: int
    words: tuple[Word, ...]
    reason: str  # punctuation | pause | completeness | max_length | flush
    sentence_end: bool  # the next segment starts a new sentence
    emitted_at: float
    lang: str = ""

    @property
    def text(self) -> str:
        return join_words(self.words, self.lang)

    @property
    def src_start(self) -> float:
        return self.words[0].start if self.words else 0.0

    @property
    def src_end(self) -> float:
        return self.words[-1].end if self.words else 0.0


@dataclass(frozen=True)
class Translation:
    """Target text for a segment. ``preview`` translations are tentative and replaced later."""

    seq: int
    source: str
    target: str  # the new target text this segment adds (committed) or the preview tail
    src_start: float
    src_end: float
    emitted_at: float
    preview: bool = False
    queued_at: float = 0.0
    started_at: float = 0.0
    segment: Segment | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class FinalSentence:
    """The second pass over one whole sentence (or clause of a long one): its audio recognised
    again whole and translated whole. It replaces, on screen, in exports and in the dub, the
    first-pass pieces it ``covers`` (their ``seq``). ``failed``: the second pass could not run
    (its audio was gone, or the model call failed) and ``source``/``target`` are the first
    pass's text, kept as it was."""

    id: int  # 0, 1, 2 ... in source order
    words: tuple[Word, ...]
    source: str
    target: str
    src_start: float  # the audio span that was recognised again
    src_end: float
    final_at: float  # wall time it was published
    first_shown_at: float | None  # the first first-pass translation of this span shown (None: none was)
    covers: tuple[int, ...] = ()  # the first-pass segment seqs it replaces
    first_source: str = ""  # what the first pass had shown for this span
    first_target: str = ""
    reason: str = "pause"  # pause | mark (a first-pass sentence/clause end) | length | flush
    failed: bool = False
    started_at: float = 0.0  # the second pass began (its queue wait ends)
    mt: str = ""  # the translator that made ``target`` (its pack, e.g. "qwen-1.5b"; "": the first pass's text)


@dataclass(frozen=True)
class DubChunk:
    """Synthesised speech for (part of) a committed translation."""

    seq: int
    audio: np.ndarray = field(repr=False)
    sample_rate: int
    text: str
    ready_at: float  # wall time the chunk existed
    start_at: float  # wall time it starts playing on the dub timeline
    first_of_segment: bool
    src_end: float
    speed: float = 1.0
    skipped: bool = False


@dataclass(frozen=True)
class DubPlayed:
    """A dub chunk's first sample left the output device (``played_at``, pipeline clock)."""

    seq: int
    first_of_segment: bool
    src_end: float
    scheduled_at: float  # the chunk's start on the TTS stage's timeline
    played_at: float


@dataclass(frozen=True)
class Metric:
    name: str
    value: float
    at: float
    labels: tuple[tuple[str, str], ...] = ()


class Control(Enum):
    STOP = "stop"
    FLUSH = "flush"
    SLOW_DOWN = "slow_down"
    RESUME_NORMAL = "resume_normal"
    THIN = "thin"  # the second pass is behind, or the policy degrades: the first pass takes longer steps
    UNTHIN = "unthin"


@dataclass(frozen=True)
class ControlMessage:
    kind: Control
    reason: str = ""
    by: str = ""  # who asks (THIN/UNTHIN: the second pass, the degradation policy), when it matters


def join_words(words, lang: str = "") -> str:
    """Join recognised words as the recogniser wrote them: Whisper marks word starts in
    space-delimited languages with a leading space and writes CJK text without spaces. Given a
    space-delimited ``lang``, a word that starts with a letter right after a sentence or clause
    mark gets its space even if the recogniser left it out ("now.Today" is never right; a word
    that merely lacks its space may be the rest of the one before, "time" + "s")."""
    texts = [w.text for w in words]
    if lang and not unspaced(lang):
        texts = [t if (i == 0 or t[:1].isspace() or not t[:1].isalpha() or texts[i - 1][-1:] not in _MARKS)
                 else " " + t for i, t in enumerate(texts)]
    out = "".join(texts)
    return " ".join(out.split()) if " " in out else out.strip()


_MARKS = frozenset(".,!?;:")
