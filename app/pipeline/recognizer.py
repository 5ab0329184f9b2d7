"""Streaming recognition policy, without threads: a sliding window over the audio, decoded step
by step, with LocalAgreement-2 commits (``app.pipeline.stability``), a VAD gate and pause
detection, window trimming, the prompt and the forced prefix, and the cut into translatable
segments. ``ASRStage`` runs one on a worker thread; tests drive one directly.

    rec = Recognizer(asr, vad, ASRConfig(), segmenter, now=clock.now)
    rec.insert_audio(block)      # 16 kHz mono float32 (or share a ring another thread writes)
    for step in rec.process():   # one step over everything inserted
        step.committed, step.tentative, step.segments
    rec.finish()                 # end of input: the rest is committed and cut
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from app.accel.features import frame_features
from app.core.audio import HOP, SR
from app.core.text import CLAUSE_END, SENTENCE_END, word_sep
from app.pipeline.gate import Hysteresis
from app.pipeline.messages import Segment, join_words
from app.pipeline.protocols import ASRBackend, VADBackend, Word
from app.pipeline.queues import MonotonicClock
from app.pipeline.ringbuffer import AudioRing, ReaderCursor
from app.pipeline.segmenter import Segmenter, SegmenterConfig
from app.pipeline.stability import LocalAgreement, drop_echo, skip_prefix, split_prefix


@dataclass
class ASRConfig:
    step_s: float = 0.5
    max_step_s: float = 4.0
    trim_after_s: float = 4.0  # trim the window at a committed sentence end past this length
    max_window_s: float = 7.0  # hard limit: trim to the last committed word
    pause_s: float = 0.5  # VAD silence that ends an utterance
    vad_threshold: float = 0.3  # speech starts above this probability (app.pipeline.gate) ...
    vad_off_threshold: float = 0.15  # ... and goes on until it falls below this
    # frame RMS below this (dBFS) is silence: near digital silence only (at -60 dBFS, 15-30 % of
    # the frames of speech recorded at -33 dBFS peak were gated out, and a sentence was lost)
    silence_db: float = -80.0
    catch_up: bool = True  # real time: each step takes everything that arrived
    commit_lookahead_s: float = 0.0  # audio a confirming hypothesis must have heard after a word
    first_commit_lookahead_s: float = 0.0  # the same for an utterance's first commit
    confident_prob: float = 0.0  # a word this sure commits on one hypothesis (0: always wait for two)
    confident_lookahead_s: float = 0.0  # the audio that one hypothesis must have heard after it
    context_s: float = 0.0  # audio of the previous utterance put back in front of the next one


@dataclass
class Step:
    """What one decode of the window gave (or, from ``finish``, the last segments alone)."""

    at: float  # clock time of the result
    committed: list[Word] = field(default_factory=list)  # newly committed: they never change again
    first_seen: list[float] = field(default_factory=list)  # when each first appeared in a hypothesis
    pause_after: bool = False  # the utterance ended after them (a VAD pause, or the end of input)
    segments: list[Segment] = field(default_factory=list)  # pieces cut for translation
    tentative: list[Word] | None = None  # the uncommitted tail; None when nothing was decoded
    pending_text: str = ""  # committed text not yet in a segment
    window: tuple[int, int] = (0, 0)  # the samples decoded


def _plain_call(fn, *args, **kwargs):
    return fn(*args, **kwargs)


class Recognizer:
    """``asr`` and ``vad`` are plain attributes, read at each step (a policy may swap the
    model mid-session). ``call(fn, *args)`` makes every model call (the stage times them for
    its stall watchdog). ``ring`` is the audio: by default its own, filled by ``insert_audio``."""

    # the state a step changes: restored by ``rollback`` to replay a step a worker did not finish
    _STATE = ("window_start", "_vad_pos", "_last_speech_end", "_had_speech_since_commit", "processed", "_gap",
              "_context_start", "_speech_start", "_utterance_ends")

    def __init__(self, asr: ASRBackend, vad: VADBackend | None, cfg: ASRConfig | None = None,
                 segmenter: Segmenter | None = None, *, ring: AudioRing | None = None,
                 now: Callable[[], float] | None = None, accel: str = "numpy",
                 call: Callable = _plain_call, ring_seconds: float = 120.0):
        self.asr, self.vad = asr, vad
        self.cfg = cfg or ASRConfig()
        self.now = now or MonotonicClock().now
        self.segmenter = segmenter or Segmenter(SegmenterConfig(), self.now)
        self.ring = ring or AudioRing(int(ring_seconds * SR))
        self.accel = accel
        self.call = call
        self.policy = LocalAgreement(self.cfg.commit_lookahead_s, self.cfg.first_commit_lookahead_s,
                                     self.cfg.confident_prob, self.cfg.confident_lookahead_s)
        self.cursor = ReaderCursor()  # position: samples read; overruns: times unread audio was lost
        self.sep = word_sep(getattr(asr, "output_language", asr.language))
        self.steps = 0  # decodes
        self.processed = 0  # samples taken by completed steps
        self.window_start = 0
        self._vad_pos = 0
        self._last_speech_end = 0  # sample index
        self._gap: tuple[int, int] | None = None  # a pause with speech after it, not yet acted on
        self._speech_start = 0  # where the current utterance's speech began (sample index)
        self._context_start: int | None = None  # where the next utterance's window will begin
        self._had_speech_since_commit = False
        self._utterance_ends: tuple[float, ...] = ()  # end times of utterances' last committed words
        self.checkpoint: dict | None = None
        self._gate = Hysteresis(self.cfg.vad_threshold, self.cfg.vad_off_threshold)
        self.voiced = None  # a VoicedLog (app.pipeline.coverage): every frame the gate took for speech

    # -- the API ------------------------------------------------------------------------------
    def insert_audio(self, samples: np.ndarray) -> None:
        self.ring.write(samples)

    def process(self, upto: int | None = None, final: bool = False) -> list[Step]:
        """One step over the audio up to sample ``upto`` (default: all of it); ``final``: the
        input ends there. Returns a Step per decode (none in silence, two when an utterance
        ended inside the step and the input ends too)."""
        self._skip_lost_audio()
        upto = max(self.processed, self.ring.written if upto is None else upto)
        # committed points: before the VAD, then before the decode (the VAD model keeps state
        # of its own, so audio it has seen is never fed to it twice)
        self.checkpoint = self.snapshot()
        self._update_vad(upto)
        self.checkpoint = self.snapshot()
        out = self._step(upto, final)
        self.processed = self.cursor.position = upto
        return out

    def finish(self) -> list[Step]:
        """End of input: decode the rest, commit what is tentative, cut what is left."""
        return self.process(final=True) + [self.flush()]

    def flush(self) -> Step:
        """The committed words not yet in a segment, as the last segment."""
        return Step(self.now(), segments=self.segmenter.flush())

    # -- restart state ------------------------------------------------------------------------
    def snapshot(self) -> dict:
        """The state before a step: the step can be replayed from here."""
        return {"scalars": {k: getattr(self, k) for k in self._STATE},
                "policy": _copy_state(self.policy), "segmenter": _copy_state(self.segmenter)}

    def rollback(self) -> str:
        """Back to the last checkpoint; says where recognition resumes."""
        cp = self.checkpoint
        if cp is not None:
            for k, v in cp["scalars"].items():
                setattr(self, k, v)
            vars(self.policy).update(_copy_state(cp["policy"]))
            vars(self.segmenter).update(_copy_state(cp["segmenter"]))
            self.cursor.position = self.processed
        return f"sample {self.processed} ({self.processed / SR:.2f} s), {len(self.policy.committed)} committed words"

    # -- the ring -----------------------------------------------------------------------------
    def _skip_lost_audio(self) -> None:
        """The writer overwrites the oldest audio and never waits (live capture): a recogniser
        that fell a ring's length behind has lost audio. That is an overrun when audio it had not
        read yet was lost; either way it goes on from the oldest audio the ring still holds.
        Checked before each read: the writer goes on while a step runs."""
        oldest = self.ring.oldest
        if oldest > self.processed:
            self.cursor.overruns += 1
            self.processed = self.cursor.position = oldest
        if self.window_start < oldest:
            self.window_start = -(-oldest // HOP) * HOP
        if self._context_start is not None and self._context_start < oldest:
            self._context_start = None
        self._vad_pos = max(self._vad_pos, oldest)
        self._speech_start = max(self._speech_start, oldest)

    # -- VAD ----------------------------------------------------------------------------------
    def _update_vad(self, upto: int) -> None:
        if self.vad is None:
            self._last_speech_end = upto
            self._had_speech_since_commit = True
            return
        self._skip_lost_audio()
        fs = self.vad.frame_samples
        n_frames = (upto - self._vad_pos) // fs
        if n_frames <= 0:
            return
        audio = np.ascontiguousarray(self.ring.read(self._vad_pos, self._vad_pos + n_frames * fs))
        probs = self.call(self.vad.process, audio)
        # energy gate (accel kernel): frames near digital silence are never speech, whatever
        # the VAD model says about them
        rms_db, _ = frame_features(audio, fs, backend=self.accel)
        speech = self._gate(probs, audio) & (rms_db[: len(probs)] > self.cfg.silence_db)
        if self.voiced is not None:
            self.voiced.add(self._vad_pos, speech, fs)
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

    # -- the window, its prompt and prefix ----------------------------------------------------
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

    # -- a step -------------------------------------------------------------------------------
    def _step(self, upto: int, final: bool) -> list[Step]:
        gap, self._gap = self._gap, None
        if gap is None:
            return self._decode(self._last_speech_end, upto, final, None)
        # the utterance ended inside this step's audio: recognise up to there
        out = self._decode(gap[0], upto, False, gap)
        if final:
            out += self._decode(upto, upto, True, None)
        return out

    def _hypothesis(self, start: int, end: int) -> list[Word]:
        """Decode the window's audio ``[start, end)``: the words after the committed ones, in
        source time, echoes of the committed text taken out."""
        audio = self.ring.read(start, end)
        prefix = self._window_prefix()
        words = self.call(self.asr.transcribe_window, audio, start, self._prompt(), prefix)
        self.steps += 1
        off = start / SR
        words = [Word(w.text, w.start + off, w.end + off, w.probability) for w in words]
        new = split_prefix(words, join_words(prefix))
        if new is None:  # spelled differently: skip as many characters
            new = skip_prefix(words, join_words(prefix))
        if new is None:  # the model disagreed with its forced prefix: keep only later words
            last = self.policy.last_committed_end
            new = [w for w in words if w.start >= last - 0.05]
        # Chinese/Japanese: there Whisper re-reads the last clause after a forced prefix. On
        # English the full guard cost more than it saved (asterisk_session, --fast: WER 9.68 %
        # with it, 7.58 % without): there only an exact repeat of the committed end, squeezed
        # or inside the committed time, goes
        return drop_echo(new, self.policy.committed, spaced=bool(self.sep))

    def _decode(self, speech_end: int, upto: int, final: bool, gap: tuple[int, int] | None) -> list[Step]:
        paused = gap is not None or self._pause(upto)
        # No speech in the window and nothing tentative: skip decoding, slide the window.
        if not self._had_speech_since_commit and not self.policy.tentative:
            keep = int(0.3 * SR)
            self.window_start = max(self.window_start, ((upto - keep) // HOP) * HOP)
            return []
        if (not paused and not final and not self.policy.tentative and self.policy.utterance_commits == 0
                and upto - self._speech_start < self.cfg.first_commit_lookahead_s * SR):
            # nothing heard yet can commit before the next step (an utterance's first words
            # need this much audio after them), and that step will have a hypothesis of its own
            # to agree with: skip the decode
            return []
        end = upto
        if paused and not final:
            end = min(upto, speech_end + int(0.25 * SR))
        if self._context_start is not None:
            # the utterance's first decode: the end of the previous one goes back in front, its
            # committed words forced as the prefix, so the first words are heard in context
            self.window_start, self._context_start = min(self.window_start, self._context_start), None
        self._skip_lost_audio()
        start = self.window_start
        short = end - start < int(0.3 * SR)  # too little audio to decode
        if short and not (final and self.policy.tentative):
            return []
        step = Step(self.now(), window=(start, end))
        silent_from = None
        if self.vad is not None and self._had_speech_since_commit and self._last_speech_end < end:
            silent_from = self._last_speech_end / SR  # the VAD heard nothing since
        committed, seen = [], []
        if not short:  # (at the end of input the tentative words are flushed, decoded or not)
            committed, seen = self.policy.insert(self._hypothesis(start, end), step.at, audio_end=end / SR,
                                                 silent_from=silent_from)
        if (paused or final) and self.policy.unconfirmed:
            # the tail about to be flushed rests on this one hypothesis: a word it dropped would
            # be lost as the window moves past it. Decode once more, with what just committed
            # forced and, where there is any, a little more of the silence after the speech
            # (a new input: a greedy decoder gives the same words for the same one)
            limit = upto if gap is None else gap[1]
            again = max(end, min(limit, speech_end + int(0.45 * SR)))
            if committed or again > end:
                hyp = self._hypothesis(start, again)
                if hyp:  # (a decode that comes back empty says nothing of the words heard before)
                    end = again
                    step.window = (start, end)
                    more, more_seen = self.policy.insert(hyp, step.at, audio_end=end / SR, silent_from=silent_from)
                    committed += more
                    seen += more_seen
        if paused or final:
            more, more_seen = self.policy.flush()
            committed += more
            seen += more_seen
            step.pause_after = True
        step.committed, step.first_seen = committed, seen
        if committed:
            lookahead = join_words(self.policy.tentative)
            step.segments = self.segmenter.feed(committed, step.pause_after, lookahead)
        elif step.pause_after:
            step.segments = self.segmenter.feed([], True)
        if step.pause_after:
            if self.policy.committed:
                self._utterance_ends = (self._utterance_ends + (self.policy.committed[-1].end,))[-64:]
            self._had_speech_since_commit = gap is not None  # the next utterance has begun
            cut = max(self.policy.last_committed_end * SR, speech_end)
            if gap is not None:  # as after a pause seen step by step: 0.3 s of it before the speech
                cut = max(cut, gap[1] - int(0.3 * SR))
            self.window_start = max(self.window_start, (int(cut) // HOP) * HOP)
            self._context_start = self._context_from(speech_end)
        self._trim_window(upto)
        step.tentative = list(self.policy.tentative)
        step.pending_text = self.segmenter.pending_text
        return [step]


def _copy_state(obj) -> dict:
    """An object's attributes (or a dict of them) with the lists copied (their items are immutable)."""
    d = obj if isinstance(obj, dict) else vars(obj)
    return {k: (list(v) if isinstance(v, list) else v) for k, v in d.items()}
