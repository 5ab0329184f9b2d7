"""Latency bookkeeping. Definitions are in docs/LATENCY.md; every figure is computation-aware."""

from __future__ import annotations

import bisect
import threading
from array import array
from dataclasses import dataclass, field

import numpy as np

from app.core.audio import SR
from app.pipeline.messages import CommittedWords, DubChunk, DubPlayed, FinalSentence, Segment, Translation


class ArrivalClock:
    """When each source sample reached the pipeline (wall time), from the capture/feeder's
    block stamps. ``played_at(t)``: the wall time at which source time ``t`` had been heard."""

    def __init__(self):
        # one stamp per capture block (50 a second) for the whole session: packed arrays, 16 bytes a
        # stamp (2.9 MB an hour) where lists of Python numbers took ~70
        self._ends = array("q")
        self._walls = array("d")
        self._lock = threading.Lock()

    def record(self, end_sample: int, wall: float) -> None:
        with self._lock:
            self._ends.append(end_sample)
            self._walls.append(wall)

    def played_at(self, src_t: float) -> float:
        s = int(round(src_t * SR))
        with self._lock:
            if not self._ends:
                return 0.0
            i = bisect.bisect_left(self._ends, s)
            if i >= len(self._ends):
                return self._walls[-1]
            # interpolate inside the block: a real-time source plays its samples evenly
            prev_end = self._ends[i - 1] if i else 0
            prev_wall = self._walls[i - 1] if i else self._walls[0] - (self._ends[0] / SR)
            span = self._ends[i] - prev_end
            if span <= 0:
                return self._walls[i]
            frac = (s - prev_end) / span
            return min(self._walls[i], prev_wall + frac * (self._walls[i] - prev_wall)) if i else self._walls[i]


def percentiles(values) -> dict:
    if len(values) == 0:
        return {"p50": None, "p95": None, "p99": None, "n": 0}
    a = np.asarray(values, dtype=float) * 1000.0
    return {
        "p50": round(float(np.percentile(a, 50)), 1),
        "p95": round(float(np.percentile(a, 95)), 1),
        "p99": round(float(np.percentile(a, 99)), 1),
        "mean": round(float(a.mean()), 1),
        "n": int(a.size),
    }


def average_lagging(delays_s: list[float], src_dur_s: float, ref_len: int | None = None) -> tuple[float, float]:
    """SimulEval AL and LAAL (ms) for one sentence: ``delays_s`` are, per target word, the source
    time elapsed (computation-aware) when it was emitted; LAAL uses max(|hyp|, |ref|)."""
    n = len(delays_s)
    if n == 0 or src_dur_s <= 0:
        return 0.0, 0.0
    d = np.asarray(delays_s) * 1000.0
    x = src_dur_s * 1000.0
    tau = n
    for i, di in enumerate(d):
        if di >= x:
            tau = i + 1
            break

    def lag(denom_len: int) -> float:
        rate = x / denom_len
        return float(np.mean([d[i] - i * rate for i in range(tau)]))

    al = lag(n)
    laal = lag(max(n, ref_len or n))
    return al, laal


@dataclass
class _WordRec:
    end: float
    played: float
    first_seen: float
    shown_at: float | None = None


@dataclass
class LatencyTracker:
    """Observer: derives the latency figures from the pipeline's events."""

    arrival: ArrivalClock
    words: list[_WordRec] = field(default_factory=list)
    asr_first_token: list[float] = field(default_factory=list)
    asr_commit: list[float] = field(default_factory=list)
    mt_queue_wait: list[float] = field(default_factory=list)
    mt_compute: list[float] = field(default_factory=list)
    tts_first_audio: list[float] = field(default_factory=list)
    e2e_subtitle: list[float] = field(default_factory=list)
    e2e_dub: list[float] = field(default_factory=list)
    preview_subtitle: list[float] = field(default_factory=list)
    # per word of the final text: its first translation on screen (a first-pass piece covering
    # it, else the final itself) and its final; see docs/LATENCY.md
    e2e_first_display: list[float] = field(default_factory=list)
    e2e_final: list[float] = field(default_factory=list)
    timeline: list[tuple[float, str, float]] = field(default_factory=list)
    sentences: list[dict] = field(default_factory=list)

    # live playback: dub latency counts to when the audio left the device (DubPlayed), not to
    # when the TTS stage scheduled it
    dub_from_playback: bool = False
    dub_device_delay: list[float] = field(default_factory=list)

    def __post_init__(self):
        self._lock = threading.Lock()
        self._translations: dict[int, Translation] = {}
        self._seg_word_range: dict[int, tuple[int, int]] = {}
        self._open_sentence: dict | None = None
        self._shown: dict[int, tuple[float, float]] = {}  # first-pass seq → (src_end, shown at)
        self._final_at: dict[int, float] = {}  # final id → when it was shown
        self.finals = 0

    def __call__(self, event) -> None:
        with self._lock:
            self._on(event)

    def _on(self, ev) -> None:
        if isinstance(ev, CommittedWords):
            for w, seen in zip(ev.words, ev.first_seen_at):
                played = self.arrival.played_at(w.end)
                self.words.append(_WordRec(w.end, played, seen))
                self.asr_first_token.append(max(0.0, seen - played))
                self.asr_commit.append(max(0.0, ev.emitted_at - played))
        elif isinstance(ev, Translation) and not ev.preview:
            self._translations[ev.seq] = ev
            self.mt_queue_wait.append(max(0.0, ev.started_at - ev.queued_at))
            self.mt_compute.append(max(0.0, ev.emitted_at - ev.started_at))
            seg = ev.segment
            if seg is not None:
                self._shown[ev.seq] = (seg.src_end, ev.emitted_at)
                for w in seg.words:
                    lat = ev.emitted_at - self.arrival.played_at(w.end)
                    self.e2e_subtitle.append(max(0.0, lat))
                    self.timeline.append((ev.emitted_at, "e2e_subtitle", max(0.0, lat)))
                self._sentence_words(ev, seg)
        elif isinstance(ev, FinalSentence):
            self._final(ev)
        elif isinstance(ev, DubChunk) and ev.first_of_segment and not ev.skipped:
            # two passes: the dub speaks finals, and a chunk's seq is its final's id
            text_at = (self._final_at.get(ev.seq) if self.finals else
                       getattr(self._translations.get(ev.seq), "emitted_at", None))
            if text_at is not None:
                self.tts_first_audio.append(max(0.0, ev.ready_at - text_at))
            if not self.dub_from_playback:
                self._dub(ev.start_at, ev.src_end)
        elif isinstance(ev, DubPlayed) and ev.first_of_segment and self.dub_from_playback:
            self._dub(ev.played_at, ev.src_end)
            self.dub_device_delay.append(max(0.0, ev.played_at - ev.scheduled_at))

    def _final(self, ev: FinalSentence) -> None:
        self.finals += 1
        self._final_at[ev.id] = ev.final_at
        shown = [self._shown.pop(s) for s in ev.covers if s in self._shown]
        ends = [w.end for w in ev.words] or [ev.src_end]
        for end in ends:
            played = self.arrival.played_at(end)
            # the first piece on screen that reached this word (pieces end at or after it)
            first = min((at for piece_end, at in shown if piece_end >= end - 0.15), default=ev.final_at)
            first = min(first, ev.final_at)
            self.e2e_first_display.append(max(0.0, first - played))
            lat = max(0.0, ev.final_at - played)
            self.e2e_final.append(lat)
            self.timeline.append((ev.final_at, "e2e_final", lat))

    def _dub(self, at: float, src_end: float) -> None:
        lat = at - self.arrival.played_at(src_end)
        self.e2e_dub.append(max(0.0, lat))
        self.timeline.append((at, "e2e_dub", max(0.0, lat)))

    def _sentence_words(self, tr: Translation, seg: Segment) -> None:
        s = self._open_sentence
        if s is None:
            s = self._open_sentence = {"src_start": seg.src_start, "delays": [], "target": ""}
        start_played = self.arrival.played_at(s["src_start"])
        for _ in tr.target.split():
            s["delays"].append(max(0.0, tr.emitted_at - start_played))
        s["target"] = (s["target"] + " " + tr.target).strip()
        s["src_end"] = seg.src_end
        if seg.sentence_end:
            self.sentences.append(s)
            self._open_sentence = None

    def simul_eval(self) -> dict:
        sents = list(self.sentences) + ([self._open_sentence] if self._open_sentence else [])
        als, laals = [], []
        for s in sents:
            if not s.get("delays"):
                continue
            al, laal = average_lagging(s["delays"], s["src_end"] - s["src_start"])
            als.append(al)
            laals.append(laal)
        return {
            "AL_ms": round(float(np.mean(als)), 1) if als else None,
            "LAAL_ms": round(float(np.mean(laals)), 1) if laals else None,
            "sentences": len(als),
        }

    def summary(self) -> dict:
        with self._lock:
            return {
                "asr_first_token": percentiles(self.asr_first_token),
                "asr_commit": percentiles(self.asr_commit),
                "mt_queue_wait": percentiles(self.mt_queue_wait),
                "mt_compute": percentiles(self.mt_compute),
                "tts_first_audio": percentiles(self.tts_first_audio),
                "e2e_subtitle": percentiles(self.e2e_subtitle),
                # without a second pass the pieces are what stays: first display and final alike
                "e2e_first_display": percentiles(self.e2e_first_display if self.finals else self.e2e_subtitle),
                "e2e_final": percentiles(self.e2e_final if self.finals else self.e2e_subtitle),
                "e2e_dub": percentiles(self.e2e_dub),
                **({"dub_device_delay": percentiles(self.dub_device_delay)} if self.dub_from_playback else {}),
            }
