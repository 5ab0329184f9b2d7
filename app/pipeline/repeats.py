"""Hallucination loops: Whisper sometimes says the same thing over and over ("You can act with the
system." twenty times). Pure functions and a small class, no model: the Whisper backend cuts the
loops in each decode (against the text before it too: its prompt and forced prefix),
``cut_hypothesis`` does the same for a recogniser's hypothesis against a longer stretch of
committed words, and the second pass drops a final that only repeats the previous ones
(``SentenceRepeats``).

Everything compares *keys*: a word's comparison form (``norm``: case, spaces, punctuation and
symbols removed), so " like" and " Like", "you." and "you..." are the same word. Pieces with an
empty key (a lone punctuation mark) are skipped.

How many back-to-back copies make a loop (``copies_for``): a span of 3+ words said twice inside
one decode; 2-word spans 3 times, single words 5 times ("very, very" and "no, no, no" are speech).
When the earlier copies are text already out (the prompt, the committed words), one more copy is
needed: a speaker may well say the previous sentence again, once.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Sequence

from app.core.text import norm, units


def copies_for(period: int) -> int:
    """Back-to-back copies of a span of ``period`` keys that make a loop (all of them new)."""
    return 2 if period >= 3 else (3 if period == 2 else 5)


def loop_cut(keys: Sequence, n_old: int = 0, min_period: int = 1, max_period: int = 48,
             within: bool = True) -> int:
    """How many of ``keys`` to keep: the keys up to the end of the first copy of a loop (a span
    repeated back to back ``copies_for(period)`` times), or everything. ``keys[:n_old]`` is text
    already out (context): it is never cut, and a loop whose first copy lies in it needs one copy
    more; only a loop reaching past ``n_old`` counts. Such a loop's last copy may be one broken off
    at the very end (3+ keys and half the span: the next words will complete it), so a stream
    that commits a loop piece by piece is cut on the piece where the copy becomes clear.
    ``within=False``: only loops that continue the context count."""
    n = len(keys)
    best = n
    for p in range(max(1, min_period), min(max_period, n // 2) + 1):
        need_new = copies_for(p)
        s = 0
        while s + p <= n:
            span = keys[s:s + p]
            c = 1
            while s + (c + 1) * p <= n and keys[s + c * p:s + (c + 1) * p] == span:
                c += 1
            end = s + c * p
            tail = n - end
            broken = (s < n_old and 0 < tail < p and tail >= min(3, p) and tail * 2 >= p
                      and keys[end:] == span[:tail])
            need = need_new + (1 if s < n_old else 0)
            if s >= n_old and not within:
                break
            total = c + (1 if broken else 0)
            if total >= need and (end + (tail if broken else 0)) > n_old:
                best = min(best, max(n_old, s + p))
            # the next start worth trying: inside this run, every shift repeats the same run
            s += 1 if c == 1 else (c - 1) * p
        if best <= n_old:
            break
    return best


def restart_cut(keys: Sequence) -> int:
    """A loop that starts the whole text over and breaks off at the end (the length limit):
    keep the text before the restart, once the copy holds 3+ keys and half of what precedes it."""
    n = len(keys)
    for m in range(n // 2, 2, -1):
        if 2 * m >= n - m and list(keys[n - m:]) == list(keys[:m]):
            return restart_cut(keys[:n - m])
    return n


def word_keys(texts: Sequence[str]) -> tuple[list[str], list[int]]:
    """The keys of words (those with one) and, for each, the index of its word."""
    keys, where = [], []
    for i, t in enumerate(texts):
        k = norm(t)
        if k:
            keys.append(k)
            where.append(i)
    return keys, where


def cut_words(texts: Sequence[str], context: Sequence[str] = (), min_period: int = 1,
              within: bool = True) -> int:
    """How many of the words ``texts`` to keep so that no loop remains, with ``context`` (the text
    before them, already out, as words) counted as earlier copies. Punctuation right after the
    last kept word stays with it. ``within=False``: only loops continuing the context."""
    old, _ = word_keys(context)
    new, where = word_keys(texts)
    if not new:
        return len(texts)
    keep = loop_cut(old + new, len(old), min_period=min_period, within=within) - len(old)
    if within:
        keep = restart_cut(new[:keep]) if keep > 0 else 0
    if keep >= len(new):
        return len(texts)
    if keep == 0:
        return 0
    return where[keep]  # the next kept key's word: what lies between (marks) stays


def cut_hypothesis(words: Sequence, committed: Sequence, spaced: bool = True, history: int = 120) -> list:
    """A recogniser's new hypothesis words (after the forced prefix) without a loop that runs on
    from the last ``history`` committed words (stateless: safe to replay a step). In spaced
    languages loops inside the hypothesis are cut too; in Chinese/Japanese (words are tokens
    there) only one continuing the committed text, of 4+ tokens."""
    ctx = [w.text for w in committed[-history:]]
    keep = cut_words([w.text for w in words], ctx, min_period=1 if spaced else 4, within=spaced)
    return list(words[:keep])


@dataclass
class _Sentence:
    key: str
    duration: float
    end: float | None = None  # source time the sentence ended, when the caller gave it


class SentenceRepeats:
    """Whether a finished sentence only repeats the ones before it (a loop, not speech).

    A speaker can say the same sentence twice, so a repeat alone is kept. Dropped: the same
    sentence a third time in a row; one said for the third time among the last ``recent``
    sentences when it holds ``min_units`` units or more (a loop that alternates, "A. B. A. B. A.");
    and an exact repeat of the previous sentence heard in much less audio than it took before
    (``short_ratio`` of it): Whisper reading its prompt out over a cough or a second of noise.
    ``check`` returns True to drop and remembers only the sentences it keeps. Given the source
    times (``start``, ``end``), only sentences that ended within ``window_s`` before this one
    began count: a loop runs on in consecutive decodes, while a speaker coming back to the
    same sentence minutes later (a recording's refrain, "Any questions?") is speech."""

    def __init__(self, lang: str = "en", recent: int = 8, min_units: int = 3, short_ratio: float = 0.5,
                 window_s: float = 60.0):
        self.lang = lang
        self.recent = recent
        self.min_units = min_units
        self.short_ratio = short_ratio
        self.window_s = window_s
        self._kept: deque[_Sentence] = deque(maxlen=max(2, recent))
        self.dropped = 0

    def check(self, text: str, duration_s: float, start: float | None = None, end: float | None = None) -> bool:
        key = norm(text)
        if not key:
            return False
        kept = [k for k in self._kept if start is None or k.end is None or start - k.end <= self.window_s]
        drop = False
        if len(kept) >= 2 and kept[-1].key == key and kept[-2].key == key:
            drop = True
        elif kept and kept[-1].key == key and duration_s < self.short_ratio * kept[-1].duration:
            drop = True
        elif (units(text, self.lang) >= self.min_units
              and sum(s.key == key for s in kept[-self.recent:]) >= 2):
            drop = True
        if drop:
            self.dropped += 1
        else:
            self._kept.append(_Sentence(key, duration_s, end))
        return drop
