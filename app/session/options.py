"""What the user asked of a session, and its validation (one-line errors)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from app.core.errors import UserError
from app.core.profanity import DEFAULT_MODE as PROFANITY_DEFAULT
from app.core.profanity import MODES as PROFANITY_MODES
from app.session.tuning import mt_beam

RESOURCES = Path(__file__).resolve().parent.parent.parent / "resources"
DEMO_CLIP = RESOURCES / "demo" / "zh_meeting_demo.wav"
WARMUP_CLIP = RESOURCES / "demo" / "warmup_zh.wav"


@dataclass
class SessionOptions:
    pair: str = "zh-en"
    no_tts: bool = False
    serial: bool = False
    realtime: bool = True
    # None: the tuning table's value for the recognised language (app/session/tuning.py)
    beam: int | None = None
    asr_step: float | None = None
    commit_lookahead: float | None = None
    first_commit_lookahead: float | None = None
    asr_context: float | None = None
    confident_commit: float | None = None
    confident_lookahead: float | None = None
    asr_model: str | None = None
    preview: str = "auto"  # auto | on | off
    eager: int | None = None
    threads: int = 0
    accel: str | None = None
    speculative: str = "auto"  # auto | on | off (MT drafts verified with score_batch)
    policy: str = "on"  # adaptive degradation
    # the second pass: each whole sentence recognised and translated again, and shown, exported
    # and dubbed in place of the first pass's pieces (off: the first pass's pieces stay)
    final_pass: bool = True
    # seconds of the previous final's speech the second pass decodes before each sentence (None: 5)
    final_lead_in: float | None = None
    # the silence that ends a sentence for the second pass (None: FinalConfig.pause_s), and how
    # long, in real time, a final may wait for the first pass to show its last piece (None: 1 s)
    final_pause: float | None = None
    final_wait: float | None = None
    # the silence after which, in real time, the second pass decodes a sentence before its pause is
    # complete (None: FinalConfig.early_s; 0: off)
    final_early: float | None = None
    # what translates the finals: auto (the qwen-1.5b LLM pack when installed, else the pair's
    # OPUS-MT), opus, or an LLM pack id; in real time an LLM final that would come later than
    # final_mt_budget seconds after its sentence ended is translated by OPUS-MT instead
    final_mt: str = "auto"
    final_mt_budget: float | None = None
    # what subtitles, exports and the dub make of profanity: masked (f***), removed or raw
    # (app/core/profanity.py; the word lists are resources/profanity/<lang>.txt)
    profanity: str = PROFANITY_DEFAULT
    extra: dict = field(default_factory=dict)

    def validate(self) -> None:
        if self.beam is not None and self.beam < 1:
            raise UserError("--beam must be at least 1")
        if self.asr_step is not None and not 0.2 <= self.asr_step <= 10:
            raise UserError("--asr-step must be between 0.2 and 10 seconds")
        for flag, value in (("--commit-lookahead", self.commit_lookahead),
                            ("--first-commit-lookahead", self.first_commit_lookahead),
                            ("--asr-context", self.asr_context),
                            ("--confident-lookahead", self.confident_lookahead)):
            if value is not None and not 0 <= value <= 3:
                raise UserError(f"{flag} must be between 0 and 3 seconds")
        if self.final_lead_in is not None and not 0 <= self.final_lead_in <= 10:
            raise UserError("--final-lead-in must be between 0 (off) and 10 seconds")
        if self.final_pause is not None and not 0.2 <= self.final_pause <= 3:
            raise UserError("--final-pause must be between 0.2 and 3 seconds")
        if self.final_wait is not None and not 0 <= self.final_wait <= 10:
            raise UserError("--final-wait must be between 0 and 10 seconds")
        if self.final_early is not None and self.final_early != 0 and not 0.25 <= self.final_early <= 3:
            raise UserError("--final-early must be 0 (off) or between 0.25 and 3 seconds")
        if self.final_mt_budget is not None and not 0 < self.final_mt_budget <= 60:
            raise UserError("--final-mt-budget must be between 0 and 60 seconds")
        if self.confident_commit is not None and not 0 <= self.confident_commit <= 1:
            raise UserError("--confident-commit must be a probability between 0 (off) and 1")
        if self.preview not in ("auto", "on", "off"):
            raise UserError("--preview must be auto, on or off")
        if not 0 <= self.threads <= 256:
            raise UserError(f"--threads must be between 0 (all cores) and 256, got {self.threads}")
        if self.eager is not None and not 0 <= self.eager <= 1000:
            raise UserError(f"--eager must be between 0 (wait for clause marks) and 1000, got {self.eager}")
        if self.profanity not in PROFANITY_MODES:
            raise UserError(f"--profanity must be {', '.join(PROFANITY_MODES[:-1])} or {PROFANITY_MODES[-1]}, "
                            f"got {str(self.profanity)[:30]!r}")

    @property
    def mt_beam(self) -> int:
        """The MT beam this session uses (tuning.mt_beam: pieces greedy, whole sentences 4)."""
        return mt_beam(self.beam, whole_sentences=self.serial)

    @property
    def accel_request(self) -> str:
        return self.accel or os.environ.get("RELAY_ACCEL") or "auto"
