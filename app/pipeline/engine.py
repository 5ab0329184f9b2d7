"""Wiring of the streaming pipeline (and the serial cascade used for comparison)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from app.core.audio import SR
from app.pipeline.asr_stage import ASRStage
from app.pipeline.coverage import VoicedLog, coverage
from app.pipeline.gate import Hysteresis
from app.pipeline.final_stage import FinalConfig, FinalStage, FirstPassLog
from app.pipeline.latency import ArrivalClock, LatencyTracker
from app.pipeline.messages import (
    CommittedWords,
    DubChunk,
    FinalSentence,
    Segment,
    Translation,
)
from app.pipeline.mt_stage import LatestValue, MTConfig, MTStage
from app.pipeline.protocols import ASRBackend, MTBackend, TTSBackend, VADBackend, Word
from app.pipeline.queues import BoundedQueue, FullPolicy, MonotonicClock, PriorityGate
from app.pipeline.recognizer import ASRConfig
from app.pipeline.record import SessionRecord, erased_chars, final_dict  # noqa: F401 (re-exported)
from app.pipeline.ringbuffer import AudioRing
from app.pipeline.segmenter import Segmenter, SegmenterConfig
from app.pipeline.shown import ShownText
from app.pipeline.supervisor import Supervisor, SupervisorConfig
from app.pipeline.tts_stage import TTSConfig, TTSStage, clauses

log = logging.getLogger("relay.pipeline")
TRACE = 5  # the log level below DEBUG (app/obs/logs.py names it)


class PipelineError(RuntimeError):
    pass


class EventBus:
    """Observers see every event, one at a time, in publish order (calls are serialised).
    ``transform``: what observers see of each event (app/pipeline/shown.py: the session's text
    filters); it may be set later (None: the events as published)."""

    def __init__(self, transform: Callable | None = None):
        self.transform = transform
        self._observers: list[Callable] = []
        self._lock = threading.RLock()
        self.failures: list[tuple[str, BaseException]] = []
        self.on_failure: list[Callable[[], None]] = []

    def held(self):
        """The publish lock, for a check-then-publish that no other publisher may interleave."""
        return self._lock

    def subscribe(self, fn: Callable) -> None:
        with self._lock:
            self._observers.append(fn)

    def publish(self, event) -> None:
        transform = self.transform
        if transform is not None:
            try:
                event = transform(event)
            except Exception as e:  # a filter must never take a stage down either
                log.error("event transform failed on %s: %s: %s", type(event).__name__, type(e).__name__, e)
        with self._lock:
            for fn in list(self._observers):
                try:
                    fn(event)
                except Exception as e:  # an observer must never take a stage down
                    log.error("observer failed on %s: %s: %s", type(event).__name__, type(e).__name__, e)
                    log.debug("observer failure", exc_info=True)

    def fail(self, stage: str, err: BaseException) -> None:
        with self._lock:
            self.failures.append((stage, err))
            callbacks = list(self.on_failure)
        for cb in callbacks:  # unblock every other stage so the session ends instead of hanging
            cb()


@dataclass
class PipelineConfig:
    asr: ASRConfig = field(default_factory=ASRConfig)
    mt: MTConfig = field(default_factory=MTConfig)
    tts: TTSConfig = field(default_factory=TTSConfig)
    segmenter: SegmenterConfig = field(default_factory=SegmenterConfig)
    final: FinalConfig = field(default_factory=FinalConfig)  # the second pass (streaming only)
    ring_seconds: float = 120.0
    seg_queue: int = 16
    tts_queue: int = 16
    priority_gate: bool = True  # recognition yields to MT and the first TTS clause
    supervision: SupervisorConfig = field(default_factory=SupervisorConfig)
    # the session's text filters (the profanity setting): what every observer sees and the dub says
    shown: ShownText | None = None


class LocalEngine:
    """A RunningSession (``app.pipeline.protocols``) on this machine's models. What both ways of
    running share: the event bus, the audio ring, arrival stamps, the latency tracker and the
    in-memory session record; subclasses provide ``threads`` and ``_stop_workers``."""

    kind = "local"

    def __init__(self, cfg: PipelineConfig | None, clock, finals: bool = False):
        self.cfg = cfg or PipelineConfig()
        self.clock = clock or MonotonicClock()
        self.shown = self.cfg.shown or ShownText()
        self.bus = EventBus(self.shown if self.shown else None)
        self.arrival = ArrivalClock()
        self.tracker = LatencyTracker(self.arrival)
        self.record = SessionRecord(finals)
        self.voiced = VoicedLog()  # what the VAD took for speech, for coverage
        self.bus.subscribe(self.tracker)
        self.bus.subscribe(self.record)
        self.ring = AudioRing(int(self.cfg.ring_seconds * SR))
        self.started_at = self.finished_at = 0.0
        self.first_audio_at: float | None = None
        self.feeder_waiting = False  # a file feeder is waiting for room in the ring (--fast)

    threads: list[threading.Thread]

    def coverage(self) -> dict:
        """How much of the voiced audio produced words that stayed (app.pipeline.coverage)."""
        return coverage(self.voiced.spans(), self.record.word_spans())

    def start(self) -> None:
        self.started_at = self.clock.now()
        for t in self.threads:
            t.start()

    def _room_for(self, n: int) -> bool:
        return True

    def push_audio(self, samples: np.ndarray, wait_if_full: bool = False, at: float | None = None) -> None:
        """Called by the capture or the file feeder with 16 kHz mono float32; ``at`` is when
        the block's last sample was captured (on this pipeline's clock), default now."""
        if wait_if_full:  # fast mode: never overwrite audio that has not been read yet
            while not self._room_for(len(samples)) and any(t.is_alive() for t in self.threads):
                self.feeder_waiting = True
                threading.Event().wait(0.01)
            self.feeder_waiting = False
        now = self.clock.now() if at is None else min(at, self.clock.now())
        if self.first_audio_at is None:
            self.first_audio_at = now
        self.ring.write(samples)
        self.arrival.record(self.ring.written, now)
        if log.isEnabledFor(TRACE):  # per-block arrival stamps, for debugging timing only
            log.log(TRACE, "audio block", extra={"fields": {"end_sample": self.ring.written, "at": round(now, 4)}})

    def finish(self, timeout: float = 600.0) -> None:
        """End of input: what is left is committed, translated and spoken, then threads stop."""
        self.ring.close()
        for t in self.threads:
            t.join(timeout)
        self.finished_at = self.clock.now()
        alive = [t.name for t in self.threads if t.is_alive()]
        if alive:
            raise PipelineError(f"stage(s) did not stop in {timeout:.0f} s: {', '.join(alive)}")
        if self.bus.failures:
            stage, err = self.bus.failures[0]
            raise PipelineError(f"{stage} stage failed: {err}")

    def failed(self) -> bool:
        return bool(self.bus.failures)

    def abort(self, timeout: float = 5.0) -> None:
        """Stop now, dropping what is in flight: the inputs close, every worker leaves at its next
        unit of work and is waited for up to ``timeout`` in all (a model call cannot be cut
        short). Safe to call more than once, before start() and after finish()."""
        self._stop_workers()
        deadline = time.monotonic() + timeout
        me = threading.current_thread()
        for t in self.threads:
            if t is not me and (not isinstance(t, threading.Thread) or t.ident is not None):
                t.join(max(0.0, deadline - time.monotonic()))

    def _stop_workers(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class StreamingPipeline(LocalEngine):
    """ASR → MT → TTS, each in its own thread, joined by bounded queues."""

    def __init__(self, asr: ASRBackend, mt: MTBackend | None, tts: TTSBackend | None,
                 vad: VADBackend | None, cfg: PipelineConfig | None = None, clock=None,
                 word_boundaries=None, accel: str = "numpy", final_vad: VADBackend | None = None):
        cfg = cfg or PipelineConfig()
        two_pass = cfg.final.enabled and final_vad is not None
        super().__init__(cfg, clock, finals=two_pass)
        self.first_pass = FirstPassLog() if two_pass else None
        if self.first_pass is not None:
            self.bus.subscribe(self.first_pass)
        self.seg_q: BoundedQueue = BoundedQueue(self.cfg.seg_queue, FullPolicy.BLOCK, "segments")
        self.preview = LatestValue() if mt is not None and self.cfg.mt.previews else None
        self.tts_q: BoundedQueue | None = (
            BoundedQueue(self.cfg.tts_queue, FullPolicy.BLOCK, "translations") if tts is not None else None
        )
        self.segmenter = Segmenter(self.cfg.segmenter, self.clock.now, word_boundaries)
        self.gate = PriorityGate() if self.cfg.priority_gate else None
        self.asr_stage = ASRStage(self.ring, asr, vad, self.segmenter, self.seg_q, self.preview,
                                  self.cfg.asr, self.bus, self.clock, self.gate, accel)
        self.asr_stage.recognizer.voiced = self.voiced
        # two passes: the dub speaks the finals; else the first pass's pieces
        self.mt_stage = MTStage(mt, self.seg_q, self.preview, None if two_pass else self.tts_q,
                                self.asr_stage.control, self.cfg.mt, self.bus, self.clock, self.gate)
        self.final_stage = (
            FinalStage(self.ring, asr, mt, final_vad, self.first_pass, self.tts_q, self.asr_stage.control,
                       self.cfg.final, self.bus, self.clock, lang=self.cfg.segmenter.lang,
                       first_done=lambda: not self.mt_stage.is_alive(),
                       gate=self.gate, input_blocked=lambda: self.feeder_waiting)
            if two_pass else None
        )
        if self.first_pass is not None:  # pieces a final overtook never reach the screen
            self.asr_stage.superseded = self.mt_stage.superseded = self.first_pass.superseded
        self.tts_stage = (
            TTSStage(tts, self.tts_q, (self.final_stage or self.mt_stage).control, self.cfg.tts, self.bus,
                     self.clock, self.arrival.played_at, self.gate, text_filter=self.shown.target)
            if tts is not None else None
        )
        self.stages = [s for s in (self.asr_stage, self.mt_stage, self.final_stage, self.tts_stage)
                       if s is not None]
        self.threads = self.stages
        # a stage that raises or stalls gets a fresh worker, within a restart budget
        self.supervisor = Supervisor(self.stages, self.bus, self.clock, self.cfg.supervision)
        self.bus.on_failure.append(self._close_inputs)

    def start(self) -> None:
        super().start()
        self.supervisor.start()

    def finish(self, timeout: float = 600.0) -> None:
        try:
            super().finish(timeout)
        finally:
            self.supervisor.stop()

    def _room_for(self, n: int) -> bool:
        oldest = self.asr_stage.window_start
        if self.final_stage is not None:
            oldest = min(oldest, self.final_stage.read_from)
        return self.ring.written + n - oldest <= self.ring.capacity * 0.9

    def _close_inputs(self) -> None:
        """A stage failed: every other stage's input ends, so the session ends instead of hanging."""
        self.ring.close()
        self.seg_q.close()
        if self.tts_q is not None:
            self.tts_q.close()

    def _stop_workers(self) -> None:
        for s in self.stages:
            s.cancel()
        self._close_inputs()
        self.supervisor.stop()

    def stage_stats(self) -> dict:
        out = {}
        for s in self.stages:
            out[s.name] = {"busy_s": round(s.busy_s, 3), "restarts": s.restarts}
        out["asr"].update(steps=self.asr_stage.steps, overruns=self.asr_stage.cursor.overruns,
                          confident_commits=self.asr_stage.policy.confident_commits,
                          yielded_to_mt=self.gate.waits if self.gate else 0)
        out["mt"].update(translations=self.mt_stage.translations,
                         previews_coalesced=self.preview.coalesced if self.preview else 0)
        out["asr"].update(thinned_s=round(self.asr_stage.thinned_s, 3))
        if self.final_stage is not None:
            f = self.final_stage
            out["final"].update(finals=f.finals, kept_first_pass=f.failures,
                                first_pass_overtaken=self.first_pass.superseded_pieces,
                                max_backlog_s=round(f.max_backlog_s, 2),
                                lead_in_used=f.context["used"], lead_in_fallback=f.context["fallback"],
                                lead_in_rechecked=f.context["rechecked"],
                                sparse_rechecked=f.sparse["rechecked"], sparse_replaced=f.sparse["replaced"],
                                early_used=f.early["used"], early_wasted=f.early["wasted"],
                                narrow_band=f.narrow_band,
                                **{f"{k}_s": round(v, 3) for k, v in f.time_s.items()})
            if f.llm is not None:  # finals translated by the LLM, and by the pair's MT past the budget
                out["final"].update(final_mt=getattr(f.llm, "name", "llm"), final_mt_llm=f.llm_stats["llm"],
                                    final_mt_fallback=f.llm_stats["fallback"],
                                    final_mt_paused=f.llm_stats["paused"],
                                    final_mt_failed=f.llm_stats["failed"],
                                    final_mt_rejected=f.llm_stats["rejected"],
                                    final_mt_llm_s=round(f.llm_stats["llm_s"], 3),
                                    final_mt_budget_s=f.llm_budget_s)
        if self.tts_stage is not None:
            out["tts"].update(chunks=self.tts_stage.chunks, skipped=self.tts_stage.skipped)
        out["queues"] = {"segments_max_depth": self.seg_q.max_depth,
                         "translations_max_depth": self.tts_q.max_depth if self.tts_q else 0}
        out["supervisor"] = self.supervisor.summary()
        return out


class SerialCascade(LocalEngine):
    """The classic cascade: wait for the end of each utterance (VAD), then recognise it whole,
    translate it whole and synthesise it whole, one after the other, in one worker."""

    def __init__(self, asr: ASRBackend, mt: MTBackend | None, tts: TTSBackend | None,
                 vad: VADBackend, cfg: PipelineConfig | None = None, clock=None, word_boundaries=None,
                 accel: str = "numpy", final_vad: VADBackend | None = None):
        super().__init__(cfg, clock, finals=True)
        self.asr, self.mt, self.tts, self.vad = asr, mt, tts, vad
        self.segmenter = Segmenter(self.cfg.segmenter, self.clock.now)
        self.threads = [threading.Thread(target=self._run, name="serial", daemon=True)]
        self._cancelled = threading.Event()
        self._read_pos = 0
        self._dub_end = 0.0
        self._seq = 0
        self.utterances = 0
        self.busy_s = 0.0

    def _room_for(self, n: int) -> bool:
        return self.ring.written + n - self._read_pos <= self.ring.capacity * 0.9

    def _stop_workers(self) -> None:
        self._cancelled.set()
        self.ring.close()

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as e:
            log.exception("serial cascade failed")
            self.bus.fail("serial", e)

    def _loop(self) -> None:
        fs = self.vad.frame_samples
        pos = 0
        utt_start = None
        last_speech = 0
        pause = int(self.cfg.asr.pause_s * SR)
        gate = Hysteresis(self.cfg.asr.vad_threshold, self.cfg.asr.vad_off_threshold)
        while not self._cancelled.is_set():
            have = self.ring.wait_for(pos + fs, timeout=0.05)
            if not have and not self.ring.closed:
                continue
            end = (self.ring.written // fs) * fs
            if end > pos:
                chunk = np.ascontiguousarray(self.ring.read(pos, end))
                probs = self.vad.process(chunk)
                speech = gate(probs, chunk)
                self.voiced.add(pos, speech, fs)
                for i in range(len(probs)):
                    t = pos + i * fs
                    if speech[i]:
                        if utt_start is None:
                            utt_start = max(0, t - int(0.2 * SR))
                        last_speech = t + fs
                    elif utt_start is not None and t + fs - last_speech >= pause:
                        self._utterance(utt_start, min(last_speech + int(0.25 * SR), t + fs))
                        utt_start = None
                pos = end
                self._read_pos = utt_start if utt_start is not None else pos
            if self.ring.closed and self.ring.written - pos < fs:
                if utt_start is not None:
                    self._utterance(utt_start, self.ring.written)
                break

    def _utterance(self, start: int, end: int) -> None:
        if self._cancelled.is_set():
            return
        t0 = self.clock.now()
        try:
            self._utterance_inner(start, end)
        finally:
            self.busy_s += self.clock.now() - t0

    def _utterance_inner(self, start: int, end: int) -> None:
        self.utterances += 1
        audio = np.array(self.ring.read(start, end))
        words = self.asr.transcribe_utterance(audio)
        off = start / SR
        words = [Word(w.text, w.start + off, w.end + off, w.probability) for w in words]
        now = self.clock.now()
        if not words:
            return
        self.bus.publish(CommittedWords(tuple(words), tuple(now for _ in words), now, True))
        seg = Segment(self._seq, tuple(words), "pause", True, now, self.segmenter.cfg.lang)
        self._seq += 1
        self.bus.publish(seg)
        started = self.clock.now()
        target = self.mt.translate(seg.text, beam_size=self.cfg.mt.beam_size) if self.mt else seg.text
        done = self.clock.now()
        tr = Translation(seg.seq, seg.text, target, seg.src_start, seg.src_end, done, False,
                         seg.emitted_at, started, seg)
        self.bus.publish(tr)
        # the whole utterance is this cascade's final: shown once, never revised
        self.bus.publish(FinalSentence(seg.seq, seg.words, seg.text, target, seg.src_start, seg.src_end, done,
                                       done, (seg.seq,), seg.text, target, "pause", False, started,
                                       getattr(self.mt, "name", "mt") if self.mt else ""))
        spoken = self.shown.target_text(target)  # the dub says what the screen shows
        if self.tts is None or not spoken.strip():
            return
        audio_parts = []
        for clause in clauses(spoken):
            audio_parts += list(self.tts.synthesize(clause))
        ready = self.clock.now()
        full = np.concatenate(audio_parts) if audio_parts else np.zeros(0, np.float32)
        start_at = max(ready, self._dub_end)
        self._dub_end = start_at + len(full) / self.tts.sample_rate
        self.bus.publish(DubChunk(seg.seq, full, self.tts.sample_rate, target, ready, start_at, True,
                                  seg.src_end))

    def stage_stats(self) -> dict:
        return {"serial": {"utterances": self.utterances, "busy_s": round(self.busy_s, 3)}}

