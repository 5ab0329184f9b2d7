"""Adaptive degradation: a rule table, a pure clock-driven engine with hysteresis, and the
pieces that feed it signals and carry out its decisions on a running pipeline.

Each rule watches one signal. While its condition holds it steps down one level, then another
after ``step_after_s`` if the condition still holds; it steps back up one level only after the
condition has been clear for ``hold_s``. The session's degradation level is the sum of the
rules' levels. Actions are names; the effective settings are derived from every active step, so
stepping up restores exactly what stepping down changed.
"""

from __future__ import annotations

import collections
import os
import threading
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np
import psutil

from app.pipeline.messages import Control, ControlMessage, FinalSentence, Translation
from app.pipeline.mt_stage import MTAdjust


@dataclass(frozen=True)
class Rule:
    name: str
    signal: str
    threshold: float
    steps: tuple[tuple[str, ...], ...]  # actions of each level, applied cumulatively
    op: str = ">"  # condition: signal > threshold (or <)
    hold_s: float = 15.0
    step_after_s: float = 5.0

    def bad(self, value: float | None) -> bool:
        if value is None:
            return False
        return value > self.threshold if self.op == ">" else value < self.threshold


def default_rules(english_source: bool = False, two_pass: bool = False, realtime: bool = True) -> tuple[Rule, ...]:
    """The rule table. A step that changes nothing in a given session is pruned from it when the
    session is built (``PipelineActuator.prune``): the policy never sits on a step that does nothing.
    A session that is not real time (a file read as fast as it goes) has no latency rules: its
    latencies are measured against when the audio arrived, seconds before it could have been
    heard, so they only say how far the file has been read ahead; acting on them lowered a
    ``--fast`` run's second-pass beam from 5 to 2 for most of zh_meeting."""
    latency_steps: tuple[tuple[str, ...], ...] = (("speculation:off", "beam:3"), ("beam:1",))
    if english_source:
        latency_steps += (("asr:tiny.en",),)
    rules = []
    if realtime:
        rules.append(Rule("latency", "subtitle_p99_s", 2.0, latency_steps, hold_s=15.0, step_after_s=5.0))
    if two_pass and realtime:
        # finals late: an LLM translating them hands them to the pair's translator (5-6x faster;
        # pruned where no LLM is in use), then the first pass thins out, and only then does the
        # second pass search less (no two rules share an action: a step another rule already
        # took would change nothing)
        rules.append(Rule("final", "final_lag_p95_s", 3.0,
                          (("final_mt:pair",), ("first_pass:thin",), ("final_beam:2",)),
                          hold_s=20.0, step_after_s=10.0))
    rules += [
        Rule("memory", "memory_frac", 0.9, (("micro_batch:half", "compute:int8"),), hold_s=30.0),
        Rule("cloud", "cloud_link", 0.5, (("local_models",),), op="<", hold_s=10.0, step_after_s=0.0),
    ]
    return tuple(rules)


@dataclass
class PolicyConfig:
    rules: tuple[Rule, ...] = field(default_factory=default_rules)
    latency_window_s: float = 20.0  # the p99 is over subtitle latencies of this last stretch
    final_window_s: float = 30.0  # the final lag's p95 is over finals of this last stretch
    memory_budget_mb: float = 2048.0  # process RSS budget on CPU (GPU: the device's memory)
    probe_every_s: float = 1.0


@dataclass(frozen=True)
class PolicyTransition:
    """A rule stepped down (``to_level > from_level``) or back up; ``level`` is the session's
    degradation level afterwards; ``effects`` say what each action really changed."""

    at: float
    rule: str
    from_level: int
    to_level: int
    level: int
    reason: str
    actions: tuple[str, ...]
    effects: tuple[str, ...] = ()
    active: tuple[str, ...] = field(default=(), compare=False, repr=False)  # every rule's active actions

    def as_dict(self) -> dict:
        return {"at": round(self.at, 3), "rule": self.rule, "from": self.from_level, "to": self.to_level,
                "level": self.level, "reason": self.reason, "actions": list(self.actions),
                "effects": list(self.effects)}


@dataclass(frozen=True)
class PolicySignal:
    """A signal sent from outside the pipeline (the cloud client's link health), delivered
    through the event bus so that every policy decision happens in one serialised place."""

    name: str
    value: float


@dataclass
class _RuleState:
    level: int = 0
    changed_at: float = 0.0
    clear_since: float | None = None


class PolicyEngine:
    """Pure: signals in, transitions out; time only from ``tick(now)``."""

    def __init__(self, rules: tuple[Rule, ...], start: float = 0.0):
        self.rules = rules
        self.signals: dict[str, float | None] = {}
        self._state = {r.name: _RuleState(changed_at=start) for r in rules}
        self._level_since = start
        self.seconds_at: dict[int, float] = collections.defaultdict(float)
        self.transitions: list[PolicyTransition] = []

    @property
    def level(self) -> int:
        return sum(s.level for s in self._state.values())

    def rule_level(self, name: str) -> int:
        return self._state[name].level

    def signal(self, name: str, value: float | bool | None) -> None:
        self.signals[name] = None if value is None else float(value)

    def active_actions(self) -> list[str]:
        out: list[str] = []
        for r in self.rules:
            for step in r.steps[: self._state[r.name].level]:
                out += step
        return out

    def tick(self, now: float) -> list[PolicyTransition]:
        out = []
        for r in self.rules:
            st = self._state[r.name]
            v = self.signals.get(r.signal)
            if r.bad(v):
                st.clear_since = None
                if st.level < len(r.steps) and (st.level == 0 or now - st.changed_at >= r.step_after_s):
                    out.append(self._move(r, st, +1, now, f"{r.signal} {v:.3g} {r.op} {r.threshold:g}"))
            elif st.level > 0:
                if st.clear_since is None:
                    st.clear_since = now
                elif now - st.clear_since >= r.hold_s:
                    out.append(self._move(r, st, -1, now, f"{r.signal} clear for {r.hold_s:g} s"
                                          + (f" (now {v:.3g})" if v is not None else "")))
                    st.clear_since = now  # each further step up needs its own hold time
        return out

    def _move(self, r: Rule, st: _RuleState, d: int, now: float, reason: str) -> PolicyTransition:
        before = self.level
        self.seconds_at[before] += max(0.0, now - self._level_since)
        self._level_since = now
        frm = st.level
        st.level += d
        st.changed_at = now
        actions = r.steps[frm] if d > 0 else tuple("undo " + a for a in r.steps[st.level])
        tr = PolicyTransition(now, r.name, frm, st.level, self.level, reason, actions,
                              active=tuple(self.active_actions()))
        self.transitions.append(tr)
        return tr

    def summary(self, now: float) -> dict:
        secs = dict(self.seconds_at)
        secs[self.level] = secs.get(self.level, 0.0) + max(0.0, now - self._level_since)
        return {"level": self.level, "max_level": max([0] + [t.level for t in self.transitions]),
                "seconds_at_level": {str(k): round(v, 3) for k, v in sorted(secs.items()) if v > 0 or k == 0},
                "transitions": [t.as_dict() for t in self.transitions]}


# -- carrying decisions out ------------------------------------------------------------------

@dataclass
class Settings:
    speculation: bool
    beam: int
    micro_batch: int
    int8: bool
    local_models: bool
    alt_asr: bool
    thin: bool = False
    final_beam: int | None = None
    final_llm: bool = True  # an LLM (when the session has one) translates the finals


def settings_for(actions: list[str], base_beam: int, base_micro_batch: int,
                 base_final_beam: int | None = None) -> Settings:
    beam = base_beam
    mb = base_micro_batch
    fb = base_final_beam
    for a in actions:
        if a.startswith("beam:"):
            beam = min(beam, int(a.split(":")[1]))
        elif a == "micro_batch:half":
            mb = max(1, mb // 2)
        elif a.startswith("final_beam:") and fb is not None:
            fb = min(fb, int(a.split(":")[1]))
    return Settings("speculation:off" not in actions, beam, mb, "compute:int8" in actions,
                    "local_models" in actions, "asr:tiny.en" in actions, "first_pass:thin" in actions, fb,
                    "final_mt:pair" not in actions)


class PipelineActuator:
    """Applies effective settings to a streaming pipeline's MT stage (through its control
    channel, so the change happens between two translations), the speculation controller, an
    optional recogniser swap and the cloud client's fallback hook. Each change returns a line
    saying what it did, or that it had no effect here and why."""

    def __init__(self, mt_stage=None, speculation=None, *, batched: bool = False,
                 asr_swap: Callable[[bool], str] | None = None, asr_control=None, final_stage=None):
        self.mt_stage, self.speculation, self.batched, self.asr_swap = mt_stage, speculation, batched, asr_swap
        self.asr_control, self.final_stage = asr_control, final_stage  # two passes: thinning, final beam
        self.cloud_hooks: list[Callable[[bool], None]] = []
        mt = getattr(mt_stage, "mt", None)
        self.base_beam = getattr(mt_stage, "beam_size", 1)
        self.base_micro_batch = getattr(mt_stage, "micro_batch", 1)
        self.base_compute = getattr(mt, "compute_type", None)
        self.base_final_beam = getattr(final_stage, "asr_beam", None)
        self.current = self._settings([])

    def _settings(self, actions: list[str]) -> Settings:
        return settings_for(actions, self.base_beam, self.base_micro_batch, self.base_final_beam)

    def changes(self, old: Settings, new: Settings) -> list[str]:
        """What of ``old`` → ``new`` this session can carry out (empty: the step does nothing)."""
        mt = getattr(self.mt_stage, "mt", None)
        out = []
        if (new.speculation != old.speculation and self.speculation is not None
                and hasattr(mt, "translate_with_draft") and self.speculation.cfg.mode != "off"):
            out.append("speculation")
        if new.beam != old.beam and self.mt_stage is not None:
            out.append("beam")
        if new.micro_batch != old.micro_batch and self.batched:
            out.append("micro_batch")
        if (new.int8 != old.int8 and hasattr(mt, "set_compute_type") and self.base_compute is not None
                and not self.base_compute.startswith("int8")):
            out.append("compute")
        if new.local_models != old.local_models:
            out.append("local_models")  # the cloud client registers its hook once connected
        if new.alt_asr != old.alt_asr and self.asr_swap is not None:
            out.append("asr")
        if new.thin != old.thin and self.asr_control is not None:
            out.append("thin")
        if new.final_beam != old.final_beam and self.final_stage is not None:
            out.append("final_beam")
        if new.final_llm != old.final_llm and getattr(self.final_stage, "llm", None) is not None:
            out.append("final_mt")
        return out

    def prune(self, rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
        """The rules with only the steps that change something here; a rule left with none goes."""
        out = []
        for r in rules:
            active: list[str] = []
            steps = []
            for step in r.steps:
                if self.changes(self._settings(active), self._settings(active + list(step))):
                    steps.append(step)
                    active += step
            if steps:
                out.append(replace(r, steps=tuple(steps)))
        return tuple(out)

    def apply(self, actions: list[str], reason: str) -> list[str]:
        new = self._settings(actions)
        old, self.current = self.current, new
        fx: list[str] = []
        mt = getattr(self.mt_stage, "mt", None)
        if new.thin != old.thin and self.asr_control is not None:
            self.asr_control.send(ControlMessage(Control.THIN if new.thin else Control.UNTHIN, reason, by="policy"))
            fx.append("first pass " + ("thinned (longer recognition steps)" if new.thin else "back to its steps"))
        if new.final_beam != old.final_beam and self.final_stage is not None:
            self.final_stage.asr_beam = new.final_beam
            fx.append(f"second-pass beam {old.final_beam} → {new.final_beam}")
        if new.final_llm != old.final_llm and getattr(self.final_stage, "llm", None) is not None:
            self.final_stage.llm_paused = not new.final_llm
            fx.append("finals translated by " + ("the pair's translator (the LLM paused)" if not new.final_llm
                                                 else "the LLM again"))
        if new.speculation != old.speculation:
            if self.speculation is None or not hasattr(mt, "translate_with_draft"):
                fx.append("no effect: this MT backend does not speculate")
            elif self.speculation.set_policy_enabled(new.speculation, reason):
                fx.append("speculation " + ("on" if new.speculation else "off"))
            else:
                fx.append("no effect: speculation is off (--speculative off)")
        adjust: dict = {}
        if new.beam != old.beam:
            if self.mt_stage is None:
                fx.append("no effect: no MT stage")
            else:
                adjust["beam_size"] = new.beam
                fx.append(f"MT beam {old.beam} → {new.beam}")
        if new.micro_batch != old.micro_batch and self.mt_stage is not None:
            adjust["micro_batch"] = new.micro_batch
            fx.append(f"micro-batch {old.micro_batch} → {new.micro_batch}" + (
                "" if self.batched else " (no effect here: a local session translates one segment at a time)"))
        if new.int8 != old.int8:
            fx.append(self._compute(mt, new.int8, adjust))
        if adjust:
            self.mt_stage.control.send(MTAdjust(reason, **adjust))
        if new.local_models != old.local_models:
            if not self.cloud_hooks:
                fx.append("no effect: not a cloud session")
            for hook in self.cloud_hooks:
                hook(new.local_models)
            if self.cloud_hooks:
                fx.append("local models" if new.local_models else "cloud models again")
        if new.alt_asr != old.alt_asr:
            fx.append(self.asr_swap(new.alt_asr) if self.asr_swap else
                      "no effect: no alternate recogniser loaded")
        return fx

    def _compute(self, mt, int8: bool, adjust: dict) -> str:
        if not hasattr(mt, "set_compute_type") or self.base_compute is None:
            return "no effect: the MT backend has no compute type to change"
        target = "int8" if int8 else self.base_compute
        if self.base_compute.startswith("int8"):
            return f"no effect: MT already {self.base_compute}"
        adjust["compute_type"] = target
        return f"MT compute type → {target} (reloaded by the MT stage)"


# -- signals ---------------------------------------------------------------------------------

def memory_probe(accel: str, budget_mb: float) -> Callable[[], float | None]:
    """Fraction of the memory budget in use: GPU memory through Numba's CUDA context when the
    session runs on CUDA, else this process's RSS against ``budget_mb``."""
    if accel == "cuda":
        def gpu() -> float | None:
            from numba import cuda  # Numba is optional: CUDA sessions only

            free, total = cuda.current_context().get_memory_info()
            return (total - free) / total if total else None
        return gpu
    proc = psutil.Process(os.getpid())

    def rss() -> float:
        return proc.memory_info().rss / (budget_mb * 1024 * 1024)
    return rss


def p99(values) -> float | None:
    return float(np.percentile(np.asarray(values, dtype=float), 99)) if len(values) else None


class PolicyRunner:
    """Bus observer: keeps a sliding window of subtitle latencies, samples memory, ticks the
    engine on every event, applies transitions and publishes them. ``signal()`` is the hook for
    callers outside the pipeline (the cloud client: ``signal("cloud_link", healthy)``)."""

    def __init__(self, engine: PolicyEngine, actuator: PipelineActuator, cfg: PolicyConfig, clock,
                 publish: Callable[[object], None], played_at: Callable[[float], float],
                 memory: Callable[[], float | None] | None = None):
        self.engine, self.actuator, self.cfg, self.clock = engine, actuator, cfg, clock
        self.publish, self.played_at, self.memory = publish, played_at, memory
        self._lat: collections.deque[tuple[float, float]] = collections.deque()
        self._final_lag: collections.deque[tuple[float, float]] = collections.deque()
        self._next_probe = 0.0
        self._lock = threading.RLock()

    def signal(self, name: str, value: float | bool) -> None:
        self.publish(PolicySignal(name, float(value)))

    def __call__(self, ev) -> None:
        if isinstance(ev, PolicyTransition):
            return
        with self._lock:
            if isinstance(ev, PolicySignal):
                self.engine.signal(ev.name, ev.value)
            elif isinstance(ev, Translation) and not ev.preview and ev.segment is not None:
                for w in ev.segment.words:
                    self._lat.append((ev.emitted_at, max(0.0, ev.emitted_at - self.played_at(w.end))))
            elif isinstance(ev, FinalSentence):  # how long after its sentence ended a final came
                self._final_lag.append((ev.final_at, max(0.0, ev.final_at - self.played_at(ev.src_end))))
            self.tick()

    def tick(self) -> list[PolicyTransition]:
        with self._lock:
            now = self.clock.now()
            while self._lat and self._lat[0][0] < now - self.cfg.latency_window_s:
                self._lat.popleft()
            self.engine.signal("subtitle_p99_s", p99([v for _, v in self._lat]))
            while self._final_lag and self._final_lag[0][0] < now - self.cfg.final_window_s:
                self._final_lag.popleft()
            lags = [v for _, v in self._final_lag]
            self.engine.signal("final_lag_p95_s", float(np.percentile(lags, 95)) if lags else None)
            if self.memory is not None and now >= self._next_probe:
                self._next_probe = now + self.cfg.probe_every_s
                self.engine.signal("memory_frac", self.memory())
            done = []
            moved = self.engine.tick(now)
            first = len(self.engine.transitions) - len(moved)
            for i, tr in enumerate(moved):
                fx = self.actuator.apply(list(tr.active), f"{tr.rule}: {tr.reason}")
                if not fx:
                    fx = [f"no effect: {', '.join(tr.actions)} changes nothing in this configuration"]
                tr = replace(tr, effects=tuple(fx))
                self.engine.transitions[first + i] = tr  # the record keeps what really changed
                done.append(tr)
        for tr in done:
            self.publish(tr)
        return done

    def summary(self, now: float | None = None) -> dict:
        with self._lock:
            out = self.engine.summary(self.clock.now() if now is None else now)
        out["rules"] = [{"name": r.name, "signal": r.signal, "when": f"{r.op} {r.threshold:g}",
                         "steps": [list(s) for s in r.steps], "hold_s": r.hold_s} for r in self.engine.rules]
        return out
