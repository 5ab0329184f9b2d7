"""LocalAgreement-2: commit the prefix that two successive hypotheses agree on.

A pure policy: tests drive it with fake hypotheses. Words carry absolute source times.
"""

from __future__ import annotations

import unicodedata

from app.pipeline.protocols import Word


def norm(text: str) -> str:
    """Comparison form of a word: case-folded, punctuation and spaces removed."""
    return "".join(c for c in text.casefold() if not unicodedata.category(c).startswith(("P", "Z", "S")))


class LocalAgreement:
    def __init__(self):
        self.committed: list[Word] = []
        self._prev: list[Word] = []
        self._prev_seen: list[float] = []
        self.tentative: list[Word] = []
        self.tentative_seen: list[float] = []

    @property
    def last_committed_end(self) -> float:
        return self.committed[-1].end if self.committed else 0.0

    def insert(self, hypothesis: list[Word], now: float) -> tuple[list[Word], list[float]]:
        """Take a new hypothesis of the uncommitted audio; return the newly committed words and
        the time each of them first appeared in a hypothesis."""
        hyp = [w for w in hypothesis if norm(w.text) or w.text.strip()]
        seen = []
        for i, w in enumerate(hyp):
            if i < len(self._prev) and norm(self._prev[i].text) == norm(w.text) and len(seen) == i:
                seen.append(self._prev_seen[i])
            else:
                seen.append(now)
        # inherit first-seen times beyond the common prefix when the same word reappears shifted
        n = 0
        while n < len(hyp) and n < len(self._prev) and norm(hyp[n].text) == norm(self._prev[n].text):
            n += 1
        # punctuation may differ between runs: keep the newer word's text and times
        commit, commit_seen = hyp[:n], seen[:n]
        self.committed += commit
        self._prev, self._prev_seen = hyp[n:], seen[n:]
        self.tentative, self.tentative_seen = list(self._prev), list(self._prev_seen)
        return commit, commit_seen

    def flush(self) -> tuple[list[Word], list[float]]:
        """Commit whatever is tentative (end of an utterance or of the stream)."""
        commit, seen = self._prev, self._prev_seen
        self.committed += commit
        self._prev, self._prev_seen = [], []
        self.tentative, self.tentative_seen = [], []
        return commit, seen


def split_prefix(words: list[Word], prefix: str) -> list[Word] | None:
    """Drop the words that spell ``prefix`` (compared in normalised form) from the front of a
    hypothesis; None if the hypothesis does not start with it."""
    target = norm(prefix)
    if not target:
        return list(words)
    acc = ""
    for i, w in enumerate(words):
        acc += norm(w.text)
        if len(acc) >= len(target):
            if not acc.startswith(target):
                return None
            rest = acc[len(target) :]
            out = list(words[i + 1 :])
            if rest:  # a word straddles the prefix end: keep only its new part
                out.insert(0, Word(rest, w.start, w.end, w.probability))
            return out
        if not target.startswith(acc):
            return None
    return [] if acc == target else None
