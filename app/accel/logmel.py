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
"""

from __future__ import annotations

import numpy as np

SAMPLE_RATE = 16000
N_FFT = 400
HOP = 160
_HALF = N_FFT // 2
_LOG_FLOOR = 1e-10


def mel_filters(n_mels: int, sr: int = SAMPLE_RATE, n_fft: int = N_FFT) -> np.ndarray:
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
    if audio.size and not np.isfinite(audio).all():
        raise ValueError("audio contains NaN or Inf samples")


def _raw_log_mel_frames(padded: np.ndarray, n_frames: int, filters: np.ndarray) -> np.ndarray:
    """Raw log10-mel of ``n_frames`` frames starting at ``padded[0]`` (frame j spans j*HOP..+N_FFT)."""
    if n_frames <= 0:
        return np.zeros((filters.shape[0], 0), dtype=np.float32)
    idx = np.arange(N_FFT)[None, :] + HOP * np.arange(n_frames)[:, None]
    frames = padded[idx] * _WINDOW
    spec = np.fft.rfft(frames, axis=1)
    power = (spec.real**2 + spec.imag**2).astype(np.float32)
    mel = filters @ power.T
    return np.log10(np.maximum(mel, _LOG_FLOOR)).astype(np.float32)


def _normalise(raw: np.ndarray) -> np.ndarray:
    if raw.size == 0:
        return raw
    out = np.maximum(raw, raw.max() - 8.0)
    return ((out + 4.0) / 4.0).astype(np.float32)


def log_mel_reference(audio: np.ndarray, n_mels: int = 80, filters: np.ndarray | None = None) -> np.ndarray:
    """Features of one window, computed from scratch; shape (n_mels, (len(audio)+160)//160)."""
    audio = np.asarray(audio, dtype=np.float32)
    check_finite(audio)
    filters = mel_filters(n_mels) if filters is None else filters
    wav = np.pad(audio, (0, HOP))
    n_frames = len(wav) // HOP
    if len(wav) <= _HALF:
        # reflection needs more samples than the pad amount; Whisper would fail here too.
        wav = np.pad(wav, (0, _HALF + 1 - len(wav)))
    padded = np.pad(wav, (_HALF, _HALF), mode="reflect")
    return _normalise(_raw_log_mel_frames(padded, n_frames, filters))


class IncrementalLogMel:
    """Log-mel of sliding windows over one audio stream, reusing frames already computed.

    ``features(audio, start)`` takes the window's samples and the absolute sample index of its
    first sample (a multiple of HOP for reuse); it returns exactly what ``log_mel_reference`` would.
    """

    def __init__(self, n_mels: int = 80, max_frames: int = 3000 * 4):
        self.n_mels = n_mels
        self.filters = mel_filters(n_mels)
        self._cap = max_frames
        self._cache = np.zeros((n_mels, max_frames), dtype=np.float32)
        self._cached_lo = 0  # absolute frame index range [lo, hi) held in the ring
        self._cached_hi = 0
        self.frames_computed = 0  # how many frames were actually transformed (for benchmarks)

    def reset(self) -> None:
        self._cached_lo = self._cached_hi = 0

    def _get_cached(self, lo: int, hi: int) -> np.ndarray:
        idx = np.arange(lo, hi) % self._cap
        return self._cache[:, idx]

    def _store(self, first: int, raw: np.ndarray) -> None:
        """Keep frames [first, first+n); the cache is one contiguous range of at most cap frames."""
        n = raw.shape[1]
        if n == 0:
            return
        if n > self._cap:
            first, raw, n = first + n - self._cap, raw[:, -self._cap :], self._cap
        idx = np.arange(first, first + n) % self._cap
        self._cache[:, idx] = raw
        if first != self._cached_hi:
            self._cached_lo = first
        self._cached_hi = first + n
        self._cached_lo = max(self._cached_lo, self._cached_hi - self._cap)

    def features(self, audio: np.ndarray, start: int) -> np.ndarray:
        audio = np.asarray(audio, dtype=np.float32)
        check_finite(audio)
        n = len(audio)
        if start % HOP or n < 2 * N_FFT:
            return log_mel_reference(audio, self.n_mels, self.filters)
        n_frames = (n + HOP) // HOP
        # Interior frames j (0-based within the window) span audio[j*HOP-200 : j*HOP+200].
        j_lo = 2  # first j with j*HOP-200 >= 0
        j_hi = (n - _HALF) // HOP + 1  # one past last j with j*HOP+200 <= n
        j_hi = min(j_hi, n_frames)
        base = start // HOP  # absolute frame index of j=0
        raw = np.empty((self.n_mels, n_frames), dtype=np.float32)

        # Edges: compute from the exact padded window, as the reference does.
        wav = np.pad(audio, (0, HOP))
        head = np.pad(wav[: N_FFT + HOP * j_lo], (_HALF, 0), mode="reflect")
        raw[:, :j_lo] = _raw_log_mel_frames(head, j_lo, self.filters)
        tail_first = j_hi
        tail_n = n_frames - tail_first
        if tail_n > 0:
            seg = wav[tail_first * HOP - _HALF :]
            seg = np.pad(seg, (0, _HALF), mode="reflect")
            raw[:, tail_first:] = _raw_log_mel_frames(seg, tail_n, self.filters)
        self.frames_computed += j_lo + max(tail_n, 0)

        # Interior: reuse cached absolute frames, compute only the missing ones.
        a_lo, a_hi = base + j_lo, base + j_hi
        c_lo, c_hi = max(a_lo, self._cached_lo), min(a_hi, self._cached_hi)
        if c_lo < c_hi:
            raw[:, c_lo - base : c_hi - base] = self._get_cached(c_lo, c_hi)
            missing = []
            if a_lo < c_lo:
                missing.append((a_lo, c_lo))
            if c_hi < a_hi:
                missing.append((c_hi, a_hi))
        else:
            missing = [(a_lo, a_hi)]
        for m_lo, m_hi in missing:
            if m_hi <= m_lo:
                continue
            s = (m_lo - base) * HOP - _HALF
            e = (m_hi - 1 - base) * HOP + _HALF
            part = _raw_log_mel_frames(audio[s:e], m_hi - m_lo, self.filters)
            raw[:, m_lo - base : m_hi - base] = part
            self.frames_computed += m_hi - m_lo
            if m_lo >= self._cached_lo:  # forward growth; frames before the cache are not kept
                self._store(m_lo, part)
        return _normalise(raw)
