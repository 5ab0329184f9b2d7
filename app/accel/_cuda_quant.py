"""Numba CUDA implementations of int8 quantisation and low-rank projection (``app.accel.quant``).

Imported only when those kernels run with ``backend="cuda"``; they share ``_cuda``'s per-thread
workspace (stream and reusable device buffers). The public wrappers validate inputs first.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32

from ._cuda import _ws

Q_THREADS = 128  # power of two, for the max reduction
TILE = 16


@cuda.jit
def _quantize_kernel(x, q, scale):
    """One block per row: max-abs by tree reduction, then the same float32 rounding as the CPU."""
    sm = cuda.shared.array(Q_THREADS, float32)
    i = cuda.blockIdx.x
    t = cuda.threadIdx.x
    cols = x.shape[1]
    m = float32(0.0)
    for j in range(t, cols, Q_THREADS):
        m = max(m, abs(x[i, j]))
    sm[t] = m
    cuda.syncthreads()
    step = Q_THREADS // 2
    while step > 0:
        if t < step:
            sm[t] = max(sm[t], sm[t + step])
        cuda.syncthreads()
        step //= 2
    amax = sm[0]
    lim = float32(127.0)
    if amax == 0:
        if t == 0:
            scale[i] = 0
        for j in range(t, cols, Q_THREADS):
            q[i, j] = 0
        return
    inv = lim / amax
    if t == 0:
        scale[i] = amax / lim
    for j in range(t, cols, Q_THREADS):
        v = x[i, j] * inv
        r = min(float32(math.floor(abs(v) + float32(0.5))), lim)
        q[i, j] = r if v >= 0 else -r


@cuda.jit
def _dequantize_kernel(q, scale, out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = float32(q[i, j]) * scale[i]


@cuda.jit
def _matmul_kernel(a, b, out):
    """out = a @ b with 16x16 shared-memory tiles (each input element read once per tile row)."""
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    n, d = a.shape
    k = b.shape[1]
    acc = float32(0.0)
    for t0 in range(0, d, TILE):
        sa[ty, tx] = a[row, t0 + tx] if row < n and t0 + tx < d else float32(0.0)
        sb[ty, tx] = b[t0 + ty, col] if t0 + ty < d and col < k else float32(0.0)
        cuda.syncthreads()
        for u in range(TILE):
            acc += sa[ty, u] * sb[u, tx]
        cuda.syncthreads()
    if row < n and col < k:
        out[row, col] = acc


def quantize_int8(x):
    rows, cols = x.shape
    st = _ws.stream
    d_x = _ws.buf("q_x", np.float32, (cols,)).upload(x, st)
    d_q = _ws.buf("q_q", np.int8, (cols,)).view(rows)
    d_s = _ws.buf("q_s", np.float32).view(rows)
    _quantize_kernel[rows, Q_THREADS, st](d_x, d_q, d_s)
    q, s = d_q.copy_to_host(stream=st), d_s.copy_to_host(stream=st)
    st.synchronize()
    return q, s


def dequantize_int8(q, scale):
    rows, cols = q.shape
    st = _ws.stream
    d_q = _ws.buf("dq_q", np.int8, (cols,)).upload(q, st)
    d_s = _ws.buf("dq_s", np.float32).upload(scale, st)
    d_out = _ws.buf("dq_out", np.float32, (cols,)).view(rows)
    grid = ((rows + TILE - 1) // TILE, (cols + TILE - 1) // TILE)
    _dequantize_kernel[grid, (TILE, TILE), st](d_q, d_s, d_out)
    out = d_out.copy_to_host(stream=st)
    st.synchronize()
    return out


def lowrank_project(x, basis):
    rows, d = x.shape
    k = basis.shape[1]
    st = _ws.stream
    d_x = _ws.buf("lr_x", np.float32, (d,)).upload(x, st)
    d_b = _ws.buf("lr_b", np.float32, (k,)).upload(basis, st)
    d_out = _ws.buf("lr_out", np.float32, (k,)).view(rows)
    grid = ((k + TILE - 1) // TILE, (rows + TILE - 1) // TILE)  # x: columns of out, y: rows
    _matmul_kernel[grid, (TILE, TILE), st](d_x, d_b, d_out)
    out = d_out.copy_to_host(stream=st)
    st.synchronize()
    return out
