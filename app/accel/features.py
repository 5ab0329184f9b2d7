"""Per-frame energy and zero-crossing rate, the cheap voice-activity features.

Frames are consecutive, non-overlapping runs of ``frame`` samples; the last frame may be
shorter (an odd-length block still gets a value for its tail). Per frame:

* ``rms_db = 10 * log10(max(mean(x**2), 1e-10))``: 0 dB for a full-scale square wave, about
  -3 dB for a full-scale sine, floored at -100 dB so silence stays finite;
* ``zcr`` = sign changes between neighbouring samples / (frame length - 1), with ``x >= 0``
  counted as positive so digital silence has no crossings. A one-sample frame has zcr 0.
"""

from __future__ import annotations

import numpy as np

from .dispatch import choose_backend, require_finite

_FLOOR = 1e-10


def _frame_features_numpy(x: np.ndarray, frame: int, n_frames: int) -> tuple[np.ndarray, np.ndarray]:
    n = len(x)
    pad = n_frames * frame - n
    lens = np.full(n_frames, frame, dtype=np.float64)
    lens[-1] = frame - pad
    xx = np.pad(x.astype(np.float64), (0, pad)).reshape(n_frames, frame)
    mean_sq = (xx * xx).sum(axis=1) / lens  # padding is zeros, so the sum is unaffected
    pos = np.pad(x >= 0, (0, pad), mode="edge").reshape(n_frames, frame)  # edge: no fake crossing
    crossings = (pos[:, 1:] != pos[:, :-1]).sum(axis=1)
    rms_db = 10.0 * np.log10(np.maximum(mean_sq, _FLOOR))
    zcr = crossings / np.maximum(lens - 1, 1)
    return rms_db.astype(np.float32), zcr.astype(np.float32)


def frame_features(audio: np.ndarray, frame: int = 512, backend: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """``(rms_db, zero_crossing_rate)``, float32, one value per frame (ceil(len / frame) frames)."""
    if int(frame) != frame or frame < 1:
        raise ValueError(f"frame must be a positive integer, got {frame!r}")
    frame = int(frame)
    x = np.ascontiguousarray(audio, dtype=np.float32).reshape(-1)
    require_finite(x, "audio")
    n_frames = -(-len(x) // frame)
    if n_frames == 0:
        return np.zeros(0, np.float32), np.zeros(0, np.float32)
    b = choose_backend(backend)
    if b == "cpu":
        from . import _cpu  # imports Numba: only when the "cpu" backend runs

        with _cpu.PARALLEL:
            return _cpu.frame_features(x, frame, n_frames)
    if b == "cuda":
        from . import _cuda  # imports Numba CUDA: only when the "cuda" backend runs

        return _cuda.frame_features(x, frame, n_frames)
    return _frame_features_numpy(x, frame, n_frames)
