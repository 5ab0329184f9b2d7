"""The three worker stages. Each runs in its own thread; plumbing lives in ``Stage``."""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass

import numpy as np

from app.accel.features import frame_features
from app.pipeline.messages import (
    CommittedWords,
    Control,
    ControlMessage,
    DubChunk,
    Metric,
    Segment,
    TentativeText,
    Translation,
    join_words,
)
from app.pipeline.protocols import ASRBackend, MTBackend, TTSBackend, VADBackend, Word
from app.pipeline.queues import BoundedQueue, Closed, ControlChannel, PriorityGate
from app.pipeline.ringbuffer import AudioRing, ReaderCursor
from app.pipeline.segmenter import CLAUSE_END, SENTENCE_END, Segmenter
from app.pipeline.stability import LocalAgreement, drop_echo, split_prefix
from app.pipeline.supervisor import Superseded

log = logging.getLogger("relay.pipeline")
SR = 16000
HOP = 160


# model-call methods the supervisor times: a worker inside one for longer than the deadline stalled
_WATCHED_CALLS = frozenset({"transcribe_window", "transcribe_utterance", "process", "translate",
                            "translate_with_draft", "score_batch", "synthesize"})


class _Watched:
    """A stage's backend as its worker sees it: the model calls are timed for the stall
    watchdog, and a worker replaced meanwhile leaves when its call returns. Everything else
    (attributes, settings, other methods) goes straight to the backend."""

    __slots__ = ("_backend", "_stage")

    def __init__(self, backend, stage):
        object.__setattr__(self, "_backend", backend)
        object.__setattr__(self, "_stage", stage)

    def __getattr__(self, name):
        value = getattr(self._backend, name)
        if name in _WATCHED_CALLS and callable(value):
            stage = self._stage
            return lambda *a, **k: stage.watched_call(value, a, k)
        return value

    def __setattr__(self, name, value):
        setattr(self._backend, name, value)

    def __repr__(self):
        return f"watched({self._backend!r})"


class _Backend:
    """Descriptor for a stage's backend attribute: stores the backend, hands out its watched view."""

    def __set_name__(self, owner, name):
        self.slot = "_backend_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        raw = obj.__dict__.get(self.slot)
        return None if raw is None else _Watched(raw, obj)

    def __set__(self, obj, value):
        obj.__dict__[self.slot] = value


class _GateHold:
    def __init__(self, stage, ctx):
        self.stage, self.ctx, self.open = stage, ctx, False

    def __enter__(self):
        self.ctx.__enter__()
        with self.stage._watch_lock:
            self.open = True
            self.stage._holds.add(self)

    def __exit__(self, *exc):
        self.release()

    def release(self) -> None:
        with self.stage._watch_lock:
            if not self.open:
                return
            self.open = False
            self.stage._holds.discard(self)
        self.ctx.__exit__(None, None, None)


class _StageGate:
    """The priority gate as a stage sees it: holds are tracked, so an abandoned worker's hold
    is released when it is replaced instead of blocking recognition until its call returns."""

    def __init__(self, gate, stage):
        self._gate, self._stage = gate, stage

    def urgent(self) -> _GateHold:
        return _GateHold(self._stage, self._gate.urgent())

    def __getattr__(self, name):
        return getattr(self._gate, name)


class _Gate:
    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        raw = obj.__dict__.get("_raw_gate")
        return None if raw is None else _StageGate(raw, obj)

    def __set__(self, obj, value):
        obj.__dict__["_raw_gate"] = value


class Stage:
    """A pipeline worker: a control channel that bypasses its data queue, and a worker thread
    the supervisor can replace. ``start/join/is_alive/name`` behave like a thread's, across
    replacements. Subclasses implement ``loop()``; ``recover()`` rebuilds their state from the
    last committed point when a fresh worker takes over, and says where it resumes."""

    asr = _Backend()
    vad = _Backend()
    mt = _Backend()
    tts = _Backend()
    gate = _Gate()

    def __init__(self, name: str, bus, clock):
        self.name = name
        self.bus = bus
        self.clock = clock
        self.control = ControlChannel()
        self.error: BaseException | None = None
        self.busy_s = 0.0
        self.supervisor = None
        self.restarts = 0
        self.generation = 0  # bumped when the current worker is abandoned
        self.in_flight = None  # the unit of work a replaced worker had taken (see retake)
        self._thread: threading.Thread | None = None  # the newest worker
        self._workers: list[threading.Thread] = []  # workers join() waits for
        self._abandoned: set[threading.Thread] = set()  # leave _workers with the next spawn/detach
        self._threads_lock = threading.Lock()
        self._worker = threading.local()
        self._watch_lock = threading.Lock()
        self._call_since: float | None = None  # monotonic start of the model call in progress
        self._holds: set[_GateHold] = set()

    # -- the worker thread -------------------------------------------------------------------
    def start(self) -> None:
        self.spawn()

    def spawn(self) -> None:
        """Start a worker. It is listed before it starts: a failing worker spawns its successor,
        which can fail and spawn a third before the first call returns (seen in 1 of 100 runs
        of a stage that fails at once), and ``join`` must find every one of them. The worker
        it replaces, if abandoned, leaves the list in the same step: the session does not wait
        for a stalled call."""
        t = threading.Thread(target=self.run, name=self.name, daemon=True)
        with self._threads_lock:
            self._workers = [w for w in self._workers if _not_ended(w) and w not in self._abandoned] + [t]
            self._abandoned.clear()
            self._thread = t
        try:
            t.start()
        except BaseException:
            with self._threads_lock:
                self._workers.remove(t)
            raise

    def run(self) -> None:
        gen = self.generation
        self._worker.generation = gen
        if self._thread is None:  # run() called directly (tests): this thread is the worker
            self._thread = threading.current_thread()
        try:
            self.loop()
        except (Closed, Superseded):
            pass
        except BaseException as e:
            if gen != self.generation:
                return  # this worker was replaced: its failure is no longer the stage's
            self.error = e
            if self.supervisor is not None and self.supervisor.crashed(self, e):
                return
            # reported to the engine, which stops the session cleanly (one line; the trace at DEBUG)
            log.error("stage %s failed: %s: %s", self.name, type(e).__name__, e)
            log.debug("stage %s failure", self.name, exc_info=e)
            self.bus.fail(self.name, e)

    def _running(self) -> list[threading.Thread]:
        me = threading.current_thread()
        with self._threads_lock:
            return [t for t in self._workers if t is not me and _not_ended(t)]

    def join(self, timeout: float | None = None) -> None:
        """Wait for the stage's workers, replacements included, up to ``timeout`` in all. A
        worker is listed before it starts, so while any listed worker runs, whatever it
        spawns is listed too."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while running := self._running():
            t = running[0]
            if t.ident is None:  # being started by another thread
                time.sleep(0.001)
            else:  # in short waits: the worker may be abandoned (stalled) meanwhile
                t.join(0.05 if deadline is None else min(0.05, max(0.0, deadline - time.monotonic())))
            if deadline is not None and time.monotonic() >= deadline:
                return

    def is_alive(self) -> bool:
        return bool(self._running())

    # -- supervision hooks -------------------------------------------------------------------
    def watched_call(self, fn, args, kwargs):
        gen = getattr(self._worker, "generation", None)
        if gen is None:  # not on this stage's worker (warm-up, the policy thread): not timed
            return fn(*args, **kwargs)
        with self._watch_lock:
            if gen != self.generation:
                raise Superseded(self.name)
            self._call_since = time.monotonic()
        try:
            out = fn(*args, **kwargs)
        finally:
            with self._watch_lock:
                superseded = gen != self.generation
                if not superseded:
                    self._call_since = None
        if superseded:
            raise Superseded(self.name)
        if hasattr(out, "__next__"):  # a generator (speech synthesis): each item is a call
            return self._watched_iter(out)
        return out

    def _watched_iter(self, it):
        while True:
            try:
                item = self.watched_call(next, (it,), {})
            except StopIteration:
                return
            yield item

    def stalled(self, now: float, limit: float) -> bool:
        with self._watch_lock:
            return self._call_since is not None and now - self._call_since >= limit

    def abandon_worker(self) -> None:
        """The current worker no longer owns the stage: it leaves when its call returns."""
        with self._watch_lock:
            self.generation += 1
            self._call_since = None
            holds = list(self._holds)
        with self._threads_lock:  # a stalled worker, left behind by the watchdog; a failing
            # worker abandons itself and stays listed until it has published its restart
            if self._thread is not None and self._thread is not threading.current_thread():
                self._abandoned.add(self._thread)
        for h in holds:
            h.release()

    def detach_worker(self) -> None:
        """No worker will follow the abandoned one (the session is failing): stop waiting for it."""
        with self._threads_lock:
            self._workers = [t for t in self._workers if t not in self._abandoned]
            self._abandoned.clear()
            self._thread = None

    def retake(self):
        """The unit of work a replaced worker had taken, once; None otherwise."""
        item, self.in_flight = self.in_flight, None
        return item

    def recover(self) -> str:
        """Rebuild state for a fresh worker; returns where it resumes (for the log and event)."""
        return "its input queue"

    def loop(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def metric(self, name: str, value: float, **labels) -> None:
        self.bus.publish(Metric(name, float(value), self.clock.now(), tuple(labels.items())))


@dataclass
class ASRConfig:
    step_s: float = 0.5
    max_step_s: float = 4.0
    trim_after_s: float = 4.0  # trim the window at a committed sentence end past this length
    max_window_s: float = 7.0  # hard limit: trim to the last committed word
    pause_s: float = 0.5  # VAD silence that ends an utterance
    vad_threshold: float = 0.5
    silence_db: float = -60.0  # frame RMS below this (dBFS) is silence
    catch_up: bool = True  # real time: each step takes everything that arrived
    commit_lookahead_s: float = 0.0  # audio a confirming hypothesis must have heard after a word
    first_commit_lookahead_s: float = 0.0  # the same for an utterance's first commit
    confident_prob: float = 0.0  # a word this sure commits on one hypothesis (0: always wait for two)
    confident_lookahead_s: float = 0.0  # the audio that one hypothesis must have heard after it
    context_s: float = 0.0  # audio of the previous utterance put back in front of the next one


class ASRStage(Stage):
    """Streaming recognition over a sliding window with LocalAgreement-2 commits."""

    def __init__(self, ring: AudioRing, asr: ASRBackend, vad: VADBackend | None, segmenter: Segmenter,
                 seg_out: BoundedQueue, preview_out, cfg: ASRConfig, bus, clock,
                 gate: PriorityGate | None = None, accel: str = "numpy"):
        super().__init__("asr", bus, clock)
        self.gate = gate
        self.accel = accel
        self.ring, self.asr, self.vad, self.segmenter = ring, asr, vad, segmenter
        self.seg_out, self.preview_out, self.cfg = seg_out, preview_out, cfg
        self.policy = LocalAgreement(cfg.commit_lookahead_s, cfg.first_commit_lookahead_s,
                                     cfg.confident_prob, cfg.confident_lookahead_s)
        self.cursor = ReaderCursor()
        self.window_start = 0
        self.step_s = cfg.step_s
        self.slowed = False
        self.steps = 0
        self._vad_pos = 0
        self._speech = np.zeros(0, dtype=bool)  # per VAD frame, absolute from frame 0
        self._last_speech_end = 0  # sample index
        self._gap: tuple[int, int] | None = None  # a pause with speech after it, not yet acted on
        self._speech_start = 0  # where the current utterance's speech began (sample index)
        self._context_start: int | None = None  # where the next utterance's window will begin
        self._had_speech_since_commit = False
        self._utterance_ends: tuple[float, ...] = ()  # end times of utterances' last committed words
        self.sep = "" if getattr(asr, "output_language", asr.language) in ("zh", "ja") else " "
        self._processed = 0  # samples taken by completed steps
        self._sent_seq = -1  # the last segment handed to MT (a replayed step does not resend it)
        self._checkpoint: dict | None = None

    # -- VAD ---------------------------------------------------------------------------------
    def _update_vad(self, upto: int) -> None:
        if self.vad is None:
            self._last_speech_end = upto
            self._had_speech_since_commit = True
            return
        fs = self.vad.frame_samples
        n_frames = (upto - self._vad_pos) // fs
        if n_frames <= 0:
            return
        audio = self.ring.read(self._vad_pos, self._vad_pos + n_frames * fs)
        audio = np.ascontiguousarray(audio)
        probs = self.vad.process(audio)
        # energy gate (accel kernel): frames near digital silence are never speech, whatever
        # the VAD model says about them
        rms_db, _ = frame_features(audio, fs, backend=self.accel)
        speech = (probs > self.cfg.vad_threshold) & (rms_db[: len(probs)] > self.cfg.silence_db)
        idx = np.nonzero(speech)[0]
        if len(idx):
            if not self._had_speech_since_commit:
                self._speech_start = self._vad_pos + int(idx[0]) * fs
            if self._gap is None:
                self._gap = self._first_pause(idx, fs)
                if self._gap is not None:
                    self._speech_start = self._gap[1]
            self._last_speech_end = self._vad_pos + (int(idx[-1]) + 1) * fs
            self._had_speech_since_commit = True
        self._vad_pos += n_frames * fs

    def _first_pause(self, idx: np.ndarray, fs: int) -> tuple[int, int] | None:
        """A whole pause inside the audio one step takes, speech on both sides: (where the speech
        before it ended, where the speech after it starts), as sample indices. A step that
        only looked at trailing silence would miss it (a 0.7 s pause between sentences is seen
        as one only if a step happens to fall inside its last 0.2 s)."""
        starts = self._vad_pos + idx * fs
        before = np.concatenate(([self._last_speech_end], starts[:-1] + fs))
        spoke = np.ones(len(idx), dtype=bool)
        spoke[0] = self._had_speech_since_commit
        gaps = np.nonzero(spoke & (starts - before >= self.cfg.pause_s * SR))[0]
        if not len(gaps):
            return None
        return int(before[gaps[0]]), int(starts[gaps[0]])

    def _pause(self, upto: int) -> bool:
        return self._had_speech_since_commit and (upto - self._last_speech_end) >= self.cfg.pause_s * SR

    # -- control -----------------------------------------------------------------------------
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

    # -- main loop ---------------------------------------------------------------------------
    def loop(self) -> None:
        while True:
            self._handle_control()
            processed = self._processed
            target = processed + int(self.step_s * SR)
            self.ring.wait_for(target, timeout=0.05)
            self._handle_control()
            written = self.ring.written
            final = self.ring.closed and written <= target
            if written < target and not final:
                continue
            if self.gate is not None:
                self.gate.wait_clear(timeout=1.0)
                written = self.ring.written
            upto = written if (self.cfg.catch_up or final) else min(written, target)
            t0 = self.clock.now()
            # committed points: before the VAD, then before the step (the VAD model keeps state
            # of its own, so audio it has seen is never fed to it twice)
            self._checkpoint = self._snapshot()
            self._update_vad(upto)
            self._checkpoint = self._snapshot()
            self._step(upto, final)
            dt = self.clock.now() - t0
            self.busy_s += dt
            timings = getattr(self.asr, "last_timings", None) or {}
            self.metric("asr_step_ms", dt * 1000, **{k: f"{v:.0f}" for k, v in timings.items()})
            self._processed = upto
            if final:
                break
        for seg in self.segmenter.flush():
            self._send(seg)
        self.seg_out.close()

    # -- restart state -----------------------------------------------------------------------
    _STATE = ("window_start", "_vad_pos", "_last_speech_end", "_had_speech_since_commit", "_processed", "_gap",
              "_context_start", "_speech_start", "_utterance_ends")

    def _snapshot(self) -> dict:
        """The committed point before a step: the step can be replayed from here."""
        return {"scalars": {k: getattr(self, k) for k in self._STATE},
                "policy": _copy_state(self.policy), "segmenter": _copy_state(self.segmenter)}

    def recover(self) -> str:
        cp = self._checkpoint
        if cp is not None:
            for k, v in cp["scalars"].items():
                setattr(self, k, v)
            vars(self.policy).update(_copy_state(cp["policy"]))
            vars(self.segmenter).update(_copy_state(cp["segmenter"]))
        return f"sample {self._processed} ({self._processed / SR:.2f} s), {len(self.policy.committed)} committed words"

    def _split_at_window(self) -> int:
        """Index of the first committed word inside the window. Committed words are in time
        order and the window only moves forward, so this scans back from the end: a step costs
        the window's words, not the whole session's."""
        ws = self.window_start / SR + 1e-3
        committed = self.policy.committed
        i = len(committed)
        while i > 0 and committed[i - 1].end > ws:
            i -= 1
        return i

    def _window_prefix(self) -> list[Word]:
        return self.policy.committed[self._split_at_window():]

    def _prompt(self) -> str:
        """The committed text before the window. In unspaced scripts an utterance that ended
        without a sentence mark gets one here: prompted with unpunctuated text, Whisper stops
        writing punctuation altogether, and sentence marks are where pieces end soonest."""
        i = self._split_at_window()
        words = self.policy.committed[max(0, i - 40):i]
        if not self.sep and self._utterance_ends:
            ends = set(self._utterance_ends)
            words = [Word(w.text + "。", w.start, w.end, w.probability)
                     if w.end in ends and w.text.strip()[-1:] not in SENTENCE_END | CLAUSE_END else w
                     for w in words]
        return join_words(words)

    def _step(self, upto: int, final: bool) -> None:
        gap, self._gap = self._gap, None
        if gap is not None:  # the utterance ended inside this step's audio: recognise up to there
            self._step_to(gap[0], upto, False, gap)
            if final:
                self._step_to(upto, upto, True, None)
            return
        self._step_to(self._last_speech_end, upto, final, None)

    def _step_to(self, speech_end: int, upto: int, final: bool, gap: tuple[int, int] | None) -> None:
        now = self.clock.now()
        paused = gap is not None or self._pause(upto)
        # No speech in the window and nothing tentative: skip decoding, slide the window.
        if not self._had_speech_since_commit and not self.policy.tentative:
            keep = int(0.3 * SR)
            self.window_start = max(self.window_start, ((upto - keep) // HOP) * HOP)
            return
        if (not paused and not final and not self.policy.tentative and self.policy.utterance_commits == 0
                and upto - self._speech_start < self.cfg.first_commit_lookahead_s * SR):
            # nothing heard yet can commit before the next step (an utterance's first words
            # need this much audio after them), and that step will have a hypothesis of its own
            # to agree with: skip the decode
            return
        end = upto
        if paused and not final:
            end = min(upto, speech_end + int(0.25 * SR))
        if self._context_start is not None:
            # the utterance's first decode: the end of the previous one goes back in front, its
            # committed words forced as the prefix, so the first words are heard in context
            self.window_start, self._context_start = min(self.window_start, self._context_start), None
        start = self.window_start
        if end - start < int(0.3 * SR):
            return
        audio = self.ring.read(start, end)
        prefix = self._window_prefix()
        words = self.asr.transcribe_window(audio, start, self._prompt(), prefix)
        self.steps += 1
        off = start / SR
        words = [Word(w.text, w.start + off, w.end + off, w.probability) for w in words]
        prefix_text = join_words(prefix)
        new = split_prefix(words, prefix_text)
        if new is None:  # the model disagreed with its forced prefix: keep only later words
            last = self.policy.last_committed_end
            new = [w for w in words if w.start >= last - 0.05]
        if not self.sep:
            # Chinese/Japanese only: there Whisper re-reads the last clause after a forced prefix;
            # on English the guard cost more than it saved (asterisk_session, --fast: WER 9.68 %
            # with it, 7.58 % without)
            new = drop_echo(new, self.policy.committed)
        now = self.clock.now()
        silent_from = None
        if self.vad is not None and self._had_speech_since_commit and self._last_speech_end < end:
            silent_from = self._last_speech_end / SR  # the VAD heard nothing since
        committed, seen = self.policy.insert(new, now, audio_end=end / SR, silent_from=silent_from)
        pause_after = False
        if paused or final:
            more, more_seen = self.policy.flush()
            committed += more
            seen += more_seen
            pause_after = True
        if committed:
            self.bus.publish(CommittedWords(tuple(committed), tuple(seen), now, pause_after))
            lookahead = join_words(self.policy.tentative)
            for seg in self.segmenter.feed(committed, pause_after, lookahead):
                self._send(seg)
        elif pause_after:
            for seg in self.segmenter.feed([], True):
                self._send(seg)
        if pause_after:
            if self.policy.committed:
                self._utterance_ends = (self._utterance_ends + (self.policy.committed[-1].end,))[-64:]
            self._had_speech_since_commit = gap is not None  # the next utterance has begun
            cut = max(self.policy.last_committed_end * SR, speech_end)
            if gap is not None:  # as after a pause seen step by step: 0.3 s of it before the speech
                cut = max(cut, gap[1] - int(0.3 * SR))
            self.window_start = max(self.window_start, (int(cut) // HOP) * HOP)
            self._context_start = self._context_from(speech_end)
        self._trim_window(upto)
        tentative = self.policy.tentative
        ev = TentativeText(tuple(tentative), self.segmenter.pending_text, now)
        self.bus.publish(ev)
        if tentative and self.preview_out is not None:
            self.preview_out.put(ev)

    def _context_from(self, speech_end: int) -> int | None:
        """Start of the committed words that reach into the last ``context_s`` before
        ``speech_end`` (whole words, so the forced prefix matches the audio), or None."""
        if self.cfg.context_s <= 0:
            return None
        since = speech_end / SR - self.cfg.context_s
        committed = self.policy.committed
        i = len(committed)
        while i > 0 and committed[i - 1].end > since:
            i -= 1
        return (int(committed[i].start * SR) // HOP) * HOP if i < len(committed) else None

    def _trim_window(self, upto: int) -> None:
        """Keep the window short (the decoder's cost grows with it): past ``trim_after_s`` cut at
        the last committed sentence end, else at the last committed clause mark; past
        ``max_window_s`` at the last committed word. Committed text stays as the prompt."""
        length = (upto - self.window_start) / SR
        spaced = self.sep == " "
        # space-delimited languages lose more from short context (measured: en WER 7.6 % with
        # sentence-end trimming vs 11.4 % with clause trimming), so they keep longer windows
        trim_after = self.cfg.trim_after_s * (2 if spaced else 1)
        max_window = self.cfg.max_window_s * (2 if spaced else 1)
        if length <= trim_after:
            return
        ws = self.window_start / SR
        inside = [w for w in self._window_prefix() if w.end > ws]
        cut = None
        for marks in ((SENTENCE_END,) if spaced else (SENTENCE_END, CLAUSE_END)):
            for w in inside:
                t = w.text.strip()
                if t and t[-1] in marks:
                    cut = w.end
            if cut is not None:
                break
        if cut is None and length > max_window and inside:
            cut = inside[-1].end
        if cut is not None:
            self.window_start = max(self.window_start, (int(cut * SR) // HOP) * HOP)

    def _send(self, seg: Segment) -> None:
        if seg.seq <= self._sent_seq:  # a step replayed after a restart: already with MT
            return
        self._sent_seq = seg.seq
        self.bus.publish(seg)
        self.seg_out.put(seg)
        self.metric("mt_queue_depth", len(self.seg_out))


def _not_ended(t: threading.Thread) -> bool:
    """Listed but not started yet, or running."""
    return t.ident is None or t.is_alive()


def _copy_state(obj) -> dict:
    """An object's attributes (or a dict of them) with the lists copied (their items are immutable)."""
    d = obj if isinstance(obj, dict) else vars(obj)
    return {k: (list(v) if isinstance(v, list) else v) for k, v in d.items()}


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
        super().__init__("mt", bus, clock)
        # a SpeculationController: the sentence's latest full translation is the next call's draft
        self.speculation = speculation
        self.beam_size = cfg.beam_size
        self.micro_batch = cfg.micro_batch
        self._draft = ""
        self.gate = gate
        self.mt, self.seg_in, self.preview_in, self.tts_out = mt, seg_in, preview_in, tts_out
        self.upstream, self.cfg = upstream, cfg
        self._sent_src = ""
        self._sent_tgt = ""
        self._slowed_upstream = False
        self._downstream_slow = False
        self._last_preview = -1e9
        self.translations = 0

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
        while True:
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
                if self.gate is not None:
                    with self.gate.urgent():
                        self._translate_segment(seg)
                else:
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
            out, outcome = self.mt.translate_with_draft(source, draft, target_prefix=prefix, beam_size=beam)
            spec.record(outcome, stream)
        else:
            out = self.mt.translate(source, target_prefix=prefix, beam_size=beam)
        self._draft = out
        return out

    def _join(self, a: str, b: str) -> str:
        if not a:
            return b
        lang = getattr(self.mt, "source_lang", "")
        return a + ("" if lang in ("zh", "ja") else " ") + b

    def _translate_segment(self, seg: Segment) -> None:
        started = self.clock.now()
        src = self._join(self._sent_src, seg.text)
        prefix = _open_prefix(self._sent_tgt)
        full = self._mt(src, prefix, self.beam_size, "mt")
        new = _tail_after(full, prefix)
        if not any(c.isalnum() for c in new) and self._sent_tgt and units_of(seg.text) >= 2:
            # the model closed the sentence at the forced prefix: translate the piece on its own
            new = self.mt.translate(seg.text, beam_size=self.beam_size).strip()
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


def units_of(text: str) -> int:
    cjk = sum(1 for c in text if "\u3400" <= c <= "\u9fff")
    return cjk + len([w for w in text.split() if not any("\u3400" <= c <= "\u9fff" for c in w)])


def _tail_after(full: str, prefix: str) -> str:
    if not prefix:
        return full.strip()
    if full.startswith(prefix):
        return full[len(prefix):].strip()
    return full.strip()  # the backend ignored the prefix; show what it produced


@dataclass
class TTSConfig:
    # dub lag (from the end of the source words to the dub's start) beyond this speeds speech up.
    # 1.5 s (was 2.5): with 4-character zh pieces the dub speaks ~10 % more words; zh_meeting,
    # 3 interleaved runs: dub p50 1186 vs 1500 ms, p95 2577 vs 3495 ms, ~88 % of it still at 1.0x
    catch_up_after_s: float = 1.5
    max_speed: float = 1.6
    skip_after_s: float = 8.0  # beyond this, skip a segment rather than drift ever later
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
                 bus, clock, played_at, gate: PriorityGate | None = None):
        super().__init__("tts", bus, clock)
        self.gate = gate
        self.tts, self.tr_in, self.upstream, self.cfg = tts, tr_in, upstream, cfg
        self.played_at = played_at
        self.dub_end = 0.0  # wall time at which the dub timeline is free
        self.skipped = 0
        self.chunks = 0
        self._slowed = False

    def loop(self) -> None:
        resumed = self.retake()  # (translation, clause index, nothing spoken yet) of a replaced worker
        if resumed is not None:
            self._speak(*resumed)
        self._loop()

    def _loop(self) -> None:
        while True:
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
        now = self.clock.now()
        heard = self.played_at(tr.src_end)
        lag = max(now, self.dub_end) - heard
        if from_clause == 0 and lag > self.cfg.skip_after_s:
            self.skipped += 1
            self.bus.publish(DubChunk(tr.seq, np.zeros(0, np.float32), self.tts.sample_rate, tr.target,
                                      now, now, True, tr.src_end, 1.0, True))
            self.metric("dub_skipped", self.skipped)
            return
        speed = 1.0
        if lag > self.cfg.catch_up_after_s:
            speed = min(self.cfg.max_speed, 1.0 + (lag - self.cfg.catch_up_after_s) / 4.0)
        for i, clause in enumerate(clauses(tr.target)):
            if i < from_clause:
                continue  # spoken before the restart
            # a clause that failed before any of its audio came out is spoken again; one cut
            # off mid-way is skipped (re-speaking it would repeat what was heard)
            self.in_flight = (tr, i, first)
            t0 = self.clock.now()
            rate, cfg = self.tts.sample_rate, self.cfg
            if first and self.gate is not None:  # the first audio of a segment is latency-critical
                with self.gate.urgent():
                    chunks = list(trim_clause(self.tts.synthesize(clause, speed=speed), rate,
                                              cfg.keep_lead_s, cfg.keep_trail_s))
            else:
                chunks = trim_clause(self.tts.synthesize(clause, speed=speed), rate,
                                     cfg.keep_lead_s, cfg.keep_trail_s)
            for audio in chunks:
                ready = self.clock.now()
                start = max(ready, self.dub_end)
                dur = len(audio) / self.tts.sample_rate
                self.dub_end = start + dur
                self.chunks += 1
                self.bus.publish(DubChunk(tr.seq, audio, self.tts.sample_rate, clause, ready, start,
                                          first, tr.src_end, speed))
                first = False
                self.in_flight = (tr, i + 1, False)
            self.busy_s += self.clock.now() - t0
        self.in_flight = None
