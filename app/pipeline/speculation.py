"""Speculative decoding bookkeeping, independent of the model library: what a verified draft
saved, the rollback rule, and the events it emits.

A backend that can verify a draft (``SpeculativeMT``) returns a ``DraftOutcome`` per call. A
draft is *rejected* when it let the backend skip no decoder step; after ``reject_limit``
consecutive rejections the stream decodes plainly for ``cooldown_s`` (mode ``auto``), so
speculation never costs much more than it saves. Mode ``on`` never rolls back; ``off`` never drafts.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Protocol

MODES = ("auto", "on", "off")


@dataclass(frozen=True)
class DraftOutcome:
    """One verified draft. Token counts exclude a forced target prefix."""

    drafted: int  # draft tokens offered for verification
    accepted: int  # the longest prefix of them the target model verified
    saved_steps: int  # decoder steps the backend did not have to run thanks to the draft

    @property
    def rejected_tokens(self) -> int:
        return self.drafted - self.accepted

    @property
    def rejected(self) -> bool:
        return self.saved_steps <= 0


class SpeculativeMT(Protocol):
    """An MT backend that can verify a draft of its output before decoding."""

    def translate_with_draft(self, source: str, draft: str, target_prefix: str = "",
                             beam_size: int | None = None) -> tuple[str, DraftOutcome]: ...


@dataclass(frozen=True)
class SpeculationEvent:
    """Speculation switched for a stream: ``fallback`` (rollback to plain decoding), ``resume``
    (drafting again after the cool-down), ``disabled``/``enabled`` (by the degradation policy)."""

    kind: str
    stream: str
    reason: str
    at: float


@dataclass
class SpeculationConfig:
    mode: str = "auto"
    reject_limit: int = 3  # consecutive rejected drafts that trigger the rollback (auto)
    cooldown_s: float = 10.0  # plain decoding for this long after a rollback


@dataclass
class _Stream:
    consecutive_rejects: int = 0
    plain_until: float | None = None


class SpeculationController:
    """Decides per call whether a stream drafts, and keeps the statistics. Thread-safe: the MT
    stage records outcomes while the policy may disable speculation from another thread."""

    def __init__(self, cfg: SpeculationConfig, clock, publish: Callable[[object], None] = lambda e: None):
        if cfg.mode not in MODES:
            raise ValueError(f"speculation mode must be one of {', '.join(MODES)}")
        self.cfg, self.clock, self.publish = cfg, clock, publish
        self._streams: dict[str, _Stream] = {}
        self._lock = threading.Lock()
        self.policy_disabled = False
        self.drafts = 0
        self.accepted_tokens = 0
        self.rejected_tokens = 0
        self.rejected_drafts = 0
        self.full_accepts = 0  # drafts that made decoding unnecessary
        self.saved_steps = 0
        self.fallbacks = 0
        self.plain_calls = 0  # calls made without a draft while speculation was wanted
        self.events: list[SpeculationEvent] = []

    def _emit(self, kind: str, stream: str, reason: str) -> None:
        ev = SpeculationEvent(kind, stream, reason, round(self.clock.now(), 3))
        self.events.append(ev)
        self.publish(ev)

    def should_draft(self, stream: str = "mt") -> bool:
        if self.cfg.mode == "off":
            return False
        with self._lock:
            if self.policy_disabled:
                self.plain_calls += 1
                return False
            st = self._streams.setdefault(stream, _Stream())
            if st.plain_until is None:
                return True
            if self.clock.now() < st.plain_until:
                self.plain_calls += 1
                return False
            st.plain_until = None
            st.consecutive_rejects = 0
        self._emit("resume", stream, f"plain decoding for {self.cfg.cooldown_s:g} s is over")
        return True

    def record(self, outcome: DraftOutcome, stream: str = "mt") -> None:
        fallback = False
        with self._lock:
            st = self._streams.setdefault(stream, _Stream())
            self.drafts += 1
            self.accepted_tokens += outcome.accepted
            self.rejected_tokens += outcome.rejected_tokens
            self.saved_steps += max(0, outcome.saved_steps)
            if outcome.rejected:
                self.rejected_drafts += 1
                st.consecutive_rejects += 1
                if self.cfg.mode == "auto" and st.consecutive_rejects >= self.cfg.reject_limit:
                    st.plain_until = self.clock.now() + self.cfg.cooldown_s
                    st.consecutive_rejects = 0
                    self.fallbacks += 1
                    fallback = True
            else:
                self.full_accepts += 1
                st.consecutive_rejects = 0
        if fallback:
            self._emit("fallback", stream, f"{self.cfg.reject_limit} consecutive drafts saved no decoding: "
                                           f"plain decoding for {self.cfg.cooldown_s:g} s")

    def set_policy_enabled(self, enabled: bool, reason: str) -> bool:
        """The degradation policy's switch; returns whether it changed anything."""
        if self.cfg.mode == "off":
            return False
        with self._lock:
            if self.policy_disabled == (not enabled):
                return False
            self.policy_disabled = not enabled
        self._emit("enabled" if enabled else "disabled", "*", reason)
        return True

    def summary(self) -> dict:
        with self._lock:
            offered = self.accepted_tokens + self.rejected_tokens
            return {
                "mode": self.cfg.mode,
                "drafts": self.drafts,
                "accepted_tokens": self.accepted_tokens,
                "rejected_tokens": self.rejected_tokens,
                "acceptance": round(self.accepted_tokens / offered, 3) if offered else None,
                "rejected_drafts": self.rejected_drafts,
                "full_accepts": self.full_accepts,
                "saved_decoder_steps": self.saved_steps,
                "fallbacks": self.fallbacks,
                "plain_calls": self.plain_calls,
                "events": [{"kind": e.kind, "stream": e.stream, "reason": e.reason, "at": e.at}
                           for e in self.events],
            }
