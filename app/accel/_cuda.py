"""Numba CUDA implementations of the ``app.accel`` kernels (int8 quantisation and low-rank
projection: ``_cuda_quant``).

Imported only when a kernel runs with ``backend="cuda"`` (or under the CUDA simulator, which
must be switched on with ``NUMBA_ENABLE_CUDASIM=1`` before ``numba.cuda`` is first imported).
The public wrappers validate inputs first; these kernels do not bounds-check.

Memory: device buffers live in ``DeviceBuffer`` objects that grow geometrically and are reused,
so a streaming caller allocates on the GPU only while its blocks keep getting bigger. The
stateful engines (``CudaLogMel``, ``CudaResampler``) own their buffers and a CUDA stream; the
stateless kernels share one workspace per Python thread. Each call does one host->device copy
per input array, one launch sequence and one device->host copy per output.

Everything is float32 on the device (consumer GPUs run float64 at 1/32 rate): constants are
written ``float32(...)`` because a bare Python float would promote the arithmetic to float64.
"""

from __future__ import annotations

import math
import threading

import numpy as np
from numba import cuda, float32, int32

# -- device buffers ---------------------------------------------------------------------------------


class DeviceBuffer:
    """A device array of ``(capacity, *row_shape)`` that hands out views of the first n rows."""

    def __init__(self, dtype, row_shape: tuple[int, ...] = ()):
        self.dtype = np.dtype(dtype)
        self.row_shape = tuple(row_shape)
        self._dev = None
        self._cap = 0

    def view(self, n: int):
        if n > self._cap:
            self._cap = max(n, 2 * self._cap, 1024)
            self._dev = cuda.device_array((self._cap, *self.row_shape), dtype=self.dtype)
        return self._dev[:n]

    def upload(self, host: np.ndarray, stream):
        dev = self.view(host.shape[0])
        dev.copy_to_device(np.ascontiguousarray(host, dtype=self.dtype), stream=stream)
        return dev


class _Workspace(threading.local):
    """Per-thread stream and buffers for the stateless kernels (frame features, mixer, quant)."""

    def __init__(self):
        self.stream = cuda.stream()
        self._bufs: dict[tuple, DeviceBuffer] = {}

    def buf(self, name: str, dtype, row_shape: tuple[int, ...] = ()) -> DeviceBuffer:
        key = (name, np.dtype(dtype).str, tuple(row_shape))
        b = self._bufs.get(key)
        if b is None:
            b = self._bufs[key] = DeviceBuffer(dtype, row_shape)
        return b


_ws = _Workspace()

# -- log-mel -------------------------------------------------------------------------------------
# One thread block per frame. The windowed frame and the DFT twiddle table go to shared memory;
# thread k computes bin k as a direct 400-term DFT (twiddle index k*n mod 400, kept by addition,
# so no integer division in the loop), writes |X_k|^2 to shared memory, then threads take mel
# rows and sum only over each filter's non-zero bins. A direct DFT is 80k multiply-adds a frame,
# which a GPU does in microseconds; it keeps the kernel short and free of FFT bookkeeping.

N_FFT = 400
N_BINS = N_FFT // 2 + 1
LOGMEL_THREADS = 256  # >= N_BINS so every bin gets its own thread; n_mels up to 256 per pass


@cuda.jit
def _log_mel_kernel(signal, starts, window, cos_t, sin_t, filters, band_lo, band_hi, out):
    frame = cuda.shared.array(N_FFT, float32)
    ctab = cuda.shared.array(N_FFT, float32)
    stab = cuda.shared.array(N_FFT, float32)
    power = cuda.shared.array(N_BINS, float32)
    f = cuda.blockIdx.x
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    s0 = starts[f]
    for n in range(t, N_FFT, nt):
        frame[n] = signal[s0 + n] * window[n]
        ctab[n] = cos_t[n]
        stab[n] = sin_t[n]
    cuda.syncthreads()
    for k in range(t, N_BINS, nt):
        re = float32(0.0)
        im = float32(0.0)
        idx = 0
        for n in range(N_FFT):
            v = frame[n]
            re += v * ctab[idx]
            im += v * stab[idx]
            idx += k
            if idx >= N_FFT:
                idx -= N_FFT
        power[k] = re * re + im * im
    cuda.syncthreads()
    for m in range(t, filters.shape[0], nt):
        acc = float32(0.0)
        for k in range(band_lo[m], band_hi[m]):
            acc += filters[m, k] * power[k]
        out[f, m] = math.log10(max(acc, float32(1e-10)))


class CudaLogMel:
    """Log-mel engine bound to one filterbank; owns its stream and device buffers."""

    def __init__(self, window, filters, band_lo, band_hi):
        self.n_mels = filters.shape[0]
        self.stream = cuda.stream()
        ang = 2 * np.pi * np.arange(N_FFT) / N_FFT
        self._window = cuda.to_device(np.asarray(window, np.float32))
        self._cos = cuda.to_device(np.cos(ang).astype(np.float32))
        self._sin = cuda.to_device(np.sin(ang).astype(np.float32))  # sign irrelevant for |X|^2
        self._filters = cuda.to_device(np.ascontiguousarray(filters, np.float32))
        self._lo = cuda.to_device(np.asarray(band_lo, np.int64))
        self._hi = cuda.to_device(np.asarray(band_hi, np.int64))
        self._signal = DeviceBuffer(np.float32)
        self._starts = DeviceBuffer(np.int64)
        self._out = DeviceBuffer(np.float32, (self.n_mels,))
        self._lock = threading.Lock()  # the buffers are shared by whoever holds this engine

    def __call__(self, signal: np.ndarray, starts: np.ndarray) -> np.ndarray:
        n = starts.shape[0]
        if n == 0:
            return np.zeros((self.n_mels, 0), np.float32)
        with self._lock:
            st = self.stream
            d_sig = self._signal.upload(signal, st)
            d_starts = self._starts.upload(starts, st)
            d_out = self._out.view(n)
            _log_mel_kernel[n, LOGMEL_THREADS, st](d_sig, d_starts, self._window, self._cos, self._sin,
                                                   self._filters, self._lo, self._hi, d_out)
            host = d_out.copy_to_host(stream=st)
            st.synchronize()
        return np.ascontiguousarray(host.T)


# -- polyphase resampler ---------------------------------------------------------------------
RESAMPLE_THREADS = 128


@cuda.jit
def _resample_kernel(buf, taps, up, down, p0, i0, out):
    r = cuda.grid(1)
    if r >= out.shape[0]:
        return
    t = p0 + r * down
    p = t % up
    i = i0 + t // up
    acc = float32(0.0)
    for j in range(taps.shape[1]):
        acc += taps[p, j] * buf[i - j]
    out[r] = acc


class CudaResampler:
    """Device side of ``StreamingResampler``: the taps are uploaded once, buffers reused."""

    def __init__(self, taps: np.ndarray, up: int, down: int):
        self.up, self.down = up, down
        self.stream = cuda.stream()
        self._taps = cuda.to_device(np.ascontiguousarray(taps, np.float32))
        self._in = DeviceBuffer(np.float32)
        self._out = DeviceBuffer(np.float32)

    def __call__(self, buf, p0, i0, n_out):
        if n_out == 0:
            return np.zeros(0, np.float32)
        st = self.stream
        d_in = self._in.upload(buf, st)
        d_out = self._out.view(n_out)
        blocks = (n_out + RESAMPLE_THREADS - 1) // RESAMPLE_THREADS
        _resample_kernel[blocks, RESAMPLE_THREADS, st](d_in, self._taps, self.up, self.down, p0, i0, d_out)
        host = d_out.copy_to_host(stream=st)
        st.synchronize()
        return host


# -- frame energy / zero crossings --------------------------------------------------------------
FF_THREADS = 128  # power of two, for the tree reduction


@cuda.jit
def _frame_features_kernel(x, frame, rms_db, zcr):
    """One block per frame: strided partial sums, then a shared-memory tree reduction."""
    ssq = cuda.shared.array(FF_THREADS, float32)
    zc = cuda.shared.array(FF_THREADS, int32)
    i = cuda.blockIdx.x
    t = cuda.threadIdx.x
    s = i * frame
    e = min(s + frame, x.shape[0])
    acc = float32(0.0)
    c = 0
    for k in range(s + t, e, FF_THREADS):
        v = x[k]
        acc += v * v
        if k > s and (x[k - 1] >= 0) != (v >= 0):
            c += 1
    ssq[t] = acc
    zc[t] = c
    cuda.syncthreads()
    step = FF_THREADS // 2
    while step > 0:
        if t < step:
            ssq[t] += ssq[t + step]
            zc[t] += zc[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        n = float32(e - s)
        rms_db[i] = float32(10.0) * math.log10(max(ssq[0] / n, float32(1e-10)))
        zcr[i] = float32(zc[0]) / max(n - float32(1.0), float32(1.0))


def frame_features(x: np.ndarray, frame: int, n_frames: int):
    st = _ws.stream
    d_x = _ws.buf("ff_x", np.float32).upload(x, st)
    d_rms = _ws.buf("ff_rms", np.float32).view(n_frames)
    d_zcr = _ws.buf("ff_zcr", np.float32).view(n_frames)
    _frame_features_kernel[n_frames, FF_THREADS, st](d_x, frame, d_rms, d_zcr)
    rms, zcr = d_rms.copy_to_host(stream=st), d_zcr.copy_to_host(stream=st)
    st.synchronize()
    return rms, zcr


# -- mixer with ducking ----------------------------------------------------------------------------
# The gain is a recurrence g[i] = clip(g[i-1] + d[i], duck, 1), d = -step while the dub is active
# and +step otherwise. Maps of the form x -> clip(x + a, lo, hi) are closed under composition,
# which makes it a scan: (1) one thread per chunk composes its samples' maps, (2) one thread walks
# the chunk maps to get each chunk's starting gain (a few hundred chunks), (3) one thread per
# chunk re-walks its samples from that gain and writes the mix. "Active" means some |dub| above
# the threshold within the last hold_n samples, which each chunk recovers by looking back.
MIX_CHUNK = 256
MIX_THREADS = 64
_BIG = float32(1e30)


@cuda.jit(device=True)
def _hold_before(dub, s0, hold0, hold_n, thr):
    """The hold counter after sample s0 - 1 (``hold0`` is its value before the block)."""
    j = s0 - 1
    lo = max(s0 - hold_n, 0)
    while j >= lo:
        if abs(dub[j]) > thr:
            return hold_n - (s0 - 1 - j)
        j -= 1
    return max(hold0 - s0, 0)


@cuda.jit(device=True)
def _soft_clip(y, knee):
    a = abs(y)
    if a <= knee:
        return y
    one = float32(1.0)
    c = knee + (one - knee) * math.tanh((a - knee) / (one - knee))
    return c if y > 0 else -c


@cuda.jit
def _duck_chunk_maps(dub, hold0, hold_n, thr, duck, step, maps):
    c = cuda.grid(1)
    if c >= maps.shape[0]:
        return
    s0 = c * MIX_CHUNK
    e = min(s0 + MIX_CHUNK, dub.shape[0])
    hold = _hold_before(dub, s0, hold0, hold_n, thr)
    one = float32(1.0)
    a, lo, hi = float32(0.0), -_BIG, _BIG
    for i in range(s0, e):
        if abs(dub[i]) > thr:
            hold = hold_n
        elif hold > 0:
            hold -= 1
        d = -step if hold > 0 else step
        a += d
        lo = min(max(lo + d, duck), one)
        hi = min(max(hi + d, duck), one)
    maps[c, 0] = a
    maps[c, 1] = lo
    maps[c, 2] = hi


@cuda.jit
def _duck_chunk_starts(maps, g0, gstart):
    if cuda.grid(1) != 0:
        return
    g = g0
    for c in range(maps.shape[0]):
        gstart[c] = g
        g = min(max(g + maps[c, 0], maps[c, 1]), maps[c, 2])


@cuda.jit
def _duck_apply(orig, dub, gstart, hold0, hold_n, thr, duck, step, knee, out, env):
    c = cuda.grid(1)
    if c >= gstart.shape[0]:
        return
    s0 = c * MIX_CHUNK
    e = min(s0 + MIX_CHUNK, dub.shape[0])
    hold = _hold_before(dub, s0, hold0, hold_n, thr)
    g = gstart[c]
    one = float32(1.0)
    for i in range(s0, e):
        if abs(dub[i]) > thr:
            hold = hold_n
        elif hold > 0:
            hold -= 1
        if hold > 0:
            g = max(g - step, duck)
        else:
            g = min(g + step, one)
        env[i] = g
        out[i] = _soft_clip(orig[i] * g + dub[i], knee)


def mix_duck(orig, dub, gain, hold, duck, step, hold_n, thr, knee):
    n = orig.shape[0]
    n_chunks = (n + MIX_CHUNK - 1) // MIX_CHUNK
    blocks = (n_chunks + MIX_THREADS - 1) // MIX_THREADS
    st = _ws.stream
    f = np.float32
    d_orig = _ws.buf("mix_orig", np.float32).upload(orig, st)
    d_dub = _ws.buf("mix_dub", np.float32).upload(dub, st)
    d_maps = _ws.buf("mix_maps", np.float32, (3,)).view(n_chunks)
    d_start = _ws.buf("mix_start", np.float32).view(n_chunks)
    d_out = _ws.buf("mix_out", np.float32).view(n)
    d_env = _ws.buf("mix_env", np.float32).view(n)
    _duck_chunk_maps[blocks, MIX_THREADS, st](d_dub, hold, hold_n, f(thr), f(duck), f(step), d_maps)
    _duck_chunk_starts[1, 1, st](d_maps, f(gain), d_start)
    _duck_apply[blocks, MIX_THREADS, st](d_orig, d_dub, d_start, hold, hold_n, f(thr), f(duck), f(step),
                                         f(knee), d_out, d_env)
    out, env = d_out.copy_to_host(stream=st), d_env.copy_to_host(stream=st)
    st.synchronize()
    return out, env
