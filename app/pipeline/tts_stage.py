"""The dub worker: each committed translation is synthesised clause by clause and laid on a
dub timeline that speeds up, and past a limit skips, when it lags the speaker."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from app.accel.features import frame_features
from app.pipeline.messages import Control, ControlMessage, DubChunk, Translation
from app.pipeline.protocols import TTSBackend
from app.pipeline.queues import BoundedQueue, Closed, ControlChannel, PriorityGate
from app.pipeline.stage import Stage


@dataclass
class TTSConfig:
    # dub lag (from the end of the source words to the dub's start) beyond this speeds speech up.
    # Against 2.5 s, with 4-character zh pieces the dub speaks ~10 % more words; zh_meeting,
    # 3 interleaved runs: dub p50 1186 vs 1500 ms, p95 2577 vs 3495 ms, ~88 % of it still at 1.0x
    catch_up_after_s: float = 1.5
    max_speed: float = 1.6
    skip_after_s: float = 8.0  # beyond this, skip a segment rather than drift ever later
    # a file read faster than real time (--fast) has no listener's clock: the dub's lag is then
    # measured on the source timeline, where the dub export places it (each segment's audio
    # from its source end, after the previous one). With the wall clock a 20 s file's dub lost
    # 3 of its 7 sentences to skipping (the file arrives in seconds, the dub takes its length),
    # and how many depended on the machine's load
    source_timeline: bool = False
    # silence a synthesised clause may keep before / after its speech (None: keep it all). The
    # voice pads each clause with 0-60 ms before and 110-210 ms after; on a nearly full dub
    # timeline that padding makes the next clause wait (docs/BENCHMARKS.md, dub trimming)
    keep_lead_s: float | None = 0.01
    keep_trail_s: float | None = 0.06


def speech_bounds(audio: np.ndarray, rate: int, floor_db: float = -40.0) -> tuple[int, int]:
    """First and one-past-last sample of the 5 ms frames whose RMS is within ``floor_db`` of the
    loudest frame's; (0, 0) for silence."""
    hop = max(1, rate // 200)
    rms_db, _ = frame_features(audio, hop, backend="numpy")
    if not len(rms_db):
        return (0, 0)
    loud = np.nonzero(rms_db > max(float(rms_db.max()) + floor_db, -80.0))[0]  # -80 dB: RMS 1e-4
    if not len(loud):
        return (0, 0)
    return int(loud[0] * hop), int(min(len(audio), (loud[-1] + 1) * hop))


def trim_clause(chunks, rate: int, keep_lead_s: float | None, keep_trail_s: float | None):
    """Yield a clause's audio chunks with the silence before the first one's speech and after the
    last one's cut down to the given margins. Chunks pass through one behind, so the last is known
    without waiting for the whole clause; an all-silent chunk at either end is dropped."""
    pending = None
    first = True
    for audio in chunks:
        if first:
            if keep_lead_s is not None:
                a, b = speech_bounds(audio, rate)
                if b == 0:
                    continue  # silence before any speech
                audio = audio[max(0, a - int(keep_lead_s * rate)):]
            first = False
        if pending is not None:
            yield pending
        pending = audio
    if pending is not None:
        if keep_trail_s is not None:
            a, b = speech_bounds(pending, rate)
            pending = pending[: min(len(pending), b + int(keep_trail_s * rate))]
        if len(pending):
            yield pending


_CLAUSE_SPLIT = re.compile(r"(?<=[,;:.!?])\s+")


def clauses(text: str) -> list[str]:
    parts = [p.strip() for p in _CLAUSE_SPLIT.split(text) if p.strip()]
    # very short clauses sound choppy: glue them to the next one
    out: list[str] = []
    for p in parts:
        if out and len(out[-1].split()) < 3:
            out[-1] = out[-1] + " " + p
        else:
            out.append(p)
    return out


class TTSStage(Stage):
    """Synthesises each committed translation clause by clause and lays the audio on a dub
    timeline; when the dub lags the speaker, it speeds up and, past a limit, skips."""

    def __init__(self, tts: TTSBackend, tr_in: BoundedQueue, upstream: ControlChannel, cfg: TTSConfig,
                 bus, clock, played_at, gate: PriorityGate | None = None,
                 text_filter: Callable[[str], str] | None = None):
        super().__init__("tts", bus, clock, gate)
        self.tts, self.tr_in, self.upstream, self.cfg = tts, tr_in, upstream, cfg
        self.text_filter = text_filter  # the session's target-text filter: the dub says what the screen shows
        self.played_at = played_at
        self.dub_end = 0.0  # wall time at which the dub timeline is free
        self.src_dub_end = 0.0  # source time at which it is free (TTSConfig.source_timeline)
        self.skipped = 0
        self.chunks = 0
        self._slowed = False

    def loop(self) -> None:
        resumed = self.retake()  # (translation, clause index, nothing spoken yet) of a replaced worker
        if resumed is not None:
            self._speak(*resumed)
        self._loop()

    def _loop(self) -> None:
        while not self.cancelled.is_set():
            try:
                tr = self.tr_in.get(timeout=0.05)
            except Closed:
                break
            depth = len(self.tr_in)
            if depth >= 3 and not self._slowed:
                self._slowed = True
                self.upstream.send(ControlMessage(Control.SLOW_DOWN, f"tts backlog {depth}"))
            elif depth <= 1 and self._slowed:
                self._slowed = False
                self.upstream.send(ControlMessage(Control.RESUME_NORMAL, "tts backlog drained"))
            if tr is not None:
                self._speak(tr)

    def recover(self) -> str:
        if self.in_flight is None:
            return "its input queue"
        tr, clause, _ = self.in_flight
        return f"clause {clause + 1} of segment {tr.seq}"

    def _speak(self, tr: Translation, from_clause: int = 0, first: bool = True) -> None:
        text = self.text_filter(tr.target) if self.text_filter is not None and tr.target else tr.target
        now = self.clock.now()
        if self.cfg.source_timeline:
            lag = max(0.0, self.src_dub_end - tr.src_end)
        else:
            lag = max(now, self.dub_end) - self.played_at(tr.src_end)
        if from_clause == 0 and lag > self.cfg.skip_after_s:
            self.skipped += 1
            self.bus.publish(DubChunk(tr.seq, np.zeros(0, np.float32), self.tts.sample_rate, text,
                                      now, now, True, tr.src_end, 1.0, True))
            self.metric("dub_skipped", self.skipped)
            return
        speed = 1.0
        if lag > self.cfg.catch_up_after_s:
            speed = min(self.cfg.max_speed, 1.0 + (lag - self.cfg.catch_up_after_s) / 4.0)
        for i, clause in enumerate(clauses(text)):
            if i < from_clause:
                continue  # spoken before the restart
            if self.cancelled.is_set():
                break
            # a clause that failed before any of its audio came out is spoken again; one cut
            # off mid-way is skipped (re-speaking it would repeat what was heard)
            self.in_flight = (tr, i, first)
            t0 = self.clock.now()
            rate, cfg = self.tts.sample_rate, self.cfg
            if first and self.gate is not None:  # the first audio of a segment is latency-critical
                with self.urgent():
                    chunks = list(trim_clause(self.watched(self.tts.synthesize, clause, speed=speed), rate,
                                              cfg.keep_lead_s, cfg.keep_trail_s))
            else:
                chunks = trim_clause(self.watched(self.tts.synthesize, clause, speed=speed), rate,
                                     cfg.keep_lead_s, cfg.keep_trail_s)
            for audio in chunks:
                ready = self.clock.now()
                start = max(ready, self.dub_end)
                dur = len(audio) / self.tts.sample_rate
                self.dub_end = start + dur
                self.src_dub_end = max(self.src_dub_end, tr.src_end) + dur
                self.chunks += 1
                self.bus.publish(DubChunk(tr.seq, audio, self.tts.sample_rate, clause, ready, start,
                                          first, tr.src_end, speed))
                first = False
                self.in_flight = (tr, i + 1, False)
            self.busy_s += self.clock.now() - t0
        self.in_flight = None
