"""Whisper log-mel front-end: a NumPy reference and an incremental streaming extractor.

Whisper's features for a window of audio ``w`` are computed as (faster-whisper's
``FeatureExtractor``): append 160 zero samples, centre-pad by 200 samples with reflection,
frame with a 400-point periodic Hann window at hop 160, take |STFT|^2 (dropping the last frame),
project onto the mel filterbank, ``log10(max(x, 1e-10))``, clamp to ``max - 8`` and map with
``(x + 4) / 4``.

Every frame whose 400-sample span lies wholly inside real audio depends only on those samples,
not on where the window starts or ends. ``IncrementalLogMel`` caches the raw log10-mel of such
frames by absolute frame index, so when a streaming window grows or slides only the new frames
(and the two or three frames at each edge, which see padding) are computed. The window-wide
clamp and normalisation are cheap and applied per request.

The per-frame work (window, power spectrum, mel projection, log10) is one fused kernel,
``log_mel_frames(signal, starts, filters, backend)``: NumPy here, Numba CPU in ``_cpu.py`` and
Numba CUDA in ``_cuda.py`` (chosen by ``app.accel.dispatch``). ``backend="numpy"`` is the default
of ``log_mel_reference`` and ``IncrementalLogMel`` so existing callers are unchanged (the
incremental path now transforms all of a call's new frames in one batch, so BLAS/FFT blocking
can move a value by one float32 ulp, ~1e-7); the other backends match it to ~1e-5 after
normalisation.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from app.core.audio import HOP, SR

from .dispatch import choose_backend, require_finite

N_FFT = 400
N_BINS = N_FFT // 2 + 1
_HALF = N_FFT // 2
_LOG_FLOOR = 1e-10


def mel_filters(n_mels: int, sr: int = SR, n_fft: int = N_FFT) -> np.ndarray:
    """Slaney-style mel filterbank identical to Whisper's (librosa ``htk=False``, ``norm='slaney'``)."""
    fftfreqs = np.fft.rfftfreq(n=n_fft, d=1.0 / sr)
    min_mel, max_mel = 0.0, 45.245640471924965
    mels = np.linspace(min_mel, max_mel, n_mels + 2)
    f_sp = 200.0 / 3
    freqs = f_sp * mels
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0
    log_t = mels >= min_log_mel
    freqs[log_t] = min_log_hz * np.exp(logstep * (mels[log_t] - min_log_mel))
    fdiff = np.diff(freqs)
    ramps = freqs.reshape(-1, 1) - fftfreqs.reshape(1, -1)
    lower = -ramps[:-2] / np.expand_dims(fdiff[:-1], axis=1)
    upper = ramps[2:] / np.expand_dims(fdiff[1:], axis=1)
    weights = np.maximum(np.zeros_like(lower), np.minimum(lower, upper))
    enorm = 2.0 / (freqs[2 : n_mels + 2] - freqs[:n_mels])
    weights *= np.expand_dims(enorm, axis=1)
    return weights.astype(np.float32)


_WINDOW = np.hanning(N_FFT + 1)[:-1].astype(np.float32)


def check_finite(audio: np.ndarray) -> None:
    require_finite(audio, "audio")


# -- the fused per-frame kernel ---------------------------------------------------------------
# An engine maps (signal float32, starts int64) -> raw log10-mel (n_mels, len(starts)) float32,
# frame j being signal[starts[j] : starts[j] + N_FFT]. Engines are bound to one filterbank.
Engine = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _log_mel_frames_numpy(signal: np.ndarray, starts: np.ndarray, filters: np.ndarray) -> np.ndarray:
    """The reference: gather, Hann window, rfft, |.|^2, mel matmul, log10 with a 1e-10 floor."""
    if len(starts) == 0:
        return np.zeros((filters.shape[0], 0), dtype=np.float32)
    idx = np.arange(N_FFT)[None, :] + starts[:, None]
    frames = signal[idx] * _WINDOW
    spec = np.fft.rfft(frames, axis=1)
    power = (spec.real**2 + spec.imag**2).astype(np.float32)
    mel = filters @ power.T
    return np.log10(np.maximum(mel, _LOG_FLOOR)).astype(np.float32)


def mel_bands(filters: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per mel row, the [lo, hi) range of FFT bins with non-zero weight (empty rows: lo == hi).

    Each triangular filter touches only a few bins, so the compiled kernels sum over this
    range instead of all 201 bins (~98% of the reference's matmul multiplies by 0: 80 mels
    have 391 non-zero weights in all).
    """
    nz = filters != 0
    any_nz = nz.any(axis=1)
    lo = np.where(any_nz, nz.argmax(axis=1), 0)
    hi = np.where(any_nz, filters.shape[1] - nz[:, ::-1].argmax(axis=1), 0)
    return lo.astype(np.int64), hi.astype(np.int64)


def make_engine(filters: np.ndarray, backend: str = "numpy") -> Engine:
    """An engine for ``backend`` (already resolved or not). CUDA engines own device buffers."""
    backend = choose_backend(backend)
    filters = np.ascontiguousarray(filters, dtype=np.float32)
    if filters.ndim != 2 or filters.shape[1] != N_BINS:
        raise ValueError(f"mel filters must have shape (n_mels, {N_BINS}), got {filters.shape}")
    if backend == "numpy":
        return lambda signal, starts: _log_mel_frames_numpy(signal, starts, filters)
    lo, hi = mel_bands(filters)
    if backend == "cpu":
        from . import _cpu  # imports Numba: only when the "cpu" backend runs

        def frames(signal, starts):
            with _cpu.PARALLEL:
                return _cpu.log_mel_frames(signal, starts, _WINDOW, filters, lo, hi)
        return frames
    from . import _cuda  # imports Numba CUDA: only when the "cuda" backend runs

    return _cuda.CudaLogMel(_WINDOW, filters, lo, hi)


_engines: dict[tuple[str, bytes], Engine] = {}


def _shared_engine(filters: np.ndarray, backend: str) -> Engine:
    """One engine per (backend, filterbank) for one-shot calls, so CUDA buffers are reused."""
    backend = choose_backend(backend)
    key = (backend, np.ascontiguousarray(filters, dtype=np.float32).tobytes())
    eng = _engines.get(key)
    if eng is None:
        eng = _engines[key] = make_engine(filters, backend)
    return eng


def log_mel_frames(signal: np.ndarray, starts: np.ndarray, filters: np.ndarray,
                   backend: str = "auto") -> np.ndarray:
    """Raw log10-mel of the N_FFT-sample frames of ``signal`` beginning at each of ``starts``.

    Returns float32 (n_mels, len(starts)). ``signal`` must already hold any padding: a frame
    that would run past either end is rejected (compiled kernels do no bounds checks).
    """
    signal = np.ascontiguousarray(signal, dtype=np.float32)
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    require_finite(signal, "audio")
    if starts.ndim != 1 or signal.ndim != 1:
        raise ValueError("log_mel_frames needs a 1-D signal and 1-D frame starts")
    if starts.size and (starts.min() < 0 or starts.max() + N_FFT > len(signal)):
        raise ValueError(f"frame starts must lie in [0, len(signal) - {N_FFT}]")
    return _shared_engine(filters, backend)(signal, starts)


def _normalise(raw: np.ndarray) -> np.ndarray:
    """Whisper's window-wide clamp and scaling, in place (``raw`` is always a fresh array)."""
    if raw.size == 0:
        return raw
    np.maximum(raw, raw.max() - np.float32(8.0), out=raw)
    raw += np.float32(4.0)
    raw *= np.float32(0.25)  # == / 4 exactly
    return raw


def _whisper_pad(audio: np.ndarray) -> np.ndarray:
    """``reflect-pad(audio + 160 zeros, 200)``, as Whisper frames it.

    Built by slicing into one buffer: ``np.pad(mode="reflect")`` took ~4 ms on 30 s of audio,
    as long as the whole Numba CPU log-mel kernel.
    """
    wav_len = len(audio) + HOP
    if wav_len <= _HALF:
        # reflection needs more samples than the pad amount; Whisper would fail here too.
        wav = np.pad(audio, (0, _HALF + 1 - len(audio)))
        return np.pad(wav, (_HALF, _HALF), mode="reflect")
    out = np.empty(wav_len + 2 * _HALF, np.float32)
    out[_HALF : _HALF + len(audio)] = audio
    out[_HALF + len(audio) : _HALF + wav_len] = 0.0
    out[:_HALF] = out[2 * _HALF : _HALF : -1]  # out[i] = wav[200 - i]
    end = _HALF + wav_len
    out[end:] = out[end - 2 : end - 2 - _HALF : -1]  # out[end + i] = wav[wav_len - 2 - i]
    return out


def _features_from_scratch(audio: np.ndarray, engine: Engine) -> np.ndarray:
    n_frames = (len(audio) + HOP) // HOP
    padded = _whisper_pad(audio)
    return _normalise(engine(padded, HOP * np.arange(n_frames, dtype=np.int64)))


def log_mel_reference(audio: np.ndarray, n_mels: int = 80, filters: np.ndarray | None = None,
                      backend: str = "numpy") -> np.ndarray:
    """Features of one window, computed from scratch; shape (n_mels, (len(audio)+160)//160)."""
    audio = np.asarray(audio, dtype=np.float32)
    check_finite(audio)
    filters = mel_filters(n_mels) if filters is None else filters
    return _features_from_scratch(audio, _shared_engine(filters, backend))


class IncrementalLogMel:
    """Log-mel of sliding windows over one audio stream, reusing frames already computed.

    ``features(audio, start)`` takes the window's samples and the absolute sample index of its
    first sample (a multiple of HOP for reuse); it returns exactly what ``log_mel_reference`` would.
    ``backend`` picks the frame kernel ("numpy", "cpu", "cuda" or "auto", see ``dispatch``); it is
    resolved once here, and a CUDA instance keeps its device buffers and stream for its lifetime.
    """

    def __init__(self, n_mels: int = 80, max_frames: int = 3000 * 4, backend: str = "numpy"):
        self.n_mels = n_mels
        self.filters = mel_filters(n_mels)
        self.backend = choose_backend(backend)
        self._engine = make_engine(self.filters, self.backend)  # owns the GPU buffers for "cuda"
        self._cap = max_frames
        self._cache = np.zeros((n_mels, max_frames), dtype=np.float32)
        self._cached_lo = 0  # absolute frame index range [lo, hi) held in the ring
        self._cached_hi = 0
        self.frames_computed = 0  # how many frames were actually transformed (for benchmarks)

    def reset(self) -> None:
        self._cached_lo = self._cached_hi = 0

    def _ring_slices(self, lo: int, hi: int) -> list[tuple[slice, slice]]:
        """(ring columns, offset within [lo, hi)) for absolute frames [lo, hi), hi - lo <= cap.

        Plain slices rather than fancy indexing: in a 30 s streaming loop the cache gather was
        the largest cost after the transform itself.
        """
        a = lo % self._cap
        n1 = min(hi - lo, self._cap - a)
        parts = [(slice(a, a + n1), slice(0, n1))]
        if n1 < hi - lo:
            parts.append((slice(0, hi - lo - n1), slice(n1, hi - lo)))
        return parts

    def _get_cached(self, lo: int, hi: int, dst: np.ndarray) -> None:
        for ring, off in self._ring_slices(lo, hi):
            dst[:, off] = self._cache[:, ring]

    def _store(self, first: int, raw: np.ndarray) -> None:
        """Keep frames [first, first+n); the cache is one contiguous range of at most cap frames."""
        n = raw.shape[1]
        if n == 0:
            return
        if n > self._cap:
            first, raw, n = first + n - self._cap, raw[:, -self._cap :], self._cap
        for ring, off in self._ring_slices(first, first + n):
            self._cache[:, ring] = raw[:, off]
        if first != self._cached_hi:
            self._cached_lo = first
        self._cached_hi = first + n
        self._cached_lo = max(self._cached_lo, self._cached_hi - self._cap)

    def features(self, audio: np.ndarray, start: int) -> np.ndarray:
        audio = np.asarray(audio, dtype=np.float32)
        check_finite(audio)
        n = len(audio)
        if start % HOP or n < 2 * N_FFT:
            return _features_from_scratch(audio, self._engine)
        n_frames = (n + HOP) // HOP
        # Interior frames j (0-based within the window) span audio[j*HOP-200 : j*HOP+200].
        j_lo = 2  # first j with j*HOP-200 >= 0
        j_hi = (n - _HALF) // HOP + 1  # one past last j with j*HOP+200 <= n
        j_hi = min(j_hi, n_frames)
        base = start // HOP  # absolute frame index of j=0
        raw = np.empty((self.n_mels, n_frames), dtype=np.float32)

        # Every frame to transform this call goes into ONE kernel call (one host->device copy
        # and one copy back on CUDA): segments are concatenated and each contributes
        # `count` frames at hop HOP, written to raw[:, col : col + count].
        segments: list[tuple[np.ndarray, int, int]] = []

        # Edges: computed from the exact padded window, as the reference does (only the edge
        # samples are copied; n >= 800, so the head lies inside the audio).
        head = np.pad(audio[: N_FFT + HOP * j_lo], (_HALF, 0), mode="reflect")
        segments.append((head, j_lo, 0))
        tail_first = j_hi
        tail_n = n_frames - tail_first
        if tail_n > 0:
            seg = np.concatenate([audio[tail_first * HOP - _HALF :], np.zeros(HOP, np.float32)])
            seg = np.pad(seg, (0, _HALF), mode="reflect")
            segments.append((seg, tail_n, tail_first))
        self.frames_computed += j_lo + max(tail_n, 0)

        # Interior: reuse cached absolute frames, compute only the missing ones.
        a_lo, a_hi = base + j_lo, base + j_hi
        c_lo, c_hi = max(a_lo, self._cached_lo), min(a_hi, self._cached_hi)
        if c_lo < c_hi:
            self._get_cached(c_lo, c_hi, raw[:, c_lo - base : c_hi - base])
            missing = []
            if a_lo < c_lo:
                missing.append((a_lo, c_lo))
            if c_hi < a_hi:
                missing.append((c_hi, a_hi))
        else:
            missing = [(a_lo, a_hi)]
        missing = [(m_lo, m_hi) for m_lo, m_hi in missing if m_hi > m_lo]
        for m_lo, m_hi in missing:
            s = (m_lo - base) * HOP - _HALF
            e = (m_hi - 1 - base) * HOP + _HALF
            segments.append((audio[s:e], m_hi - m_lo, m_lo - base))
            self.frames_computed += m_hi - m_lo

        offsets = np.cumsum([0] + [len(seg) for seg, _, _ in segments])
        signal = np.concatenate([seg for seg, _, _ in segments])
        starts = np.concatenate([off + HOP * np.arange(cnt, dtype=np.int64)
                                 for off, (_, cnt, _) in zip(offsets, segments)])
        out = self._engine(signal, starts)
        k = 0
        for _, cnt, col in segments:
            raw[:, col : col + cnt] = out[:, k : k + cnt]
            k += cnt
        for m_lo, m_hi in missing:
            if m_lo >= self._cached_lo:  # forward growth; frames before the cache are not kept
                self._store(m_lo, raw[:, m_lo - base : m_hi - base])
        return _normalise(raw)
