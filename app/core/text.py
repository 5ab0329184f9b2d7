"""Text helpers every layer shares: which scripts are written without spaces, how much text a
piece holds, and the form two pieces of text are compared in."""

from __future__ import annotations

import unicodedata

CJK_LANGS = ("zh", "ja")  # written without spaces between words
SENTENCE_END = frozenset("。！？!?.…")
CLAUSE_END = frozenset("，、；：,;:")


def unspaced(lang: str) -> bool:
    """True for a language written without spaces between words (Chinese, Japanese)."""
    return lang in CJK_LANGS


def word_sep(lang: str) -> str:
    """What goes between two pieces of text in ``lang``: nothing in unspaced scripts, else a space."""
    return "" if unspaced(lang) else " "


def is_ideograph(ch: str) -> bool:
    """A CJK ideograph (U+3400 to U+9FFF): one unit of text on its own."""
    return "\u3400" <= ch <= "\u9fff"


def units(text: str, lang: str) -> int:
    """Length of ``text`` in units: characters other than spaces and punctuation marks in
    unspaced scripts, words elsewhere."""
    if unspaced(lang):
        return sum(1 for c in text if not c.isspace() and c not in SENTENCE_END | CLAUSE_END)
    return len(text.split())


def mixed_units(text: str) -> int:
    """Length of ``text`` in units when its language is not known: each ideograph, and each
    space-delimited word that holds none."""
    ideographs = sum(1 for c in text if is_ideograph(c))
    return ideographs + sum(1 for w in text.split() if not any(is_ideograph(c) for c in w))


def norm(text: str) -> str:
    """Comparison form of a piece of text: case-folded, punctuation, symbols and spaces removed."""
    return "".join(c for c in text.casefold() if not unicodedata.category(c).startswith(("P", "Z", "S")))
