"""LocalAgreement-2: commit the prefix that two successive hypotheses agree on.

A pure policy: tests drive it with fake hypotheses. Words carry absolute source times.
"""

from __future__ import annotations

from app.core.text import is_ideograph, norm
from app.pipeline.protocols import Word

PARTIAL_CHAR = "\ufffd"  # what a decoder writes for an incomplete UTF-8 sequence


def agree_form(text: str) -> str:
    """Form two hypotheses must share for a word to commit: punctuation counts (a sentence end
    that has not appeared yet must not be committed away), case and spacing do not."""
    return "".join(c for c in text.casefold() if not c.isspace()).replace("，", ",").replace("？", "?")


class LocalAgreement:
    """``min_lookahead_s``: a word commits only when the hypothesis that confirms it heard at
    least this much audio after the word. Two hypotheses a short step apart can agree on the
    same wrong guess for a word at the window's edge (measured: with 0.2 s steps and no margin
    the zh CER went from 5.7 to 17-21 %); a margin makes the confirmation carry new evidence.

    ``first_lookahead_s``: the margin for the first commit of an utterance (after a flush). A
    clause's first words are where short windows guess worst: on zh_meeting (``--fast``, 0.25 s
    steps) a 0.5 s margin there took the CER from 8.57 to 6.43 %.

    A word holding U+FFFD is never committed: it is a character whose UTF-8 bytes are split
    across tokens, of which the hypothesis has only the first yet (it was committed as "比预期�"
    and the rest of the clause lost)."""

    def __init__(self, min_lookahead_s: float = 0.0, first_lookahead_s: float = 0.0,
                 confident_prob: float = 0.0, confident_lookahead_s: float = 0.0,
                 confident_silence_s: float = 0.25):
        self.min_lookahead_s = min_lookahead_s
        self.first_lookahead_s = first_lookahead_s
        self.confident_prob = confident_prob
        self.confident_lookahead_s = confident_lookahead_s
        self.confident_silence_s = confident_silence_s
        self.confident_commits = 0  # words committed on one hypothesis (see _confident)
        self._utterance_commits = 0  # words committed since the last flush
        self.committed: list[Word] = []
        self._prev: list[Word] = []
        self._prev_seen: list[float] = []
        self.tentative: list[Word] = []
        self.tentative_seen: list[float] = []
        self._prev_fresh: list[bool] = []  # per tentative word: the hypothesis before had not it in place
        self._before: list[Word] = []  # the tail of the hypothesis before the last one, past the last commit
        self._before_seen: list[float] = []

    @property
    def utterance_commits(self) -> int:
        """Words committed since the last flush."""
        return self._utterance_commits

    @property
    def last_committed_end(self) -> float:
        return self.committed[-1].end if self.committed else 0.0

    def insert(self, hypothesis: list[Word], now: float, audio_end: float | None = None,
               silent_from: float | None = None) -> tuple[list[Word], list[float]]:
        """Take a new hypothesis of the uncommitted audio (which ends at source time
        ``audio_end``; the VAD heard only silence from ``silent_from`` on, if given); return
        the newly committed words and the time each of them first appeared in a hypothesis."""
        hyp = [w for w in hypothesis if norm(w.text) or w.text.strip()]
        # a word keeps the time it first appeared while successive hypotheses keep it in place
        seen, fresh = [], []
        for i, w in enumerate(hyp):
            if i < len(self._prev) and norm(self._prev[i].text) == norm(w.text):
                seen.append(self._prev_seen[i])
                fresh.append(False)
            else:
                seen.append(now)
                fresh.append(True)
        n = 0
        while n < len(hyp) and n < len(self._prev) and agree_form(hyp[n].text) == agree_form(self._prev[n].text):
            n += 1
        n = next((k for k in range(n) if PARTIAL_CHAR in hyp[k].text), n)
        margin = self.min_lookahead_s
        if self._utterance_commits == 0:
            margin = max(margin, self.first_lookahead_s)
        if audio_end is not None and margin > 0:
            while n and hyp[n - 1].end > audio_end - margin:
                n -= 1
        n = self._confident(hyp, n, audio_end, silent_from)
        self._utterance_commits += n
        self._before, self._before_seen = self._prev[n:], self._prev_seen[n:]
        commit, commit_seen = hyp[:n], seen[:n]
        self.committed += commit
        self._prev, self._prev_seen, self._prev_fresh = hyp[n:], seen[n:], fresh[n:]
        self.tentative, self.tentative_seen = list(self._prev), list(self._prev_seen)
        return commit, commit_seen

    @property
    def unconfirmed(self) -> bool:
        """Some tentative word is not where the hypothesis before had it: only the last
        hypothesis vouches for the tail (a word it dropped, or one it made up, would be flushed)."""
        return any(self._prev_fresh)

    def _confident(self, hyp: list[Word], n: int, audio_end: float | None, silent_from: float | None) -> int:
        """Extend the agreed prefix ``hyp[:n]`` with words the recogniser is sure of in this one
        hypothesis: probability at least ``confident_prob``, ending ``confident_lookahead_s``
        before the audio does, and followed by another word or by ``confident_silence_s`` of
        silence (so the punctuation after it has been decided with what follows in view: at the
        audio's end Whisper writes a "。" the speaker may not have said). Not for an utterance's
        first words, which keep agreement and their wider margin: that is where Whisper base
        guesses worst."""
        if not self.confident_prob or audio_end is None or self._utterance_commits + n == 0:
            return n
        k = n
        limit = audio_end - self.confident_lookahead_s
        last = len(hyp) - 1
        if silent_from is not None and audio_end - silent_from >= self.confident_silence_s:
            last = len(hyp)
        while (k < last and hyp[k].probability >= self.confident_prob and hyp[k].end <= limit
               and PARTIAL_CHAR not in hyp[k].text):
            k += 1
        self.confident_commits += k - n
        return k

    def flush(self) -> tuple[list[Word], list[float]]:
        """Commit whatever is tentative (end of an utterance or of the stream). Words the
        hypothesis before had and the last one dropped between two words both hold (or between
        the commit and such a word) are put back: the window moves past them next."""
        tail, tail_seen = _restore_dropped(self._prev, self._prev_seen, self._before, self._before_seen)
        kept = [(w, t) for w, t in zip(tail, tail_seen) if PARTIAL_CHAR not in w.text]
        commit, seen = [w for w, _ in kept], [t for _, t in kept]
        self._utterance_commits = 0
        self.committed += commit
        self._prev, self._prev_seen, self._prev_fresh = [], [], []
        self._before, self._before_seen = [], []
        self.tentative, self.tentative_seen = [], []
        return commit, seen


def _restore_dropped(tail: list[Word], seen: list[float], before: list[Word],
                     before_seen: list[float]) -> tuple[list[Word], list[float]]:
    """``tail`` with the words of ``before`` (an earlier hypothesis of the same audio) that it
    lacks where nothing else stands in their place: a run of ``before`` that the alignment of
    the two (longest common subsequence, normalised text) leaves unmatched, between two matched
    words or between the start and a matched word, while ``tail`` has nothing there. A run
    where ``tail`` has other words is a correction: ``tail`` keeps its own. After the last
    matched word nothing is restored (the earlier hypothesis heard less audio there)."""
    if not tail or not before:
        return tail, seen
    a, b = [norm(w.text) for w in before], [norm(w.text) for w in tail]
    lcs = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) - 1, -1, -1):
        for j in range(len(b) - 1, -1, -1):
            lcs[i][j] = lcs[i + 1][j + 1] + 1 if a[i] == b[j] else max(lcs[i + 1][j], lcs[i][j + 1])
    out, out_seen = [], []
    i = j = 0
    pending: list[tuple[Word, float]] = []  # the gap's words only the earlier hypothesis has
    replaced = False  # the last hypothesis has words of its own in the gap
    while i < len(a) and j < len(b):
        if a[i] == b[j]:
            if not replaced:
                out += [w for w, _ in pending]
                out_seen += [t for _, t in pending]
            pending, replaced = [], False
            out.append(tail[j])
            out_seen.append(seen[j])
            i, j = i + 1, j + 1
        elif lcs[i + 1][j] >= lcs[i][j + 1]:
            pending.append((before[i], before_seen[i]))
            i += 1
        else:
            replaced = True
            out.append(tail[j])
            out_seen.append(seen[j])
            j += 1
    if j < len(b):
        out += tail[j:]
        out_seen += seen[j:]
    return out, out_seen


ECHO_MAX_RATE = 15.0  # characters a second: faster than anyone speaks (Mandarin runs at 4-7)
ECHO_MAX_RATE_SPACED = 40.0  # letters a second (English runs at 12-20)


def drop_echo(words: list[Word], committed: list[Word], tolerance_s: float = 0.15,
              spaced: bool = False) -> list[Word]:
    """Remove what a hypothesis repeats of the committed text: words lying inside the time
    already committed, and a leading run that spells the end of the committed text again near
    its end (Whisper, forced to continue a prefix, sometimes re-reads the last clause).

    The re-read may correct a character the commit got wrong (committed 三个月的营收是两千三百万元,
    re-read 上个月的…): a run of six or more characters that differs from the committed end in
    at most one character in six is an echo too when its timestamps squeeze it into less time
    than it could be spoken in (measured: 13-14 characters in 0-0.38 s, in the fault test's
    local fallback). Said again at a speaking pace, a near repeat is kept: that is speech.

    A run of any length that spells the committed end exactly is an echo when it is squeezed
    so or lies inside the committed time (a one-word re-read after a window trim: "情况情况").

    ``spaced`` (English and other space-delimited scripts): only that last rule, on whole
    committed words (the wider guards cost WER there: asterisk_session, --fast, 9.68 % vs 7.58 %)."""
    if not committed or not words:
        return list(words)
    last_end = committed[-1].end
    out = list(words)
    if out[0].start <= last_end + 0.3:
        recent = committed[-30:]
        tail = norm("".join(w.text for w in recent))
        ends = set()  # the committed text's whole-word tails (spaced scripts)
        acc_tail = ""
        for w in reversed(recent):
            acc_tail = norm(w.text) + acc_tail
            ends.add(acc_tail)
        acc = ""
        cut = 0
        for k, w in enumerate(out):
            acc += norm(w.text)
            if len(acc) > len(tail):
                break
            exact = acc in ends if spaced else (bool(acc) and tail.endswith(acc))
            rate = ECHO_MAX_RATE if not spaced and any(is_ideograph(c) for c in acc) else ECHO_MAX_RATE_SPACED
            squeezed = len(acc) > rate * (w.end - out[0].start) or w.end <= last_end + 0.02
            # unsqueezed, two words and four characters at least (unspaced scripts only): "very,
            # very" or "谢谢" said twice is speech
            near = (not spaced and len(acc) >= 6 and _near(acc, tail[-len(acc):])
                    and len(acc) > ECHO_MAX_RATE * (w.end - out[0].start))
            if (exact and (squeezed or (not spaced and k >= 1 and len(acc) >= 4))) or near:
                cut = k + 1
        out = out[cut:]
    if spaced:
        return out
    i = 0
    recent_text = norm("".join(w.text for w in committed[-30:]))
    # inside the committed time: ending in it, or starting in it -- if the word says again what
    # was committed, or most of it lies in that time too (timestamps are off by 0.1 s either
    # way: a new word starting 0.15 s early is no echo, and dropping it from two hypotheses in
    # a row committed the word after it past it)
    while i < len(out) and (out[i].end <= last_end + 0.02 or (
            out[i].start < last_end - tolerance_s
            and (norm(out[i].text) in recent_text or out[i].start + out[i].end < 2 * last_end - 0.2))):
        i += 1
    return out[i:]


def _near(a: str, b: str) -> bool:
    """Same length and at most one differing character in six."""
    return len(a) == len(b) and sum(x != y for x, y in zip(a, b)) <= len(a) // 6


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
            out = list(words[i + 1 :])
            extra = len(acc) - len(target)
            if extra:  # a word straddles the prefix end: keep only its new part
                out.insert(0, Word(_last_chars(w.text, extra), w.start, w.end, w.probability))
            return out
        if not target.startswith(acc):
            return None
    return [] if acc == target else None


def skip_prefix(words: list[Word], prefix: str) -> list[Word] | None:
    """The words after the forced ``prefix`` when the hypothesis spells it differently (the
    decoder writes the forced tokens, but script conversion or word grouping can change a
    character or two): the leading words that hold as many normalised characters as the
    prefix, at most one in three of them (or one) different; None if no word ends there."""
    target = norm(prefix)
    acc = ""
    for i, w in enumerate(words):
        acc += norm(w.text)
        if len(acc) >= len(target):
            ok = len(acc) == len(target) and sum(a != b for a, b in zip(acc, target)) <= max(1, len(target) // 3)
            return list(words[i + 1:]) if ok else None
    return None


def _last_chars(text: str, n_norm: int) -> str:
    """The shortest tail of ``text`` that holds ``n_norm`` normalised characters."""
    for i in range(len(text) - 1, -1, -1):
        if len(norm(text[i:])) >= n_norm:
            return text[i:]
    return text
