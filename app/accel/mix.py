"""Mix the dub over the original with ducking: the original drops to ``duck_gain`` while the dub talks.

Per sample ``i`` (state carried across blocks in ``DuckState``):

* the dub is *active* if some ``|dub|`` above ``threshold`` occurred within the last ``hold_ms``
  (a hold counter: without it the gain would pump at every zero crossing and word gap);
* the gain moves towards ``duck_gain`` (active) or 1 (inactive) by ``(1 - duck_gain) / ramp``
  per sample, ``ramp = ramp_ms * sr / 1000``: a full duck or release takes exactly ``ramp_ms``,
  linearly, so the envelope never steps by more than ``1 / ramp`` (no clicks);
* ``out = soft_clip(original * gain + dub)``: identity up to ``|y| = 0.9``, then a tanh knee
  that approaches but never passes +-1, so two full-scale signals summed cannot wrap or clip
  hard when written to int16.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.core.audio import SR

from .dispatch import choose_backend, require_finite

KNEE = 0.9


@dataclass
class DuckState:
    gain: float = 1.0  # the original's gain after the last sample
    hold: int = 0  # samples of "dub active" left after the last sample


def soft_clip_numpy(y: np.ndarray, knee: float = KNEE) -> np.ndarray:
    a = np.abs(y)
    over = knee + (1.0 - knee) * np.tanh((a - knee) / (1.0 - knee))
    return np.where(a <= knee, y, np.copysign(over, y))


def _mix_duck_numpy(orig, dub, gain, hold, duck, step, hold_n, thr, knee):
    n = len(orig)
    idx = np.arange(n)
    # hold after sample i is hold_n - (i - last active sample), so "active" = i - last < hold_n;
    # the state's hold counter becomes a virtual active sample before the block.
    virtual = -1 - (hold_n - hold)
    last = np.maximum.accumulate(np.where(np.abs(dub) > thr, idx, virtual))
    active = idx - last < hold_n
    # The gain walk is linear within each run of constant activity and saturates at the target,
    # so each run is clip(g0 -+ step * k): a short Python loop over runs, not over samples.
    env = np.empty(n)
    bounds = np.flatnonzero(np.diff(active)) + 1
    g = gain
    for a, b in zip(np.r_[0, bounds], np.r_[bounds, n]):
        k = np.arange(1, b - a + 1)
        env[a:b] = np.maximum(g - step * k, duck) if active[a] else np.minimum(g + step * k, 1.0)
        g = env[b - 1]
    out = soft_clip_numpy(orig * env + dub, knee)
    new_hold = max(hold_n - (n - 1 - int(last[-1])), 0)
    return out.astype(np.float32), env.astype(np.float32), float(g), new_hold


def mix_duck(original: np.ndarray, dub: np.ndarray | None, gain_env_state: DuckState | None = None,
             duck_gain: float = 0.25, ramp_ms: float = 30.0, sr: int = SR, *,
             hold_ms: float = 150.0, threshold: float = 1e-3, backend: str = "auto",
             return_gain: bool = False):
    """Returns ``(mixed, new_state)``, or ``(mixed, new_state, gain)`` with ``return_gain``.

    ``dub`` must have the original's length (``None`` = silence). Pass the returned state to the
    next call; ``None`` starts fresh (gain 1, not ducking).
    """
    orig = np.ascontiguousarray(original, dtype=np.float32).reshape(-1)
    dub = np.zeros_like(orig) if dub is None else np.ascontiguousarray(dub, dtype=np.float32).reshape(-1)
    if dub.shape != orig.shape:
        raise ValueError(f"dub has {dub.size} samples but the original has {orig.size}")
    require_finite(orig, "original audio")
    require_finite(dub, "dub audio")
    if not 0.0 <= duck_gain <= 1.0:
        raise ValueError(f"duck_gain must be in [0, 1], got {duck_gain}")
    if ramp_ms <= 0 or sr <= 0 or hold_ms < 0:
        raise ValueError("ramp_ms and sr must be positive and hold_ms non-negative")
    state = gain_env_state or DuckState()
    ramp = max(ramp_ms * sr / 1000.0, 1.0)
    step = (1.0 - duck_gain) / ramp
    hold_n = max(int(round(hold_ms * sr / 1000.0)), 1)  # a sample above threshold is active itself
    gain = min(max(float(state.gain), duck_gain), 1.0)
    hold = min(max(int(state.hold), 0), hold_n)
    n = len(orig)
    if n == 0:
        out, env, new = np.zeros(0, np.float32), np.zeros(0, np.float32), DuckState(gain, hold)
        return (out, new, env) if return_gain else (out, new)
    args = (gain, hold, float(duck_gain), step, hold_n, float(threshold), KNEE)
    b = choose_backend(backend)
    if b == "cpu":
        from . import _cpu  # imports Numba: only when the "cpu" backend runs

        out, env, g, h = _cpu.mix_duck(orig, dub, *args)
    elif b == "cuda":
        from . import _cuda  # imports Numba CUDA: only when the "cuda" backend runs

        out, env = _cuda.mix_duck(orig, dub, *args)
        # the next block's state, from the host copies: final gain and hold counter
        hits = np.flatnonzero(np.abs(dub) > threshold)
        g = float(env[-1])
        h = max(hold_n - (n - 1 - int(hits[-1])), 0) if hits.size else max(hold - n, 0)
    else:
        out, env, g, h = _mix_duck_numpy(orig, dub, *args)
    new = DuckState(float(g), int(h))
    return (out, new, env) if return_gain else (out, new)
