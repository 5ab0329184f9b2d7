"""The profanity setting, as speech services offer it: ``masked`` (the default: ``f***``, the first
letter kept and the rest as asterisks), ``removed`` (the word leaves the text, with the spaces and
clause marks it would leave behind) or ``raw`` (the text as the models wrote it).

What is matched comes from one word list per language, shipped with the app as plain text in
``resources/profanity/<lang>.txt`` (one entry a line, ``#`` starts a comment). An entry is matched
case-insensitively as a whole word (``ass`` never matches inside ``class``), so each inflection
an entry should catch is listed (``fuck``, ``fucked``, ``fucking`` …); an entry of several words
matches them across any run of spaces or hyphens, and an apostrophe matches ’ as well. An entry
written in a script without spaces (Chinese, Japanese) is matched wherever it occurs.

A language without a list is not filtered (``make_filter`` returns None). Filtering is pure and
idempotent: filtered text filtered again stays the same."""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path

from app.core.text import CLAUSE_END, SENTENCE_END

MODES = ("masked", "removed", "raw")
DEFAULT_MODE = "masked"
LISTS = Path(__file__).resolve().parent.parent.parent / "resources" / "profanity"

# what a removed word may leave in front of the next word: marks that close what precedes them
_CLOSERS = frozenset(CLAUSE_END | SENTENCE_END | set(")]}»）」』"))


def _wide(ch: str) -> bool:
    return unicodedata.east_asian_width(ch) in "WF"


def _entry_pattern(entry: str) -> str:
    words = entry.split()
    body = r"[\s\-]+".join(re.escape(w).replace("'", "['’]") for w in words)
    if any(_wide(c) for c in entry):
        return body  # no spaces between words in this script: matched wherever it occurs
    return rf"(?<!\w){body}(?!\w)"


def parse_list(text: str) -> tuple[str, ...]:
    """The entries of a word list file: one a line, ``#`` comments and blank lines skipped."""
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(" ".join(line.split()))
    return tuple(dict.fromkeys(out))


@functools.cache
def word_list(lang: str) -> tuple[str, ...]:
    """The shipped entries for ``lang`` (empty when the app has no list for it)."""
    if not re.fullmatch(r"[a-z]{2,3}", lang or ""):
        return ()
    path = LISTS / f"{lang}.txt"
    if not path.is_file():
        return ()
    return parse_list(path.read_text(encoding="utf-8"))


def languages() -> list[str]:
    """The languages the app ships a word list for."""
    return sorted(p.stem for p in LISTS.glob("*.txt")) if LISTS.is_dir() else []


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"profanity must be one of {', '.join(MODES)}, not {str(mode)[:20]!r}")
    return mode


class ProfanityFilter:
    """``filter(text)``: the text as the setting shows it (masked: letters and digits after the first
    become ``*``, spaces, hyphens and apostrophes stay); ``filter.words(texts)``: the same over a
    sequence of recognised words (matched across them, so an entry split over two of them, as a
    Chinese word often is, is still found), each word keeping its place."""

    def __init__(self, mode: str, entries: Sequence[str], lang: str = ""):
        self.mode = check_mode(mode)
        self.lang = lang
        entries = sorted({e for e in entries if e.strip()}, key=len, reverse=True)  # longest first
        self._re = (re.compile("|".join(_entry_pattern(e) for e in entries), re.IGNORECASE)
                    if entries and mode != "raw" else None)

    def __repr__(self) -> str:
        return f"ProfanityFilter({self.mode!r}, lang={self.lang!r})"

    def spans(self, text: str) -> list[tuple[int, int]]:
        if self._re is None or not text:
            return []
        return [m.span() for m in self._re.finditer(text)]

    def __call__(self, text: str) -> str:
        spans = self.spans(text)
        if not spans:
            return text
        if self.mode == "masked":
            return _mask(text, spans)
        return _remove(text, spans)

    def words(self, texts: Sequence[str]) -> list[str]:
        joined = "".join(texts)
        spans = self.spans(joined)
        if not spans:
            return list(texts)
        hit = bytearray(len(joined))  # 1: mask this character, 2: drop it
        for s, e in spans:
            if self.mode == "masked":
                for i in range(s + 1, e):
                    hit[i] = 1 if joined[i].isalnum() else 0
            else:
                hit[s:e] = b"\x02" * (e - s)
        out, pos = [], 0
        for t in texts:
            marks = hit[pos:pos + len(t)]
            pos += len(t)
            if not any(marks):
                out.append(t)
                continue
            new = "".join("*" if m == 1 else c for c, m in zip(t, marks, strict=True) if m != 2)
            if self.mode == "removed":
                core = new.strip()
                if not core:
                    new = ""
                elif core[0] in _CLOSERS:  # only its punctuation is left: it joins the word before
                    new = core
            out.append(new)
        return out


def _mask(text: str, spans: list[tuple[int, int]]) -> str:
    chars = list(text)
    for s, e in spans:
        for i in range(s + 1, e):
            if chars[i].isalnum():  # spaces, hyphens and apostrophes stay
                chars[i] = "*"
    return "".join(chars)


def _remove(text: str, spans: list[tuple[int, int]]) -> str:
    lead = text[: len(text) - len(text.lstrip())]
    trail = text[len(text.rstrip()):]
    out, prev = text[: spans[0][0]], spans[0][1]
    for (s, e), removed in zip(spans[1:] + [(len(text), len(text))], [text[a:b] for a, b in spans], strict=True):
        out = _join(out, text[prev:s], removed)
        prev = e
    out = out.strip()
    return lead + out + trail if out else ""


def _join(a: str, b: str, removed: str) -> str:
    """``a`` and ``b`` as they read once ``removed``, which stood between them, is gone: no double
    space, no space before punctuation, no clause mark opening a sentence."""
    a_core, b_core = a.rstrip(), b.lstrip()
    space = " " if (a_core != a or b_core != b) else ""
    if not b_core:
        return a_core + space
    if not a_core or a_core[-1] in SENTENCE_END:
        # the removed word opened a sentence ("Fuck, I forgot."): the rest opens it now, and a
        # sentence that was nothing but the word ("Shit! …") goes with it
        b_core = b_core.lstrip("".join(CLAUSE_END | SENTENCE_END)).lstrip()
        if b_core and removed[:1].isupper() and b_core[0].islower():
            b_core = b_core[0].upper() + b_core[1:]
        return a_core + (space if a_core and b_core else "") + b_core
    if b_core[0] in CLAUSE_END and a_core[-1] in CLAUSE_END:  # "a, fuck, b": one mark stays
        b_core = b_core[1:].lstrip()
        if not b_core:
            return a_core + space
    elif b_core[0] in SENTENCE_END and a_core[-1] in CLAUSE_END:  # "a, fuck!": the sentence ends
        a_core = a_core[:-1].rstrip()
    if b_core[0] in _CLOSERS:  # no space before punctuation
        return a_core + b_core
    return a_core + space + b_core


def make_filter(mode: str, lang: str) -> ProfanityFilter | None:
    """The filter for text in ``lang``; None where nothing would change (``raw``, or no list)."""
    check_mode(mode)
    if mode == "raw":
        return None
    return _cached_filter(mode, lang) if word_list(lang) else None


@functools.lru_cache(maxsize=64)
def _cached_filter(mode: str, lang: str) -> ProfanityFilter:
    return ProfanityFilter(mode, word_list(lang), lang)


def filter_text(text: str, mode: str, lang: str) -> str:
    """``text`` (in ``lang``) as the profanity setting ``mode`` shows it."""
    f = make_filter(mode, lang)
    return f(text) if f is not None else text
