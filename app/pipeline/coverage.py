"""Coverage: how much of the speech the voice detector heard produced words that stayed.

A gate that drops speech, a window that moves past audio whose words never committed, a second
pass that gives up on a sentence: each loses words silently, and a summary of latencies looks
normal. ``VoicedLog`` keeps the voiced stretches (merged), the session record keeps the spans of
the words that stayed; ``coverage`` compares them.

    voiced = VoicedLog()
    voiced.add(start_sample, speech_mask, frame_samples)   # from a VAD, in time order
    cov = coverage(voiced.spans(), word_spans)             # {"coverage", "lost_speech_s", ...}
"""

from __future__ import annotations

import threading

import numpy as np

from app.core.audio import SR

PAD_S = 0.3  # a word's span, widened by this on each side (word times and VAD edges are rough)
JOIN_S = 1.0  # words closer than this cover the pause between them (one clause)
MIN_LOST_S = 0.5  # an uncovered voiced stretch shorter than this is an edge, not lost speech
WARN_BELOW = 0.9  # a session covering less than this says so


class VoicedLog:
    """Voiced stretches, merged across gaps shorter than ``merge_s``, as [start, end] seconds.
    Thread-safe: a VAD worker adds, the summary reads."""

    def __init__(self, merge_s: float = 0.3):
        self.merge_s = merge_s
        self._spans: list[list[float]] = []
        self._lock = threading.Lock()

    def add(self, start_sample: int, speech: np.ndarray, frame_samples: int) -> None:
        """``speech[i]``: frame ``i`` (starting at ``start_sample + i * frame_samples``) is voiced."""
        s = np.asarray(speech, dtype=bool)
        if not s.any():
            return
        d = np.diff(np.concatenate(([0], s.astype(np.int8), [0])))
        starts, ends = np.nonzero(d == 1)[0], np.nonzero(d == -1)[0]
        with self._lock:
            for a, b in zip(starts, ends):
                t0 = (start_sample + int(a) * frame_samples) / SR
                t1 = (start_sample + int(b) * frame_samples) / SR
                if self._spans and t0 - self._spans[-1][1] <= self.merge_s:
                    self._spans[-1][1] = max(self._spans[-1][1], t1)
                else:
                    self._spans.append([t0, t1])

    def spans(self) -> list[tuple[float, float]]:
        with self._lock:
            return [(a, b) for a, b in self._spans]

    @property
    def voiced_s(self) -> float:
        with self._lock:
            return sum(b - a for a, b in self._spans)


def merge(spans, pad: float = 0.0, join: float = 0.0) -> list[tuple[float, float]]:
    """Spans widened by ``pad`` and joined where less than ``join`` apart, sorted."""
    out: list[list[float]] = []
    for a, b in sorted((a - pad, b + pad) for a, b in spans if b >= a):
        if out and a - out[-1][1] <= join:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def coverage(voiced, words, *, pad: float = PAD_S, join: float = JOIN_S, min_lost: float = MIN_LOST_S) -> dict:
    """``voiced``: (start, end) seconds the VAD took for speech; ``words``: (start, end) of each
    word that stayed (finals, or committed words without a second pass). Lost speech: voiced
    stretches of ``min_lost`` or more that no word's span (widened by ``pad``, words less than
    ``join`` apart joined) touches. ``coverage`` = 1 − lost / voiced."""
    covered = merge(words, pad, join)
    voiced = merge(voiced)
    total = sum(b - a for a, b in voiced)
    lost: list[tuple[float, float]] = []
    j = 0
    for a, b in voiced:
        t = a
        while j < len(covered) and covered[j][1] <= a:
            j += 1
        k = j
        while t < b:
            if k < len(covered) and covered[k][0] < b:
                ca, cb = covered[k]
                if ca > t:
                    lost.append((t, ca))
                t = max(t, cb)
                k += 1
            else:
                lost.append((t, b))
                t = b
    lost = [(a, b) for a, b in lost if b - a >= min_lost]
    lost_s = sum(b - a for a, b in lost)
    return {"coverage": round(1.0 - lost_s / total, 4) if total > 0 else None,
            "voiced_s": round(total, 2), "lost_speech_s": round(lost_s, 2),
            "lost_spans": [[round(a, 2), round(b, 2)] for a, b in lost[:50]]}


def warning(cov: dict) -> str | None:
    """The line a session shows when it covered too little of what it heard."""
    c = cov.get("coverage")
    if c is None or c >= WARN_BELOW:
        return None
    return (f"only {c:.0%} of the speech heard produced text: {cov['lost_speech_s']:.0f} s of voiced audio "
            f"gave no words (noise, music or a recognition gap)")
