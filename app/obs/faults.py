"""Test-only fault injection, read from ``RELAY_FAULTS`` by the session when it builds a
pipeline. It wraps the real backends so the chaos tests can break a running session on purpose;
it is not a user feature and is off unless the variable is set.

    RELAY_FAULTS="mt:raise@3,asr:stall@5:30s,tts:raise@2,mem:pressure@4s:10s"

``STAGE:raise@N``        the Nth model call of that stage raises ``InjectedFault``
``STAGE:stall@N:SECs``   the Nth call blocks for SECs seconds first (default 60 s)
``mem:pressure@Ts:Ds``   from session second T, for D seconds, the degradation policy's memory
                         probe reads 95 % of the budget

STAGE is asr, vad, mt or tts. Calls are counted from the session's start (warm-up excluded).
``RELAY_STALL_S`` (also test-only) shortens the supervisor's stall deadline."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass

from app.core.errors import UserError

CALLS = {"asr": ("transcribe_window", "transcribe_utterance"), "vad": ("process",),
         "mt": ("translate", "translate_with_draft"), "tts": ("synthesize",)}
_ITEM = re.compile(r"^(asr|vad|mt|tts|mem):(raise|stall|pressure)@(\d+(?:\.\d+)?)(s?)(?::(\d+(?:\.\d+)?)s?)?$")


class InjectedFault(RuntimeError):
    pass


@dataclass(frozen=True)
class Fault:
    target: str
    kind: str
    at: float  # call number (raise/stall) or session second (pressure)
    seconds: float


def parse(spec: str | None) -> list[Fault]:
    out = []
    for item in (spec or "").replace(" ", "").split(","):
        if not item:
            continue
        m = _ITEM.match(item)
        if not m:
            raise UserError(f"RELAY_FAULTS: cannot read '{item}' (want STAGE:raise@N, STAGE:stall@N:SECs "
                            "or mem:pressure@Ts:Ds)")
        target, kind, at, unit, secs = m.groups()
        if (target == "mem") != (kind == "pressure") or (kind != "pressure" and unit):
            raise UserError(f"RELAY_FAULTS: '{item}': raise/stall count calls of asr/vad/mt/tts; "
                            "pressure is mem:pressure@Ts:Ds")
        out.append(Fault(target, kind, float(at), float(secs) if secs else (60.0 if kind == "stall" else 10.0)))
    return out


class FaultyBackend:
    """A backend that counts its model calls and breaks the ones a fault names."""

    def __init__(self, backend, target: str, faults: list[Fault]):
        object.__setattr__(self, "_backend", backend)
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_faults", {int(f.at): f for f in faults})
        object.__setattr__(self, "_lock", threading.Lock())
        object.__setattr__(self, "calls", 0)

    def __getattr__(self, name):
        value = getattr(self._backend, name)
        if name in CALLS[self._target] and callable(value):
            return lambda *a, **k: self._call(value, a, k)
        return value

    def __setattr__(self, name, value):
        setattr(self._backend, name, value)

    def _call(self, fn, args, kwargs):
        with self._lock:
            n = self.calls + 1
            object.__setattr__(self, "calls", n)
        f = self._faults.get(n)
        if f is not None and f.kind == "raise":
            raise InjectedFault(f"injected {self._target} failure at call {n}")
        if f is not None and f.kind == "stall":
            time.sleep(f.seconds)
        return fn(*args, **kwargs)


def wrap(backend, target: str, faults: list[Fault]):
    mine = [f for f in faults if f.target == target]
    return FaultyBackend(backend, target, mine) if mine and backend is not None else backend


def memory_pressure(probe, faults: list[Fault], clock):
    """The memory probe, reading 95 % of the budget inside each pressure window."""
    windows = [(f.at, f.at + f.seconds) for f in faults if f.kind == "pressure"]
    if not windows:
        return probe

    def probed():
        now = clock.now()
        if any(a <= now < b for a, b in windows):
            return 0.95
        return probe() if probe is not None else None

    return probed


def from_env(environ) -> tuple[list[Fault], float | None]:
    """(faults, stall deadline override) from RELAY_FAULTS / RELAY_STALL_S."""
    faults = parse(environ.get("RELAY_FAULTS"))
    stall = environ.get("RELAY_STALL_S")
    if stall is None:
        return faults, None
    try:
        value = float(stall)
    except ValueError:
        raise UserError(f"RELAY_STALL_S: '{stall}' is not a number of seconds") from None
    if not value > 0:
        raise UserError("RELAY_STALL_S must be positive")
    return faults, value
