"""Every latency/quality default of a session, in one table, each with the measurement behind it.

The options a user leaves unset (``None`` in ``SessionOptions``) take the value of this table for
the language the recogniser outputs. docs/BENCHMARKS.md holds the runs the figures come from.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.text import unspaced



@dataclass(frozen=True)
class Tuning:
    # Recognition step: how much new audio each recognition step waits for.
    # zh/ja 0.25 s with a 0.25 s commit margin: zh-en subtitle p50 1.30 vs 1.50 s, p95 2.09 vs
    # 2.53 s, CER +0.4 points against 0.5 s steps. Other languages keep 0.5 s steps without a
    # margin (en WER 8.4 % with the short steps vs 6.7 %).
    asr_step: float
    # Audio heard after a word before it may commit.
    commit_lookahead: float
    # The same for an utterance's first commit, where short windows guess worst. zh_meeting
    # --fast: CER 6.43 vs 8.57 % with 0.5 s against none; real time, 3 interleaved runs: rtf 0.621
    # vs 0.672 with 0.75 s against 0.5 s at the same CER and subtitle p50 (an utterance is not
    # decoded before it has that much speech).
    first_commit_lookahead: float
    # Seconds of the previous utterance decoded again in front of the next. Off: 1.5 s lowered the
    # zh CER in --fast runs (bench/phase_cer.py: 5.48 vs 8.21 %) but not in real-time ones
    # (5.36-6.43 vs 5.71 %), and it costs ~0.1 rtf.
    asr_context: float
    # Probability at which a word commits on one hypothesis (0: off), and the audio that hypothesis
    # must have heard after it (LocalAgreement._confident). zh/ja 0.9 / 0.15 s: zh_meeting, real
    # time, 3 interleaved runs each: subtitle p50 1290 vs 1369 ms off, CER 4.29 vs 4.64 %; at 0.5
    # the --fast CER over four step phases rose to 7.95 % from 5.27 % (0.8: 5.98, 0.9: 5.71):
    # Whisper base's first reading of a word is often a homophone a second hypothesis corrects.
    # Other languages: off, not measured.
    confident_commit: float
    confident_lookahead: float
    # A stable piece goes to MT once it holds this many CJK characters / words. zh: replaying the
    # committed words of three traced real-time runs through the segmenter and the real MT (the
    # same recognised text for every setting): chrF 47.7 at 4, 47.2 at 5, 47.4 at 6, 45.4 at 3;
    # subtitle p50 ~150 ms lower at 4 than at 6 (real time, 3 interleaved runs: 989 vs 1179 ms).
    # Fragments translate ~10 % wordier, which the dub absorbs by catching up sooner
    # (TTSConfig.catch_up_after_s).
    eager: int
    # MT beam. Greedy for the pipeline's pieces, each of which continues its sentence's forced
    # translation (replayed zh_meeting pieces: chrF 48.3 greedy vs 44.9 at beam 4, 23 % faster);
    # beam 4 for whole sentences (zh_meeting's reference sentences: chrF 62.4 vs 60.2 greedy).
    mt_beam_pieces: int = 1
    mt_beam_sentences: int = 4
    # The second pass recognises each whole sentence with this beam (an offline decode's: faster-
    # whisper's default), the previous finals as prompt.
    final_asr_beam: int = 5


TUNING = {
    "cjk": Tuning(asr_step=0.25, commit_lookahead=0.25, first_commit_lookahead=0.75, asr_context=0.0,
                  confident_commit=0.9, confident_lookahead=0.15, eager=4),
    "other": Tuning(asr_step=0.5, commit_lookahead=0.0, first_commit_lookahead=0.0, asr_context=0.0,
                    confident_commit=0.0, confident_lookahead=0.15, eager=4),
}


def tuning_for(lang: str) -> Tuning:
    """The defaults for a session whose recogniser outputs ``lang``."""
    return TUNING["cjk" if unspaced(lang) else "other"]


def asr_defaults(lang: str) -> tuple[float, float, float, float]:
    """Recognition step, commit margin, first-commit margin and context for ``lang``."""
    t = tuning_for(lang)
    return t.asr_step, t.commit_lookahead, t.first_commit_lookahead, t.asr_context


def confident_defaults(lang: str) -> tuple[float, float]:
    """The one-hypothesis commit probability and the audio it needs after the word."""
    t = tuning_for(lang)
    return t.confident_commit, t.confident_lookahead


def mt_beam(beam: int | None, whole_sentences: bool) -> int:
    """The MT beam a session uses: the user's, else the table's for pieces or whole sentences."""
    if beam is not None:
        return beam
    t = TUNING["other"]  # the same for every language
    return t.mt_beam_sentences if whole_sentences else t.mt_beam_pieces
