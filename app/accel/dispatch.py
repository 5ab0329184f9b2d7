"""Which implementation of an ``app.accel`` kernel runs: Numba CUDA, Numba CPU or NumPy.

Every kernel takes ``backend="auto" | "cuda" | "cpu" | "numpy"`` and resolves it here:

* ``"auto"`` -> the ``RELAY_ACCEL`` environment variable if it is set, else ``"cuda"`` when
  ``numba.cuda.is_available()`` (a usable GPU and driver), else ``"cpu"`` when Numba imports,
  else ``"numpy"``.
* An explicit name wins over the environment and is checked: asking for ``"cuda"`` without a
  GPU, or for ``"cpu"`` without Numba, raises ``ValueError`` rather than silently running
  something slower than the caller planned for.

Numba is optional: nothing here imports it at module import time, so ``backend="numpy"`` works
on a machine where Numba is missing or broken. The probes are cached because
``numba.cuda.is_available()`` initialises the driver, which costs tens of milliseconds.
"""

from __future__ import annotations

import functools
import os

import numpy as np

BACKENDS = ("cuda", "cpu", "numpy")
ENV_VAR = "RELAY_ACCEL"


@functools.lru_cache(maxsize=None)
def numba_available() -> bool:
    try:
        import numba  # noqa: F401  # the probe itself: Numba is optional and slow to import
    except Exception:  # ImportError, or a numba/llvmlite/numpy version clash
        return False
    return True


@functools.lru_cache(maxsize=None)
def cuda_available() -> bool:
    """True when Numba CUDA can launch kernels (a real GPU, or the simulator if enabled)."""
    if not numba_available():
        return False
    try:
        from numba import cuda  # optional; initialises the CUDA driver

        return bool(cuda.is_available())
    except Exception:
        return False


def _validate(name: str, origin: str) -> str:
    b = name.strip().lower()
    if b not in BACKENDS and b != "auto":
        raise ValueError(f"unknown accel backend {name!r} (from {origin}); use one of auto, {', '.join(BACKENDS)}")
    return b


def choose_backend(requested: str | None = "auto") -> str:
    """Resolve a backend request to one of ``"cuda"``, ``"cpu"``, ``"numpy"``."""
    b = _validate(requested or "auto", "argument")
    if b == "auto":
        env = os.environ.get(ENV_VAR, "").strip()
        if env:
            b = _validate(env, f"${ENV_VAR}")
    if b == "auto":
        if cuda_available():
            return "cuda"
        return "cpu" if numba_available() else "numpy"
    if b == "cuda" and not cuda_available():
        why = "Numba is not installed" if not numba_available() else "numba.cuda.is_available() is False"
        raise ValueError(f"accel backend 'cuda' requested but no CUDA GPU is usable ({why}); "
                         "use backend='cpu' or 'numpy', or 'auto' to pick the best available")
    if b == "cpu" and not numba_available():
        raise ValueError("accel backend 'cpu' needs Numba (pip install numba); use backend='numpy'")
    return b


def require_finite(x: np.ndarray, what: str = "input") -> None:
    """Raise ``ValueError`` if ``x`` holds NaN or Inf; kernels call this before any work.

    A NaN inside a compiled loop would silently poison a whole frame, a filter history or a
    gain envelope (and carry into the following blocks), so it is rejected at the door.
    """
    if x.size and not np.isfinite(x).all():
        raise ValueError(f"{what} contains NaN or Inf samples")
