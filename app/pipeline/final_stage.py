"""The second pass: each whole sentence recognised again and translated whole.

The first pass (ASR → MT in pieces) shows words at once; this worker finds where sentences end in
the same audio (a VAD pause, as the serial cascade does; in a long stretch of speech, a sentence or
clause mark the first pass committed; past a hard cap, the quietest moment), recognises that span
whole with a wider beam and the previous finals as prompt, translates it whole, and publishes a
``FinalSentence`` that replaces the first-pass pieces of that span on screen, in exports and in the
dub (the dub is made from finals only: they go to the TTS queue).

CPU: on two cores the second pass competes with the first. When its backlog grows it asks the
recogniser to take longer steps (``Control.THIN``) rather than fall behind; a final is never dropped.
If its audio is gone (the ring overwrote it) or a model call fails, the span keeps the first pass's
text, marked ``failed``, and the session goes on.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

import numpy as np

from app.core.audio import SR
from app.core.text import SENTENCE_END, is_ideograph, norm, unspaced
from app.pipeline.gate import Hysteresis
from app.pipeline.messages import (Control, ControlMessage, FinalSentence, Segment, Translation,
                                   join_words)
from app.pipeline.protocols import ASRBackend, MTBackend, VADBackend, Word
from app.pipeline.queues import BoundedQueue, Closed, ControlChannel
from app.pipeline.repeats import SentenceRepeats
from app.pipeline.ringbuffer import AudioRing, Overrun
from app.pipeline.stability import skip_prefix, split_prefix
from app.pipeline.stage import Stage, Superseded

log = logging.getLogger("relay.pipeline")


@dataclass
class FinalConfig:
    enabled: bool = True
    pause_s: float = 0.5  # VAD silence that ends a sentence (the serial cascade's)
    vad_threshold: float = 0.3  # speech starts above this probability (app.pipeline.gate) ...
    vad_off_threshold: float = 0.15  # ... and goes on until it falls below this
    lead_s: float = 0.2  # audio kept before the first speech frame
    tail_s: float = 0.25  # and after the last
    mark_after_s: float = 6.0  # longer than this: finalise at a first-pass sentence/clause mark
    min_mark_s: float = 2.0  # never cut a piece shorter than this at a mark
    hard_max_s: float = 12.0  # longer than this and still no mark: cut at the quietest moment
    asr_beam: int = 5  # whole-sentence recognition, as an offline decode
    mt_beam: int = 4  # whole-sentence translation, as --serial
    prompt_finals: int = 2  # previous finals given to the recogniser as context
    # ... when the last of them ended at most this long before the sentence: after a long silence
    # (or music, applause) the talk has moved on, and a prompt that is the very sentence about to
    # be heard makes Whisper skip or garble it (a recording's refrain, minutes apart)
    prompt_gap_s: float = 30.0
    # the previous final's last seconds of speech are decoded again before the sentence, their
    # text forced (a backend with ``transcribe_continued``): the model hears what led up to the
    # sentence, as in a whole-file decode, instead of starting cold on its first word
    # ("Ask not / Like your country": "what" lost at a pause; "an old supposed young man" for
    # "an ill-disposed young man"). 0: off
    context_s: float = 5.0
    context_gap_s: float = 4.0  # no lead-in after a longer pause
    # the lead-in's text is forced without the sentence mark it ended on: the pause that closed
    # the previous final is not always a sentence's end, and a forced "." or "!" makes the model
    # start a new sentence ("And not! / Like your country can do for you" for "ask not what your
    # country can do for you", split by applause)
    open_lead_in: bool = True
    spill_s: float = 0.3  # a continued decode whose new words mostly end this far inside the lead-in is not used
    # a decode holding less than this share of the text the first pass heard in the same span
    # (when that is at least ``sparse_min_chars`` characters) is checked against a decode of the
    # sentence alone with no prompt, and the longer kept. After a previous final that missed its
    # last words ("... while I attempt to make"), the model read them on from the lead-in, or from
    # the prompt that ends with them, stopped, and stretched them over the new sentence ("the
    # connection." for 9-11 s of "Asterisk is an Open Source ... PBX", bench/robust quiet_-30db)
    sparse_share: float = 0.5
    sparse_min_chars: int = 12
    # a continued decode whose words end this long before the sentence's audio does is checked
    # against a decode of the sentence alone, and the one that reaches further is kept
    short_end_s: float = 1.5
    # before a final is published, the first pass gets up to this long to have shown the span's
    # pieces. On 2 cores this is faster than not waiting: the final's model calls then run while the
    # first pass is idle instead of beside it (CTranslate2's teams contend; real time, 2 runs each:
    # rtf 0.70 waiting vs 1.04 not, subtitle p50 1.10 s vs 1.62 s). A piece still later than the
    # final is not shown at all. A fast run, whose first pass lags far behind, waits up to 120 s
    # (app.session.build)
    first_wait_s: float = 1.0
    # drop a final that only repeats the previous ones (the third time in a row, or a repeat of
    # the previous one heard in under half its audio: Whisper looping on its prompt); see
    # app.pipeline.repeats.SentenceRepeats
    drop_repeats: bool = True
    # a sentence is decoded once this much silence follows it, before the pause that ends it is
    # complete (``pause_s``): when the pause holds, the final has its words that much sooner; when
    # speech comes back first, the decode is thrown away. 0: off. Real time only (a file fed as
    # fast as it goes reads the whole pause at once: app.session.build). Corpus, real time, 8
    # files x 2 runs against off: final p50 -97 ms (earlier in 14 of 16), first display -11 ms,
    # rtf -0.06, CER the same (docs/BENCHMARKS.md, session 18)
    early_s: float = 0.25
    thin_after_s: float = 3.0  # unprocessed audio beyond this: the first pass thins out
    unthin_below_s: float = 1.0


def level(audio: np.ndarray, quiet: float = 0.25, peak: float = 0.7, max_gain: float = 31.6) -> np.ndarray:
    """A quiet sentence brought up to a normal level (peak ``peak``, at most +30 dB) before it is
    recognised: Whisper's features are not level-normalised, and speech recorded at -33 dBFS peak
    decoded at 5.6 % WER offline against 1.9 % at -3 dBFS (bench/robust, tiny.en)."""
    top = float(np.max(np.abs(audio))) if len(audio) else 0.0
    if top <= 0.0 or top >= quiet:
        return audio
    return (audio * min(peak / top, max_gain)).astype(np.float32)


@dataclass
class _Early:
    """An early decode of the open sentence ``start``-``stop`` (samples): its words (None: it
    failed), whether they were read on after a lead-in, the seconds it took, and the lead-in counts
    it added (taken back if it is dropped)."""
    start: int
    stop: int
    words: list[Word] | None
    continued: bool = False
    took: float = 0.0
    context: dict = field(default_factory=dict)


class FirstPassLog:
    """Bus observer: the first pass's pieces (segments and their committed translations) and its
    sentence/clause marks, for the second pass to know what it replaces and where it may cut."""

    def __init__(self):
        self._lock = threading.Lock()
        self.pieces: dict[int, dict] = {}
        self.marks: list[tuple[float, bool]] = []  # (source time of the mark, sentence end?)
        self.covered: set[int] = set()
        self.shown_until = 0.0  # source time up to which pieces have their translation out
        self.final_until = 0.0  # source time up to which finals have taken the pieces
        self.superseded_pieces = 0

    def superseded(self, src_start: float, src_end: float) -> bool:
        """Whether a first-pass piece (or its translation) comes after the final that holds its
        words: it must not reach the screen (call with the bus held, then publish)."""
        late = (src_start + src_end) / 2 < self.final_until
        if late:
            self.superseded_pieces += 1
        return late

    def __call__(self, ev) -> None:
        if isinstance(ev, Segment):
            with self._lock:
                self.pieces[ev.seq] = {"seq": ev.seq, "source": ev.text, "target": "", "src_start": ev.src_start,
                                       "src_end": ev.src_end, "shown_at": None, "lang": ev.lang}
                if ev.sentence_end or ev.reason in ("punctuation", "pause"):
                    self.marks.append((ev.src_end, bool(ev.sentence_end)))
        elif isinstance(ev, Translation) and not ev.preview:
            with self._lock:
                p = self.pieces.get(ev.seq)
                if p is not None:
                    p["target"] = ev.target
                    p["shown_at"] = ev.emitted_at
                self.shown_until = max(self.shown_until, ev.src_end)

    def mark_in(self, lo: float, hi: float, sentence_only: bool) -> float | None:
        """The latest mark between source times ``lo`` and ``hi``."""
        with self._lock:
            best = None
            for t, sentence in self.marks:
                if lo <= t <= hi and (sentence or not sentence_only):
                    best = t if best is None else max(best, t)
            return best

    def take(self, end_s: float) -> list[dict]:
        """The pieces not yet covered whose middle lies before ``end_s``, in order; they are
        covered from now on (a piece belongs to one final only)."""
        with self._lock:
            out = [p for s, p in sorted(self.pieces.items())
                   if s not in self.covered and (p["src_start"] + p["src_end"]) / 2 < end_s]
            self.covered.update(p["seq"] for p in out)
            self.final_until = max(self.final_until, end_s)
            # pieces and marks far behind are no longer needed
            for p in out:
                self.pieces.pop(p["seq"], None)
            self.marks = [m for m in self.marks if m[0] >= end_s - 1.0]
            return out

    def peek(self, end_s: float) -> list[dict]:
        """The pieces ``take(end_s)`` would take, left in place."""
        with self._lock:
            return [p for s, p in sorted(self.pieces.items())
                    if s not in self.covered and (p["src_start"] + p["src_end"]) / 2 < end_s]

    def rest(self) -> list[dict]:
        with self._lock:
            out = [p for s, p in sorted(self.pieces.items()) if s not in self.covered]
            self.covered.update(p["seq"] for p in out)
            self.pieces.clear()
            return out


class FinalStage(Stage):
    """Second-pass worker over the shared audio ring."""

    def __init__(self, ring: AudioRing, asr: ASRBackend, mt: MTBackend | None, vad: VADBackend,
                 first: FirstPassLog, tts_out: BoundedQueue | None, upstream: ControlChannel | None,
                 cfg: FinalConfig, bus, clock, lang: str = "", first_done=None, gate=None, input_blocked=None):
        # the gate: while a final is being made, the first pass starts no new step (a final is
        # never delayed for a first-pass decode; the first pass takes longer steps instead)
        super().__init__("final", bus, clock, gate)
        self.first_done = first_done  # () -> True once the first pass has published all it will
        # () -> True while a file feeder waits for room in the ring: the first pass may be waiting
        # for that very audio (its last piece held until more words come), and the room is what
        # this stage is holding. Waiting for the first pass then only runs out first_wait_s
        # (120 s in --fast): a 3-hour file sat idle for minutes at a time
        self.input_blocked = input_blocked
        self.ring, self.asr, self.mt, self.vad, self.first = ring, asr, mt, vad, first
        self.tts_out, self.upstream, self.cfg, self.lang = tts_out, upstream, cfg, lang
        self.pos = 0  # samples the VAD has seen
        self.utt_start: int | None = None  # the open sentence's first sample
        self.last_speech = 0
        self.next_id = 0
        self.covered_until = 0  # the end (sample) of the last span finalised
        self.finals = 0
        self.failures = 0
        self.asr_beam = cfg.asr_beam  # the degradation policy may lower it
        self.thinned = False
        self.max_backlog_s = 0.0
        self.time_s = {"asr": 0.0, "mt": 0.0, "wait_first_pass": 0.0}  # where the second pass spends its time
        self._prompt: list[str] = []
        self._prompt_end = 0.0  # source time the newest final in the prompt ended
        self._context: tuple[list[Word], int] | None = None  # the previous final's words and end sample
        # decodes after the previous final's speech, retries without it, and continued decodes that
        # ended early or were sparse and were checked against the sentence alone
        self.context = {"used": 0, "fallback": 0, "rechecked": 0}
        # decodes far sparser than the first pass's text (sparse_share), and those a decode of the
        # sentence alone and unprompted replaced
        self.sparse = {"rechecked": 0, "replaced": 0}
        # an early decode of the open sentence; and how many were used, and thrown away because
        # speech came back
        self._early: _Early | None = None
        self.early = {"used": 0, "wasted": 0}
        # a final that only repeats the ones before it (Whisper looping on its prompt) is dropped:
        # see SentenceRepeats for when a repeat is a loop and when it is speech
        self.repeats = SentenceRepeats(lang)
        self._probs: list[tuple[int, float]] = []  # (frame start, speech prob) of the open sentence
        self._gate = Hysteresis(cfg.vad_threshold, cfg.vad_off_threshold)
        # a stronger (slower) translator for the finals, e.g. an LLM; see use_llm
        self.llm: MTBackend | None = None
        self.llm_budget_s: float | None = None
        self._llm_rate = 0.0  # seconds per source character, running estimate
        self.llm_stats = {"llm": 0, "fallback": 0, "paused": 0, "failed": 0, "rejected": 0, "llm_s": 0.0}
        self.llm_paused = False  # the degradation policy's step "final_mt:pair": finals late, no LLM

    def use_llm(self, llm: MTBackend, s_per_char: float = 0.0, budget_s: float | None = None) -> None:
        """Translate finals with ``llm``. ``budget_s``: a final it would not finish within that many
        seconds of its sentence's end being heard goes to the pair's translator instead (real time;
        None: always the LLM, as for a file run as fast as it goes)."""
        self.llm, self._llm_rate, self.llm_budget_s = llm, s_per_char, budget_s
        self.llm_paused = False

    def _translator(self, text: str, started: float) -> tuple[MTBackend | None, str]:
        """The translator for a final whose sentence end was heard at ``started`` (clock time,
        when the VAD pause closed it), and its name in the stats."""
        if self.llm is None:
            return self.mt, "mt"
        if self.llm_paused and self.mt is not None:
            return self.mt, "paused"
        if self.llm_budget_s is None or self.mt is None:
            return self.llm, "llm"
        spent = self.clock.now() - started + self.cfg.pause_s  # the pause that ended it, already waited
        if spent + self._llm_rate * len(text) > self.llm_budget_s:
            return self.mt, "fallback"
        if getattr(self.llm, "busy", False):
            # translating another session's sentence (a server's sessions share one LLM): waiting
            # for it is time the budget did not count
            return self.mt, "fallback"
        return self.llm, "llm"

    def _translate_final(self, text: str, started: float) -> tuple[str, str]:
        """A final's translation and the name of the translator that made it."""
        def by_pair() -> tuple[str, str]:
            return (self.watched(self.mt.translate, text, beam_size=self.cfg.mt_beam).strip(),
                    getattr(self.mt, "name", "mt"))

        tr, which = self._translator(text, started)
        if tr is None:
            return text, ""
        if which != "llm":
            if which in ("fallback", "paused"):
                self.llm_stats[which] += 1
            return by_pair()
        t = self.clock.now()
        try:
            out = self.watched(tr.translate, text, beam_size=self.cfg.mt_beam).strip()
        except Superseded:
            raise
        except Exception as e:  # the LLM failed: the pair's translator makes this final
            log.warning("LLM translation failed (%s: %s); using %s", type(e).__name__, e,
                        getattr(self.mt, "name", "the pair's translator"))
            self.llm_stats["failed"] += 1
            if self.mt is None:
                raise
            return by_pair()
        took = self.clock.now() - t
        self.llm_stats["llm_s"] += took
        if text:
            rate = took / len(text)
            self._llm_rate = rate if self._llm_rate <= 0 else 0.7 * self._llm_rate + 0.3 * rate
        if self.mt is not None and (not out or _leaves_source_script(out, self.lang)):
            # an LLM that copies part of the sentence instead of translating it ("Market部下周提交
            # 报告。" from Qwen 0.5B): the pair's translator makes this final
            self.llm_stats["rejected"] += 1
            return by_pair()
        self.llm_stats["llm"] += 1
        return out, getattr(tr, "name", "llm")

    @property
    def read_from(self) -> int:
        """The oldest sample this stage still needs (the ring must keep it)."""
        return self.utt_start if self.utt_start is not None else self.pos

    # -- main loop ------------------------------------------------------------------------------
    def loop(self) -> None:
        resumed = self.retake()  # the sentence a replaced worker was finalising
        if resumed is not None:
            self._finalise(*resumed)
        fs = self.vad.frame_samples
        pause = int(self.cfg.pause_s * SR)
        while not self.cancelled.is_set():
            have = self.ring.wait_for(self.pos + fs, timeout=0.05)
            if not have and not self.ring.closed:
                continue
            self._pace()
            end = (self.ring.written // fs) * fs
            if end > self.pos:
                try:
                    chunk = np.ascontiguousarray(self.ring.read(self.pos, end))
                except Overrun:  # fell a whole ring behind: what was lost keeps its first-pass text
                    self._lost_audio(end)
                    continue
                probs = self.watched(self.vad.process, chunk)
                speech = self._gate(probs, chunk)
                base = self.pos
                for i, p in enumerate(probs):
                    t = base + i * fs
                    if speech[i]:
                        if self._early is not None:  # the pause did not hold
                            self._drop_early()
                        if self.utt_start is None:
                            self.utt_start = max(0, t - int(self.cfg.lead_s * SR))
                            self._probs = []
                        self.last_speech = t + fs
                    if self.utt_start is not None:
                        self._probs.append((t, float(p)))
                        if not speech[i] and t + fs - self.last_speech >= pause:
                            stop = min(self.last_speech + int(self.cfg.tail_s * SR), t + fs)
                            start, self.utt_start = max(self.utt_start, self.covered_until), None
                            self._finalise(start, stop, "pause")
                        elif (not speech[i] and 0 < self.cfg.early_s <= (t + fs - self.last_speech) / SR
                              and self._early is None):
                            self._decode_early(max(self.utt_start, self.covered_until),
                                               min(self.last_speech + int(self.cfg.tail_s * SR), t + fs))
                        elif i % 8 == 7:
                            # a long chunk (a file fed as fast as it goes) is capped as it is read,
                            # not once at its end: else a sentence ran on for 20-40 s past the cap
                            self._cap(t + fs)
                self.pos = end
                self._cap(self.pos)
            if self.ring.closed and self.ring.written - self.pos < fs:
                if self.utt_start is not None:
                    start, self.utt_start = self.utt_start, None
                    self._finalise(start, self.ring.written, "flush")
                self._leftovers()
                break
        if self.tts_out is not None:
            self.tts_out.close()

    def recover(self) -> str:
        if self.in_flight is None:
            return "its audio position"
        start, stop, _ = self.in_flight
        return f"the sentence at {start / SR:.1f}-{stop / SR:.1f} s again"

    def _cap(self, pos: int) -> None:
        """A long stretch of speech with no pause, read up to sample ``pos``: finalise up to a
        first-pass mark, or past the hard cap, at the quietest moment of its last seconds."""
        if self.utt_start is None:
            return
        length = (pos - self.utt_start) / SR
        if length < self.cfg.mark_after_s:
            return
        lo = self.utt_start / SR + self.cfg.min_mark_s
        hi = pos / SR - 0.3
        mark = self.first.mark_in(lo, hi, sentence_only=True) or self.first.mark_in(lo, hi, sentence_only=False)
        reason = "mark"
        if mark is not None:
            cut = min(pos, int((mark + 0.1) * SR))
        elif length >= self.cfg.hard_max_s:
            cut, reason = self._quietest(lo, pos), "length"
        else:
            return
        start, self.utt_start = self.utt_start, cut
        self._probs = [(t, p) for t, p in self._probs if t >= cut]
        self._finalise(start, cut, reason)

    def _quietest(self, lo: float, pos: int) -> int:
        tail = [(p, t) for t, p in self._probs if max(lo * SR, pos - 3 * SR) <= t < pos]
        if not tail:
            return pos
        _, t = min(tail)
        return t + self.vad.frame_samples // 2

    def _pace(self) -> None:
        """The first pass thins out (longer steps) while this stage is behind, and goes back
        when it has caught up."""
        backlog = (self.ring.written - self.pos) / SR
        self.max_backlog_s = max(self.max_backlog_s, backlog)
        if self.upstream is None:
            return
        if backlog > self.cfg.thin_after_s and not self.thinned:
            self.thinned = True
            self.upstream.send(ControlMessage(Control.THIN, f"second pass {backlog:.1f} s behind", by="final"))
            self.metric("final_backlog_s", backlog, action="thin")
        elif backlog < self.cfg.unthin_below_s and self.thinned:
            self.thinned = False
            self.upstream.send(ControlMessage(Control.UNTHIN, "second pass caught up", by="final"))
            self.metric("final_backlog_s", backlog, action="unthin")

    # -- one sentence ---------------------------------------------------------------------------
    def _finalise(self, start: int, stop: int, reason: str) -> None:
        if stop <= start or self.cancelled.is_set():
            return
        self.in_flight = (start, stop, reason)
        started = self.clock.now()
        split = {"asr": 0.0, "wait": 0.0, "mt": 0.0}
        words: list[Word] | None = None  # None: the second pass failed; the first pass's text stays
        target, made_by = "", ""
        early = self._early
        if early is not None and ((early.start, early.stop) != (start, stop) or early.words is None):
            # decoded over other bounds (before a cut), or the early decode failed: decoded now
            self._drop_early()
            early = None
        self._early = None
        continued = False
        try:
            if early is not None:
                words, continued = early.words, early.continued
                self.early["used"] += 1
                split["asr"] = early.took
                log.debug("second pass: %.2f-%.2f s decoded early", start / SR, stop / SR)
            else:
                audio = np.array(self.ring.read(start, stop))
                t = self.clock.now()
                with self.urgent():
                    words, continued = self._recognise(audio, start / SR)
                split["asr"] = self.clock.now() - t
                self.time_s["asr"] += split["asr"]
        except Overrun:
            log.warning("second pass: audio %.1f-%.1f s was overwritten; keeping the first pass", start / SR, stop / SR)
        except Superseded:
            raise
        except Exception as e:  # the first pass's text stays, marked; the session goes on
            log.warning("second pass failed on %.1f-%.1f s: %s: %s", start / SR, stop / SR, type(e).__name__, e)
        split["wait"] = self._wait_for_first_pass(words[-1].end if words else stop / SR)
        if words and self._sparse(words, stop):
            t = self.clock.now()
            words = self._recheck_sparse(words, continued, start, stop)
            split["asr"] += self.clock.now() - t
            self.time_s["asr"] += self.clock.now() - t
        looped = bool(words) and self.cfg.drop_repeats and self.repeats.check(
            join_words(words, self.lang), (stop - start) / SR, start / SR, stop / SR)
        if looped:
            log.info("second pass: dropped a repeat loop at %.1f-%.1f s: %s", start / SR, stop / SR,
                     join_words(words, self.lang)[:80])
            words = []
        if words:
            t = self.clock.now()
            try:
                with self.urgent():
                    target, made_by = self._translate_final(join_words(words, self.lang), started)
                split["mt"] = self.clock.now() - t
                self.time_s["mt"] += split["mt"]
            except Superseded:
                raise
            except Exception as e:
                log.warning("second-pass translation failed: %s: %s", type(e).__name__, e)
                words = None
        # the pieces are taken and the final published in one step under the bus's lock, so a
        # worker replaced before this point leaves them to its successor (nothing lost or shown
        # twice) and no first-pass piece of this span is published after the final
        with self.bus.held():
            if self.cancelled.is_set():
                return
            pieces = self.first.take(stop / SR)
            self.covered_until = max(self.covered_until, stop)
            # the VAD goes on after this span even if a successor worker resumes (this one may be
            # replaced before it gets back to its frame loop)
            fs = self.vad.frame_samples
            self.pos = max(self.pos, stop // fs * fs)
            if words is None:
                out = self._publish_first_pass(pieces, start, stop, reason, started)
            elif looped:
                # an empty final takes the span's first-pass pieces (the same loop, as a rule) off
                out = self._publish((), "", "", pieces, start, stop, reason, started,
                                    failed=False) if pieces else None
            elif words:
                out = self._publish(words, join_words(words, self.lang), target, pieces, start, stop, reason,
                                    started, failed=False, mt=made_by)
            elif any(p["source"].strip() for p in pieces):
                # the whole-sentence decode heard nothing where the first pass heard words: a decode
                # that gives up on a span is likelier than first-pass words out of silence; keep them
                out = self._publish_first_pass(pieces, start, stop, reason, started)
            else:
                out = None
            self.in_flight = None
        self._dub(out)
        self.busy_s += self.clock.now() - started
        log.debug("final %.2f-%.2f s (%s) took %.2f s: asr %.2f, first-pass wait %.2f, mt %.2f",
                  start / SR, stop / SR, reason, self.clock.now() - started, split["asr"], split["wait"], split["mt"])

    def _decode_early(self, start: int, stop: int) -> None:
        """Decode the open sentence ``start``-``stop`` before the pause after it is complete; kept
        for ``_finalise`` if the pause holds. A decode that fails is left to ``_finalise``."""
        if stop <= start:
            return
        before = dict(self.context)
        t = self.clock.now()
        try:
            audio = np.array(self.ring.read(start, stop))
            with self.urgent():
                words, continued = self._recognise(audio, start / SR)
        except Superseded:
            raise
        except Exception as e:  # Overrun, a model error: the final decodes (or fails) as it would
            log.debug("second pass: early decode of %.1f-%.1f s failed: %s", start / SR, stop / SR, e)
            self._early = _Early(start, stop, None)  # not tried again before the pause ends
            return
        took = self.clock.now() - t
        self.time_s["asr"] += took
        self._early = _Early(start, stop, words, continued, took, {k: self.context[k] - before[k] for k in before})

    def _drop_early(self) -> None:
        """Speech came back (or the sentence was cut elsewhere): the early decode is not used, and
        the lead-in counts it added are taken back."""
        if self._early is None:
            return
        for k, v in self._early.context.items():
            self.context[k] -= v
        self._early = None
        self.early["wasted"] += 1

    def _wait_for_first_pass(self, until: float) -> float:
        """Until the first pass has shown its translation of the sentence's last words (source
        time ``until``), for a bounded time: the final must know which pieces it replaces.
        Returns the seconds waited."""
        t = self.clock.now()
        deadline = t + self.cfg.first_wait_s
        while (self.first.shown_until < until - 0.25 and self.clock.now() < deadline and not self.cancelled.is_set()
               and not (self.first_done is not None and self.first_done())
               and not (self.input_blocked is not None and self.input_blocked())):
            self.cancelled.wait(0.01)
        waited = self.clock.now() - t
        self.time_s["wait_first_pass"] += waited
        return waited

    def _recognise(self, audio: np.ndarray, offset: float) -> tuple[list[Word], bool]:
        """The sentence's words, and whether they were read on after the previous final's lead-in."""
        ctx = self._lead_in(int(round(offset * SR)), len(audio))
        continued = None
        if ctx is not None:
            continued = self._recognise_continued(audio, offset, *ctx)
            # a continued decode that stops well before the sentence's end (music or applause
            # under the speech can make it give up) is checked against the sentence alone
            if continued is not None and continued[-1].end >= offset + len(audio) / SR - self.cfg.short_end_s:
                return continued, True
        alone = self._recognise_alone(audio, offset)
        if continued is not None:
            self.context["rechecked"] += 1
            if not alone or continued[-1].end >= alone[-1].end:
                return continued, True
            self.context["used"] -= 1
            self.context["fallback"] += 1
        return alone, False

    def _recognise_alone(self, audio: np.ndarray, offset: float, prompted: bool = True) -> list[Word]:
        prompt = (self._prompt_text(self._prompt) if prompted and offset - self._prompt_end <= self.cfg.prompt_gap_s
                  else "")
        words = self.watched(self.asr.transcribe_utterance, level(audio), prompt=prompt, beam_size=self.asr_beam)
        return [Word(w.text, w.start + offset, w.end + offset, w.probability) for w in words]

    def _sparse(self, words: list[Word], stop: int) -> bool:
        """Whether a decode holds far less text than the first pass heard in its span."""
        heard = len(norm(_join_texts([p["source"] for p in self.first.peek(stop / SR)], self.lang)))
        got = len(norm(join_words(words, self.lang)))
        return heard >= self.cfg.sparse_min_chars and got < self.cfg.sparse_share * heard

    def _recheck_sparse(self, words: list[Word], continued: bool, start: int, stop: int) -> list[Word]:
        """A sparse decode against the sentence decoded alone with no prompt: the one with more text."""
        self.sparse["rechecked"] += 1
        if continued:
            self.context["rechecked"] += 1
        try:
            audio = np.array(self.ring.read(start, stop))
            with self.urgent():
                alone = self._recognise_alone(audio, start / SR, prompted=False)
        except Superseded:
            raise
        except Exception as e:  # the continued decode stands
            log.debug("second pass: recheck of %.1f-%.1f s failed: %s", start / SR, stop / SR, e)
            return words
        if len(norm(join_words(alone, self.lang))) <= len(norm(join_words(words, self.lang))):
            return words
        log.debug("second pass: %.2f-%.2f s decoded again alone, unprompted: the decode was sparse: %s", start / SR,
                  stop / SR, join_words(words, self.lang)[:80])
        self.sparse["replaced"] += 1
        if continued:
            self.context["used"] -= 1
            self.context["fallback"] += 1
        return alone

    @property
    def narrow_band(self) -> bool:
        """The gate found the audio narrow-band (a telephone line) and halved its thresholds."""
        return self._gate.narrow

    def _prompt_text(self, finals: list[str]) -> str:
        return "".join(finals) if self.lang in ("zh", "ja") else " ".join(finals)

    def _lead_in(self, start: int, n: int) -> tuple[np.ndarray, str] | None:
        """The previous final's last ``context_s`` of speech (its audio, up to where that final
        ended, and its text) to decode before a sentence at sample ``start``; None when there is
        none, its audio is gone, or the two would pass 30 s."""
        if self.cfg.context_s <= 0 or self._context is None or not hasattr(self.asr, "transcribe_continued"):
            return None
        words, stop = self._context
        tail = [w for w in words if w.start >= words[-1].end - self.cfg.context_s]
        prefix = join_words(tail, self.lang)
        if self.cfg.open_lead_in:
            prefix = prefix.rstrip("".join(SENTENCE_END) + " ")
        if not tail or not norm(prefix):
            return None
        first = max(0, int((tail[0].start - 0.1) * SR))
        # the pause between the two stays as it was: cut out, the model runs the sentences
        # together and hears less well ("an old-sposed young man" spliced, "an ill-disposed
        # young man" with the 2.4 s pause kept); after a long one there is no lead-in
        if start - stop > int(self.cfg.context_gap_s * SR) or start - first + n > int(29.0 * SR):
            return None
        try:
            return np.array(self.ring.read(first, start)), prefix
        except Overrun:
            return None

    def _recognise_continued(self, audio: np.ndarray, offset: float, lead: np.ndarray, prefix: str) -> list[Word] | None:
        """The sentence decoded after ``lead`` (the previous final's speech, text ``prefix``
        forced); None when the model heard nothing new after it or wrote the prefix otherwise:
        the sentence is then decoded alone."""
        prompt = self._prompt_text(self._prompt[:-1])  # the last final is the prefix itself
        both = level(np.concatenate([lead, audio]))
        words = self.watched(self.asr.transcribe_continued, both, prefix, prompt=prompt, beam_size=self.asr_beam)
        new = split_prefix(words, prefix)
        if new is None:
            new = skip_prefix(words, prefix)
        shift = len(lead) / SR
        # words that ended before the sentence began are the lead-in's (speech the previous
        # final missed, read on from its forced text): not this sentence's, and a decode that
        # spends itself there has lost the sentence ("been made amiable himself." for 15 s of
        # speech). Judged by the words' ends: Whisper often starts the first word after a pause
        # where the last one before it ended
        spilt = sum(w.end < shift - self.cfg.spill_s for w in new) if new else 0
        if not new or not norm(join_words(new, self.lang)) or 2 * spilt > len(new):
            self.context["fallback"] += 1
            return None
        self.context["used"] += 1
        return [Word(w.text, max(0.0, w.start - shift) + offset, max(0.0, w.end - shift) + offset, w.probability)
                for w in new]

    def _publish_first_pass(self, pieces, start, stop, reason, started) -> Translation | None:
        if not pieces:
            return None
        self.failures += 1
        words = ()
        source = _join_texts([p["source"] for p in pieces], self.lang)
        target = _join_texts([p["target"] for p in pieces], "en")
        return self._publish(words, source, target, pieces, start, stop, reason, started, failed=True)

    def _publish(self, words, source, target, pieces, start, stop, reason, started, failed,
                 mt: str = "") -> Translation | None:
        """The final on the bus (call with the bus held); the translation the dub should speak."""
        shown = [p["shown_at"] for p in pieces if p["shown_at"] is not None]
        now = self.clock.now()
        src_start = words[0].start if words else start / SR
        src_end = words[-1].end if words else stop / SR
        fin = FinalSentence(self.next_id, tuple(words), source, target, round(src_start, 3), round(src_end, 3),
                            now, min(shown) if shown else None, tuple(p["seq"] for p in pieces),
                            _join_texts([p["source"] for p in pieces], self.lang),
                            _join_texts([p["target"] for p in pieces], "en"), reason, failed, started, mt)
        self.next_id += 1
        self.finals += 1
        if not failed and source.strip():
            self._prompt = (self._prompt + [source])[-self.cfg.prompt_finals:]
            self._prompt_end = src_end
        self._context = (list(words), stop) if words and not failed else None
        self.bus.publish(fin)
        if not target.strip():
            return None
        return Translation(fin.id, source, target, fin.src_start, fin.src_end, now, False, started, started)

    def _lost_audio(self, end: int) -> None:
        oldest = self.ring.oldest
        if self.utt_start is not None:
            with self.bus.held():
                out = self._publish_first_pass(self.first.take(oldest / SR), self.utt_start, oldest, "lost",
                                               self.clock.now())
            self._dub(out)
            self.utt_start = None
        self.pos = max(self.pos, oldest)

    def _leftovers(self) -> None:
        """At the end of input: first-pass pieces no final covered keep their text (marked)."""
        waited = 0.0
        while self.first_done is not None and not self.first_done() and waited < 120 and not self.cancelled.is_set():
            self.cancelled.wait(0.05)  # the first pass's last pieces are still on their way
            waited += 0.05
        # a piece in a span already finalised came late: that final holds its words
        done = self.covered_until / SR
        with self.bus.held():
            rest = [p for p in self.first.rest() if p["source"].strip() and (p["src_start"] + p["src_end"]) / 2 >= done]
            out = (self._publish_first_pass(rest, int(rest[0]["src_start"] * SR), int(rest[-1]["src_end"] * SR),
                                            "flush", self.clock.now()) if rest else None)
        self._dub(out)

    def _dub(self, tr: Translation | None) -> None:
        if tr is not None and self.tts_out is not None:
            self.tts_out.put(tr)  # outside the bus lock: the dub stage publishes while this may wait


def _leaves_source_script(text: str, lang: str) -> bool:
    """Whether a translation out of Chinese or Japanese still holds characters of that script."""
    if not unspaced(lang):
        return False
    # ideographs, kana, and the compatibility ideographs
    return any(is_ideograph(c) or "\u3040" <= c <= "\u30ff" or "\uf900" <= c <= "\ufaff" for c in text)


def _join_texts(parts: list[str], lang: str) -> str:
    parts = [p.strip() for p in parts if p and p.strip()]
    if lang in ("zh", "ja"):
        return "".join(parts)
    return " ".join(parts)


__all__ = ["FinalConfig", "FinalStage", "FirstPassLog", "Closed"]
