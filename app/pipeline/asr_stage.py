"""The recognition worker: a thread around a ``Recognizer`` that reads the audio ring as it
fills, slows its steps down when the stages after it fall behind, and publishes what each step
gives (committed words, segments for translation, the tentative tail for previews)."""

from __future__ import annotations

from app.core.audio import SR
from app.pipeline.messages import CommittedWords, Control, Segment, TentativeText
from app.pipeline.protocols import ASRBackend, VADBackend
from app.pipeline.queues import BoundedQueue, PriorityGate
from app.pipeline.recognizer import ASRConfig, Recognizer, Step
from app.pipeline.ringbuffer import AudioRing
from app.pipeline.segmenter import Segmenter
from app.pipeline.stage import Stage


class ASRStage(Stage):
    """Streaming recognition over a sliding window with LocalAgreement-2 commits."""

    def __init__(self, ring: AudioRing, asr: ASRBackend, vad: VADBackend | None, segmenter: Segmenter,
                 seg_out: BoundedQueue, preview_out, cfg: ASRConfig, bus, clock,
                 gate: PriorityGate | None = None, accel: str = "numpy"):
        super().__init__("asr", bus, clock, gate)
        self.ring, self.cfg = ring, cfg
        self.seg_out, self.preview_out = seg_out, preview_out
        self.recognizer = Recognizer(asr, vad, cfg, segmenter, ring=ring, now=clock.now, accel=accel,
                                     call=self.watched)
        self.step_s = cfg.step_s
        self.slowed = False
        # the second pass is behind: steps this many times longer (fewer first-pass decodes)
        self.thin_factor = 1.0
        self.thinned_s = 0.0  # time spent thinned
        self._thinned_since: float | None = None
        self._thin_by: set[str] = set()
        self._sent_seq = -1  # the last segment handed to MT (a replayed step does not resend it)
        self.superseded = None  # two passes: (src_start, src_end) -> True where a final came first

    # the recogniser's backend: the degradation policy swaps it mid-session, and the
    # recogniser reads it at each step
    @property
    def asr(self) -> ASRBackend:
        return self.recognizer.asr

    @asr.setter
    def asr(self, backend: ASRBackend) -> None:
        self.recognizer.asr = backend

    @property
    def vad(self) -> VADBackend | None:
        return self.recognizer.vad

    @property
    def policy(self):
        return self.recognizer.policy

    @property
    def segmenter(self) -> Segmenter:
        return self.recognizer.segmenter

    @property
    def window_start(self) -> int:
        return self.recognizer.window_start

    @property
    def cursor(self):
        """Samples recognised so far, and ``overruns``: how often unread audio was overwritten."""
        return self.recognizer.cursor

    @property
    def steps(self) -> int:
        return self.recognizer.steps

    # -- control ------------------------------------------------------------------------------
    def _handle_control(self) -> None:
        for msg in self.control.drain():
            if msg.kind is Control.SLOW_DOWN:
                self.step_s = min(self.cfg.max_step_s, self.step_s * 2)
                self.slowed = True
                self.metric("asr_step_s", self.step_s, reason=msg.reason)
            elif msg.kind is Control.RESUME_NORMAL:
                self.step_s = self.cfg.step_s
                self.slowed = False
                self.metric("asr_step_s", self.step_s, reason=msg.reason)
            elif msg.kind in (Control.THIN, Control.UNTHIN):
                # thinned while anyone (the second pass, the policy) asks; each undoes only its own
                (self._thin_by.add if msg.kind is Control.THIN else self._thin_by.discard)(msg.by)
                if self._thin_by and self._thinned_since is None:
                    self.thin_factor = 2.0
                    self._thinned_since = self.clock.now()
                elif not self._thin_by and self._thinned_since is not None:
                    self.thin_factor = 1.0
                    self.thinned_s += self.clock.now() - self._thinned_since
                    self._thinned_since = None
                else:
                    continue
                self.metric("asr_step_s", self.effective_step_s, reason=msg.reason)

    @property
    def effective_step_s(self) -> float:
        return min(self.cfg.max_step_s, self.step_s * self.thin_factor)

    # -- main loop ----------------------------------------------------------------------------
    def loop(self) -> None:
        rec = self.recognizer
        while not self.cancelled.is_set():
            self._handle_control()
            target = rec.processed + int(self.effective_step_s * SR)
            self.ring.wait_for(target, timeout=0.05)
            self._handle_control()
            written = self.ring.written
            final = self.ring.closed and written <= target
            if written < target and not final:
                continue
            if self.gate is not None:
                self.gate.wait_clear(timeout=1.0)
                written = self.ring.written
            if self.cancelled.is_set():
                break
            upto = written if (self.cfg.catch_up or final) else min(written, target)
            t0 = self.clock.now()
            for step in rec.process(upto, final):
                self._publish(step)
            dt = self.clock.now() - t0
            self.busy_s += dt
            timings = getattr(rec.asr, "last_timings", None) or {}
            self.metric("asr_step_ms", dt * 1000, **{k: f"{v:.0f}" for k, v in timings.items()})
            if final:
                self._publish(rec.flush())
                break
        self.seg_out.close()

    def recover(self) -> str:
        return self.recognizer.rollback()

    def _publish(self, step: Step) -> None:
        if step.committed:
            self.bus.publish(CommittedWords(tuple(step.committed), tuple(step.first_seen), step.at,
                                            step.pause_after))
        for seg in step.segments:
            self._send(seg)
        if step.tentative is not None:
            ev = TentativeText(tuple(step.tentative), step.pending_text, step.at)
            self.bus.publish(ev)
            if step.tentative and self.preview_out is not None:
                self.preview_out.put(ev)

    def _send(self, seg: Segment) -> None:
        if seg.seq <= self._sent_seq:  # a step replayed after a restart: already with MT
            return
        self._sent_seq = seg.seq
        if self.superseded is not None:  # two passes: a piece a final already holds is not shown
            with self.bus.held():
                if self.superseded(seg.src_start, seg.src_end):
                    return
                self.bus.publish(seg)
        else:
            self.bus.publish(seg)
        self.seg_out.put(seg)
        self.metric("mt_queue_depth", len(self.seg_out))
