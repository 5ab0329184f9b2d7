"""The translation worker: committed segments are translated within their sentence, the
sentence's translation so far forced as the target prefix so subtitles never change backwards;
the tentative tail is previewed between segments."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from app.core.text import mixed_units, word_sep
from app.pipeline.messages import Control, ControlMessage, Segment, TentativeText, Translation
from app.pipeline.protocols import MTBackend
from app.pipeline.queues import BoundedQueue, Closed, ControlChannel, PriorityGate
from app.pipeline.stage import Stage


@dataclass
class MTConfig:
    beam_size: int = 4
    previews: bool = True
    preview_interval_s: float = 1.0  # previews compete with recognition for the CPU
    slow_high: int = 3  # input depth that sends SLOW_DOWN upstream
    slow_low: int = 1
    micro_batch: int = 8  # examples per batched call where a backend batches (the cloud server)


@dataclass(frozen=True)
class MTAdjust:
    """A settings change for the MT stage (from the degradation policy), applied by the stage's
    own thread between two translations; None leaves a setting as it is."""

    reason: str
    beam_size: int | None = None
    micro_batch: int | None = None
    compute_type: str | None = None


class LatestValue:
    """A one-slot mailbox: the newest tentative text replaces the previous one (coalesce)."""

    def __init__(self):
        self._item = None
        self._lock = threading.Lock()
        self.coalesced = 0

    def put(self, item) -> None:
        with self._lock:
            if self._item is not None:
                self.coalesced += 1
            self._item = item

    def take(self):
        with self._lock:
            item, self._item = self._item, None
            return item


class MTStage(Stage):
    """Translates committed segments within their sentence, extending the sentence's committed
    translation as ``target_prefix`` so subtitles never change backwards; previews the tentative tail."""

    def __init__(self, mt: MTBackend, seg_in: BoundedQueue, preview_in: LatestValue | None,
                 tts_out: BoundedQueue | None, upstream: ControlChannel, cfg: MTConfig, bus, clock,
                 gate: PriorityGate | None = None, speculation=None):
        super().__init__("mt", bus, clock, gate)
        # a SpeculationController: the sentence's latest full translation is the next call's draft
        self.speculation = speculation
        self.beam_size = cfg.beam_size
        self.micro_batch = cfg.micro_batch
        self._draft = ""
        self.mt, self.seg_in, self.preview_in, self.tts_out = mt, seg_in, preview_in, tts_out
        self.upstream, self.cfg = upstream, cfg
        self._sent_src = ""
        self._sent_tgt = ""
        self._slowed_upstream = False
        self._downstream_slow = False
        self._last_preview = -1e9
        self.translations = 0
        self.superseded = None  # two passes: (src_start, src_end) -> True where a final came first

    def _backpressure(self) -> None:
        depth = len(self.seg_in) + (len(self.tts_out) if self.tts_out is not None else 0)
        if depth >= self.cfg.slow_high and not self._slowed_upstream:
            self._slowed_upstream = True
            self.upstream.send(ControlMessage(Control.SLOW_DOWN, f"mt backlog {depth}"))
            self.metric("backpressure", 1, stage="mt")
        elif depth <= self.cfg.slow_low and self._slowed_upstream:
            self._slowed_upstream = False
            self.upstream.send(ControlMessage(Control.RESUME_NORMAL, "mt backlog drained"))
            self.metric("backpressure", 0, stage="mt")

    def loop(self) -> None:
        while not self.cancelled.is_set():
            for msg in self.control.drain():
                if isinstance(msg, MTAdjust):
                    self._adjust(msg)
                elif msg.kind is Control.SLOW_DOWN:
                    self._downstream_slow = True
                elif msg.kind is Control.RESUME_NORMAL:
                    self._downstream_slow = False
            seg = self.retake()  # the segment a replaced worker was translating
            if seg is None:
                try:
                    seg = self.seg_in.get(timeout=0.02)
                except Closed:
                    break
            self._backpressure()
            if seg is not None:
                self.in_flight = seg
                with self.urgent():
                    self._translate_segment(seg)
                self.in_flight = None
                continue
            if (self.preview_in is not None and self.cfg.previews and not self._downstream_slow
                    and self.clock.now() - self._last_preview >= self.cfg.preview_interval_s):
                ev = self.preview_in.take()
                if ev is not None and ev.words:
                    self._preview(ev)
        if self.tts_out is not None:
            self.tts_out.close()

    def recover(self) -> str:
        self._draft = ""  # the draft may belong to the call that failed
        seg = self.in_flight
        return f"segment {seg.seq} again" if seg is not None else "its input queue"

    def _adjust(self, msg: MTAdjust) -> None:
        if msg.beam_size is not None:
            self.beam_size = msg.beam_size
            self.metric("mt_beam", msg.beam_size, reason=msg.reason)
        if msg.micro_batch is not None:
            self.micro_batch = msg.micro_batch
            if hasattr(self.mt, "micro_batch"):
                self.mt.micro_batch = msg.micro_batch
            self.metric("mt_micro_batch", msg.micro_batch, reason=msg.reason)
        if msg.compute_type is not None and hasattr(self.mt, "set_compute_type"):
            note = self.mt.set_compute_type(msg.compute_type)
            self.metric("mt_compute_type_changed", 0 if note.startswith("no effect") else 1,
                        reason=msg.reason, result=note)

    def _mt(self, source: str, prefix: str, beam: int, stream: str) -> str:
        """One translation, speculative when a draft extends ``prefix`` and the controller agrees."""
        spec = self.speculation
        draft = self._draft
        if (spec is not None and draft and hasattr(self.mt, "translate_with_draft")
                and draft.startswith(prefix) and spec.should_draft(stream)):
            out, outcome = self.watched(self.mt.translate_with_draft, source, draft, target_prefix=prefix,
                                        beam_size=beam)
            spec.record(outcome, stream)
        else:
            out = self.watched(self.mt.translate, source, target_prefix=prefix, beam_size=beam)
        self._draft = out
        return out

    def _join(self, a: str, b: str) -> str:
        if not a:
            return b
        return a + word_sep(getattr(self.mt, "source_lang", "")) + b

    def _translate_segment(self, seg: Segment) -> None:
        if self.superseded is not None and self.superseded(seg.src_start, seg.src_end):
            # two passes: a final holding these words is out already; what follows starts afresh
            self._sent_src, self._sent_tgt, self._draft = "", "", ""
            return
        started = self.clock.now()
        src = self._join(self._sent_src, seg.text)
        prefix = _open_prefix(self._sent_tgt)
        full = self._mt(src, prefix, self.beam_size, "mt")
        new = _tail_after(full, prefix)
        if not any(c.isalnum() for c in new) and self._sent_tgt and mixed_units(seg.text) >= 2:
            # the model closed the sentence at the forced prefix: translate the piece on its own
            new = self.watched(self.mt.translate, seg.text, beam_size=self.beam_size).strip()
            full = (prefix + " " + new).strip()
            self._draft = full
        # a continuation that opens with a mark belongs to the previous piece: drop it here
        new = new.lstrip(".,;:!?。，；：！？ ")
        if not seg.sentence_end:
            new = _strip_sentence_end(new)
        now = self.clock.now()
        self.busy_s += now - started
        self.translations += 1
        tr = Translation(seg.seq, seg.text, new, seg.src_start, seg.src_end, now, False,
                         seg.emitted_at, started, seg)
        if seg.sentence_end:
            self._sent_src, self._sent_tgt, self._draft = "", "", ""
        else:
            self._sent_src, self._sent_tgt = src, full
        if self.superseded is not None:  # two passes: a final holding these words came first
            with self.bus.held():
                if self.superseded(seg.src_start, seg.src_end):
                    return
                self.bus.publish(tr)
        else:
            self.bus.publish(tr)
        if self.tts_out is not None and new.strip():
            self.tts_out.put(tr)

    def _preview(self, ev: TentativeText) -> None:
        started = self.clock.now()
        src = self._join(self._join(self._sent_src, ev.committed_tail), ev.text)
        prefix = _open_prefix(self._sent_tgt)
        full = self._mt(src, prefix, 1, "preview")
        now = self.clock.now()
        self.busy_s += now - started
        self._last_preview = now
        tail = _tail_after(full, prefix)
        w = ev.words
        self.bus.publish(Translation(-1, ev.text, tail, w[0].start, w[-1].end, now, True, started, started))


_SENT_PUNCT = ".!?。！？"


def _open_prefix(text: str) -> str:
    """A sentence's translation so far, without a closing mark, so the model continues it."""
    return text.strip().rstrip(_SENT_PUNCT).rstrip()


def _strip_sentence_end(text: str) -> str:
    t = text.strip()
    while t and t[-1] in _SENT_PUNCT and not t.endswith("..."):
        t = t[:-1].rstrip()
    return t


def _tail_after(full: str, prefix: str) -> str:
    if not prefix:
        return full.strip()
    if full.startswith(prefix):
        return full[len(prefix):].strip()
    return full.strip()  # the backend ignored the prefix; show what it produced
