"""Int8 quantisation with one scale per row, and low-rank projection onto an orthonormal basis.

Quantisation is symmetric: ``scale = max|row| / 127`` and ``q = round(x * 127 / max|row|)``
with rounding half away from zero, clipped to [-127, 127] (-128 is never used, so negation is
safe). All backends do this arithmetic in float32 in the same order, so they agree exactly on
``q``. An all-zero row gets scale 0 and q 0. ``dequantize_int8`` is ``q * scale[:, None]``; the
round trip error is at most ``scale / 2`` per element.

``lowrank_basis(data, k)`` (NumPy only: an SVD is a one-off fit, not a per-block kernel)
returns the top-k right singular vectors as a (d, k) orthonormal basis, signs fixed so the
largest-magnitude entry of each vector is positive; ``lowrank_project(x, basis)`` returns the
coefficients ``x @ basis`` (n, k) and ``lowrank_reconstruct`` maps them back.
"""

from __future__ import annotations

import numpy as np

from .dispatch import choose_backend, require_finite

_LIM = np.float32(127.0)


def _as_2d(x: np.ndarray, what: str, dtype) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"{what} must be 2-D, got shape {x.shape}")
    return np.ascontiguousarray(x, dtype=dtype)


def _quantize_numpy(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    amax = np.abs(x).max(axis=1) if x.shape[1] else np.zeros(x.shape[0], np.float32)
    nz = amax > 0
    inv = np.zeros_like(amax)
    inv[nz] = _LIM / amax[nz]
    v = x * inv[:, None]
    r = np.minimum(np.floor(np.abs(v) + np.float32(0.5)), _LIM)
    q = np.where(v >= 0, r, -r).astype(np.int8)
    scale = np.where(nz, amax / _LIM, np.float32(0)).astype(np.float32)
    return q, scale


def quantize_int8(x2d: np.ndarray, backend: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """``(q int8 (n, d), scale float32 (n,))``."""
    x = _as_2d(x2d, "quantize_int8 input", np.float32)
    require_finite(x, "quantize_int8 input")
    if x.size == 0:
        return np.zeros(x.shape, np.int8), np.zeros(x.shape[0], np.float32)
    b = choose_backend(backend)
    if b == "cpu":
        from . import _cpu  # imports Numba: only when the "cpu" backend runs

        with _cpu.PARALLEL:
            return _cpu.quantize_int8(x)
    if b == "cuda":
        from . import _cuda_quant  # imports Numba CUDA: only when the "cuda" backend runs

        return _cuda_quant.quantize_int8(x)
    return _quantize_numpy(x)


def dequantize_int8(q: np.ndarray, scale: np.ndarray, backend: str = "auto") -> np.ndarray:
    q = _as_2d(q, "dequantize_int8 input", np.int8)
    scale = np.ascontiguousarray(scale, dtype=np.float32).reshape(-1)
    if scale.shape[0] != q.shape[0]:
        raise ValueError(f"need one scale per row: {q.shape[0]} rows, {scale.shape[0]} scales")
    require_finite(scale, "dequantize_int8 scale")
    if q.size == 0:
        return np.zeros(q.shape, np.float32)
    b = choose_backend(backend)
    if b == "cpu":
        from . import _cpu  # imports Numba: only when the "cpu" backend runs

        with _cpu.PARALLEL:
            return _cpu.dequantize_int8(q, scale)
    if b == "cuda":
        from . import _cuda_quant  # imports Numba CUDA: only when the "cuda" backend runs

        return _cuda_quant.dequantize_int8(q, scale)
    return q.astype(np.float32) * scale[:, None]


def lowrank_basis(data: np.ndarray, k: int) -> np.ndarray:
    """Orthonormal (d, k) basis of the top-k right singular vectors of ``data`` (n, d)."""
    data = _as_2d(data, "lowrank_basis data", np.float64)
    require_finite(data, "lowrank_basis data")
    if not 1 <= k <= min(data.shape):
        raise ValueError(f"rank k must be in [1, min(n, d)] = [1, {min(data.shape)}], got {k}")
    _, _, vt = np.linalg.svd(data, full_matrices=False)
    basis = vt[:k].T
    flip = np.sign(basis[np.abs(basis).argmax(axis=0), np.arange(k)])
    return (basis * flip).astype(np.float32)


def lowrank_project(x2d: np.ndarray, basis: np.ndarray, backend: str = "auto") -> np.ndarray:
    """Coefficients ``x @ basis``, float32 (n, k)."""
    x = _as_2d(x2d, "lowrank_project input", np.float32)
    basis = _as_2d(basis, "lowrank_project basis", np.float32)
    if basis.shape[0] != x.shape[1]:
        raise ValueError(f"basis has {basis.shape[0]} rows but the input has {x.shape[1]} columns")
    require_finite(x, "lowrank_project input")
    require_finite(basis, "lowrank_project basis")
    if x.size == 0 or basis.size == 0:  # no rows, no columns or rank 0: all-zero coefficients
        return np.zeros((x.shape[0], basis.shape[1]), np.float32)
    b = choose_backend(backend)
    if b == "cpu":
        from . import _cpu  # imports Numba: only when the "cpu" backend runs

        with _cpu.PARALLEL:
            return _cpu.lowrank_project(x, basis)
    if b == "cuda":
        from . import _cuda_quant  # imports Numba CUDA: only when the "cuda" backend runs

        return _cuda_quant.lowrank_project(x, basis)
    return (x.astype(np.float64) @ basis.astype(np.float64)).astype(np.float32)


def lowrank_reconstruct(coeffs: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """Back to the full space: ``coeffs @ basis.T`` (the projection of x onto the subspace)."""
    return (np.asarray(coeffs, np.float64) @ np.asarray(basis, np.float64).T).astype(np.float32)
