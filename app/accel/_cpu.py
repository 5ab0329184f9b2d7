"""Numba CPU (``@njit``) implementations of the ``app.accel`` kernels.

Imported only when a kernel runs with ``backend="cpu"`` (this module imports Numba at the top).
The public wrappers in ``logmel.py``, ``resample.py``, ``features.py``, ``mix.py`` and
``quant.py`` validate their inputs first (finite, shapes, bounds), so nothing here re-checks:
Numba does no bounds checking, and a bad index would read or write out of bounds.

Notes that apply throughout:

* ``cache=True`` keeps the compiled code in ``__pycache__`` so a new process does not pay the
  (seconds-long) compile again.
* ``parallel=True``/``prange`` where the outputs are independent (frames, rows, resampler
  outputs); the mixer's gain envelope is a one-sample recurrence and stays serial. Numba picks
  the OpenMP threading layer when it is available, which is safe to call from several Python
  threads at once (the workqueue fallback is not).
* Float32 kernels keep every constant float32 (``np.float32(...)``): one Python float literal
  would silently promote the arithmetic to float64 and halve the SIMD width.
"""

from __future__ import annotations

import math
import threading

import numpy as np
from numba import njit, prange

from .numba_cache import seed_from_bundle

seed_from_bundle()  # the frozen app's prebuilt kernels, before the first one loads

# Numba's default "workqueue" threading layer (the only one the frozen app has) aborts the
# process when two threads launch parallel kernels at once, and two passes run the front-end
# from several stage threads (first-pass features, the second pass's VAD gate, capture
# resampling). Every parallel kernel is called under this lock; each call takes milliseconds.
PARALLEL = threading.Lock()

# -- log-mel -------------------------------------------------------------------------------------
# A 400-point real FFT done as a 200-point complex FFT of z[n] = x[2n] + i x[2n+1] (the standard
# "two reals for one complex" packing), then split into the 201 one-sided bins. The complex FFT
# is a mixed-radix Stockham autosort FFT, 200 = 4 * 2 * 5 * 5, with a frame batch in the
# innermost (contiguous) axis so every butterfly is a SIMD loop over frames: on 2 cores this is
# far faster than a real-DFT matrix (201 cos + 201 sin rows of 400: 160k multiply-adds and
# 640 kB of table streamed from cache per frame) and needs no BLAS (Numba's np.dot would need SciPy).

_N_FFT = 400
_NC = _N_FFT // 2  # complex FFT length
_N_BINS = _N_FFT // 2 + 1
_RADICES = np.array([4, 2, 5, 5], dtype=np.int64)
# Frames per batch: long enough inner loops to amortise the per-row loop overhead (32 was ~2x
# slower on the dev machine), short enough that the 4 scratch planes (200 x 64 float32, 200 kB)
# plus the power plane stay in L2 (128 was slower again).
_CHUNK = 64

_k = np.arange(_NC)
_TW_R = np.cos(-2 * np.pi * _k / _NC).astype(np.float32)  # W_200^k
_TW_I = np.sin(-2 * np.pi * _k / _NC).astype(np.float32)
_k = np.arange(_N_BINS)
_W400_R = np.cos(-2 * np.pi * _k / _N_FFT).astype(np.float32)  # W_400^k for the real split
_W400_I = np.sin(-2 * np.pi * _k / _N_FFT).astype(np.float32)
del _k
_LN2 = np.float32(np.log(2.0))
_INV_LN10 = np.float32(1.0 / np.log(10.0))
_THIRD, _FIFTH, _SEVENTH, _NINTH = (np.float32(1.0 / d) for d in (3, 5, 7, 9))


@njit(cache=True)
def _log10_floored(acc, nf, mant_bits, expo, dst):
    """dst[:nf] = log10(max(acc[:nf], 1e-10)), in loops LLVM can vectorise.

    A libm log10f call per value does not vectorise; it took ~30% of the kernel's time.
    Instead: split x = 2^e * m with integer bit operations (m in [sqrt(1/2), sqrt(2))), then
    ln m = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + s^7/7 + s^9/9), s = (m-1)/(m+1), |s| <= 0.172, whose
    truncation error (~1e-9) is far below float32 rounding. Overwrites acc[:nf].
    """
    floor = np.float32(1e-10)  # a normal float32, so the exponent field is the true exponent
    one = np.float32(1.0)
    two = np.float32(2.0)
    for f in range(nf):
        acc[f] = max(acc[f], floor)
    bits = acc.view(np.int32)
    for f in range(nf):
        b = bits[f]
        mb = (b & 0x007FFFFF) | 0x3F800000  # mantissa as a float in [1, 2)
        e = (b >> 23) - 127
        if mb > 0x3FB504F3:  # m > sqrt(2): use m / 2 and e + 1
            mb -= 0x00800000
            e += 1
        mant_bits[f] = mb
        expo[f] = np.float32(e)
    mant = mant_bits.view(np.float32)
    for f in range(nf):
        m = mant[f]
        t = (m - one) / (m + one)
        t2 = t * t
        ln_m = two * t * (one + t2 * (_THIRD + t2 * (_FIFTH + t2 * (_SEVENTH + t2 * _NINTH))))
        dst[f] = (expo[f] * _LN2 + ln_m) * _INV_LN10


@njit(cache=True)
def _stockham(xr, xi, yr, yi, nf, radices, twr, twi):
    """Complex FFT along axis 0 of (xr, xi), columns [0, nf). Returns True if the result is in y.

    Decimation in frequency: at each stage (sub-length n = P * m, stride s) output row
    q + s*(P*p + r) = W_n^(p*r) * sum_j x[q + s*(p + j*m)] * W_P^(j*r). Both twiddles are entries of
    the one W_N table: W_n^(pr) = W_N^(p*r*s) and W_P^(jr) = W_N^((jr mod P) * N/P).
    """
    big_n = xr.shape[0]
    n = big_n
    s = 1
    in_y = False
    for st in range(radices.shape[0]):
        rad = radices[st]
        m = n // rad
        if in_y:
            sr, si, dr, di = yr, yi, xr, xi
        else:
            sr, si, dr, di = xr, xi, yr, yi
        for p in range(m):
            for q in range(s):
                for r in range(rad):
                    orr = dr[q + s * (rad * p + r)]
                    ori = di[q + s * (rad * p + r)]
                    a_r = sr[q + s * p]  # j = 0 term: W^0 = 1, a copy
                    a_i = si[q + s * p]
                    for f in range(nf):
                        orr[f] = a_r[f]
                        ori[f] = a_i[f]
                    for j in range(1, rad):
                        e = ((j * r) % rad) * (big_n // rad)
                        cr = twr[e]
                        ci = twi[e]
                        b_r = sr[q + s * (p + j * m)]
                        b_i = si[q + s * (p + j * m)]
                        for f in range(nf):
                            orr[f] += b_r[f] * cr - b_i[f] * ci
                            ori[f] += b_r[f] * ci + b_i[f] * cr
                    e = p * r * s
                    if e != 0:
                        wr = twr[e]
                        wi = twi[e]
                        for f in range(nf):
                            t = orr[f]
                            orr[f] = t * wr - ori[f] * wi
                            ori[f] = t * wi + ori[f] * wr
        n = m
        s *= rad
        in_y = not in_y
    return in_y


@njit(cache=True, parallel=True)
def _log_mel_kernel(signal, starts, window, filters, band_lo, band_hi,
                    radices, twr, twi, w4r, w4i, out):
    n_frames = starts.shape[0]
    n_mels = filters.shape[0]
    n_chunks = (n_frames + _CHUNK - 1) // _CHUNK
    half = np.float32(0.5)
    for c in prange(n_chunks):
        f0 = c * _CHUNK
        nf = min(_CHUNK, n_frames - f0)
        xr = np.empty((_NC, _CHUNK), np.float32)
        xi = np.empty((_NC, _CHUNK), np.float32)
        yr = np.empty((_NC, _CHUNK), np.float32)
        yi = np.empty((_NC, _CHUNK), np.float32)
        power = np.empty((_N_BINS, _CHUNK), np.float32)
        acc = np.empty(_CHUNK, np.float32)
        mant_bits = np.empty(_CHUNK, np.int32)
        expo = np.empty(_CHUNK, np.float32)
        # windowed frames, packed as z[n] = x[2n] + i x[2n+1]
        for f in range(nf):
            s0 = starts[f0 + f]
            for n in range(_NC):
                xr[n, f] = signal[s0 + 2 * n] * window[2 * n]
                xi[n, f] = signal[s0 + 2 * n + 1] * window[2 * n + 1]
        if _stockham(xr, xi, yr, yi, nf, radices, twr, twi):
            zr, zi = yr, yi
        else:
            zr, zi = xr, xi
        # X[k] = E[k] + W_400^k O[k], E = (Z[k] + conj Z[-k]) / 2, O = (Z[k] - conj Z[-k]) / 2i
        # (inner loops index 1-D row views: LLVM vectorises those, not 2-D indexing)
        for k in range(_N_BINS):
            ar, ai = zr[k % _NC], zi[k % _NC]
            br, bi = zr[(_NC - k) % _NC], zi[(_NC - k) % _NC]
            pw = power[k]
            cr = w4r[k]
            ci = w4i[k]
            for f in range(nf):
                er = (ar[f] + br[f]) * half
                ei = (ai[f] - bi[f]) * half
                o_r = (ai[f] + bi[f]) * half
                o_i = (br[f] - ar[f]) * half
                re = er + o_r * cr - o_i * ci
                im = ei + o_r * ci + o_i * cr
                pw[f] = re * re + im * im
        # mel projection over each filter's non-zero bins, then log10 with the 1e-10 floor
        for m in range(n_mels):
            for f in range(nf):
                acc[f] = 0
            for k in range(band_lo[m], band_hi[m]):
                w = filters[m, k]
                pw = power[k]
                for f in range(nf):
                    acc[f] += w * pw[f]
            _log10_floored(acc, nf, mant_bits, expo, out[m, f0 : f0 + nf])


def log_mel_frames(signal, starts, window, filters, band_lo, band_hi):
    out = np.empty((filters.shape[0], starts.shape[0]), np.float32)
    if starts.shape[0]:
        _log_mel_kernel(signal, starts, window, filters, band_lo, band_hi,
                        _RADICES, _TW_R, _TW_I, _W400_R, _W400_I, out)
    return out


# -- polyphase resampler ---------------------------------------------------------------------
@njit(cache=True, parallel=True, fastmath=True)
def resample_block(buf, rtaps, up, down, p0, i0, n_out):
    """Output r = sum_j rtaps[p, j] * buf[i - T + 1 + j], t = p0 + r*down, p = t % up, i = i0 + t // up.

    ``rtaps`` is the polyphase table with each row reversed, so the dot product runs forwards
    over both arrays, and ``fastmath`` lets LLVM reassociate it into SIMD partial sums (float32:
    ~1e-7 relative, far below the filter's own error). The summation order then depends only on
    the tap count, never on where a block starts, so block-by-block output still equals the
    one-shot output bit for bit. ``prange``: one-shot calls are long; a 20 ms block costs a few
    microseconds of thread wake-up, small next to its ~100 k multiply-adds.
    """
    out = np.empty(n_out, np.float32)
    n_taps = rtaps.shape[1]
    for r in prange(n_out):
        t = p0 + r * down
        base = i0 + t // up - n_taps + 1
        row = rtaps[t % up]  # 1-D views: with 2-D indexing LLVM did not vectorise (8x slower)
        seg = buf[base : base + n_taps]
        acc = np.float32(0.0)
        for j in range(n_taps):
            acc += row[j] * seg[j]
        out[r] = acc
    return out


# -- frame energy / zero crossings --------------------------------------------------------------
@njit(cache=True, parallel=True)
def frame_features(x, frame, n_frames):
    rms_db = np.empty(n_frames, np.float32)
    zcr = np.empty(n_frames, np.float32)
    n = x.shape[0]
    for i in prange(n_frames):
        s = i * frame
        e = min(s + frame, n)
        acc = 0.0
        crossings = 0
        prev = x[s] >= 0
        for k in range(s, e):
            v = np.float64(x[k])
            acc += v * v
            cur = x[k] >= 0
            if cur != prev:
                crossings += 1
            prev = cur
        rms_db[i] = 10.0 * math.log10(max(acc / (e - s), 1e-10))
        zcr[i] = crossings / max(e - s - 1, 1)
    return rms_db, zcr


# -- mixer with ducking ----------------------------------------------------------------------------
@njit(cache=True)
def soft_clip(y, knee):
    """Identity up to |y| = knee, then a tanh knee towards +-1 (slope-continuous, never past 1)."""
    a = abs(y)
    if a <= knee:
        return y
    c = knee + (1.0 - knee) * math.tanh((a - knee) / (1.0 - knee))
    return c if y > 0 else -c


@njit(cache=True)
def mix_duck(orig, dub, gain, hold, duck, step, hold_n, thr, knee):
    """Serial envelope: the gain is a one-sample recurrence, nothing to parallelise per block."""
    n = orig.shape[0]
    out = np.empty(n, np.float32)
    env = np.empty(n, np.float32)
    for i in range(n):
        if abs(dub[i]) > thr:
            hold = hold_n
        elif hold > 0:
            hold -= 1
        if hold > 0:
            gain = max(gain - step, duck)
        else:
            gain = min(gain + step, 1.0)
        env[i] = gain
        out[i] = soft_clip(orig[i] * gain + dub[i], knee)
    return out, env, gain, hold


# -- int8 quantisation and low-rank projection --------------------------------------------------
@njit(cache=True, parallel=True)
def quantize_int8(x):
    """Per row: scale = max|x| / 127, q = round-half-away(x * (127 / max|x|)), all in float32."""
    rows, cols = x.shape
    q = np.empty((rows, cols), np.int8)
    scale = np.empty(rows, np.float32)
    lim = np.float32(127.0)
    half = np.float32(0.5)
    for i in prange(rows):
        xi = x[i]
        qi = q[i]
        amax = np.float32(0.0)
        for j in range(cols):
            amax = max(amax, abs(xi[j]))
        if amax == 0:
            scale[i] = 0
            qi[:] = 0
            continue
        inv = lim / amax
        scale[i] = amax / lim
        for j in range(cols):
            v = xi[j] * inv
            r = min(np.floor(abs(v) + half), lim)
            qi[j] = np.int8(r if v >= 0 else -r)
    return q, scale


@njit(cache=True, parallel=True)
def dequantize_int8(q, scale):
    rows, cols = q.shape
    out = np.empty((rows, cols), np.float32)
    for i in prange(rows):
        s = scale[i]
        qi = q[i]
        oi = out[i]
        for j in range(cols):
            oi[j] = np.float32(qi[j]) * s
    return out


@njit(cache=True, parallel=True)
def lowrank_project(x, basis):
    """coeffs = x @ basis without BLAS: per row, accumulate basis rows (contiguous, SIMD) in f64."""
    rows, d = x.shape
    k = basis.shape[1]
    out = np.empty((rows, k), np.float32)
    for i in prange(rows):
        xi = x[i]
        acc = np.zeros(k, np.float64)
        for t in range(d):
            v = np.float64(xi[t])
            bt = basis[t]
            for j in range(k):
                acc[j] += v * bt[j]
        oi = out[i]
        for j in range(k):
            oi[j] = acc[j]
    return out
