"""Streaming polyphase FIR resampler (48000 / 44100 / 8000 Hz -> 16000 Hz, or any rational ratio).

The ratio is reduced to ``up / down`` by their gcd (44100 -> 16000 is 160 / 441). Conceptually
the input is zero-stuffed by ``up``, low-passed by one Kaiser-windowed sinc ``h`` and decimated
by ``down``; the polyphase form computes only the outputs that are kept, and only the non-zero
products: output m needs phase ``p = (m*down) % up`` of the filter, ``taps[p, j] = h[p + j*up]``,
against inputs ``x[(m*down)//up - j]``.

Design (done once per resampler, in NumPy):

* a Kaiser-windowed sinc (``beta`` 8, ~80 dB stopband) with ``zero_crossings`` = 64 lobes each
  side, its cutoff placed so the stopband begins at the lower of the two Nyquist frequencies;
* the half-length is a multiple of ``down``, so the filter delay is a whole number of output
  samples (``delay`` = half / down). The resampler drops those first ``delay`` outputs, so its
  output is time-aligned with the input (output k ~ input time k / sr_out), exactly like a
  one-shot ``soxr.resample``; ``flush()`` pushes zeros to release the last ``delay`` outputs.

Streaming: the last ``n_taps - 1`` input samples are kept as history (zeros before the stream
starts) and the next output's phase and input position are carried as small integers. Each
output is computed from the same samples in the same order whatever the block boundaries, so
``process`` block by block followed by ``flush`` gives exactly (bit for bit) the one-shot result.
"""

from __future__ import annotations

import math

import numpy as np

from app.core.audio import SR

from .dispatch import choose_backend, require_finite


def design_lowpass(up: int, down: int, zero_crossings: int = 64, beta: float = 8.0,
                   rolloff: float | None = None) -> tuple[np.ndarray, int]:
    """Prototype low-pass at the upsampled rate; returns (h, half) with len(h) == 2*half + 1.

    ``rolloff`` (cutoff as a fraction of the lower Nyquist) defaults to the highest value whose
    stopband still starts at that Nyquist, from Kaiser's estimate of the transition width: no
    aliasing into (or imaging out of) the output band above the ~80 dB stopband of beta = 8.
    With 64 zero crossings that is 0.96 (passband to ~7.3 kHz at 16 kHz out), close to soxr HQ.
    """
    ratio = max(up, down)
    if rolloff is None:
        atten = beta / 0.1102 + 8.7  # stopband dB, Kaiser's beta(A) = 0.1102 (A - 8.7) inverted
        rolloff = 1.0 - 0.5 * (atten - 7.95) / (2.285 * 2 * zero_crossings * np.pi)
    fc = rolloff * 0.5 / ratio  # cycles per upsampled sample
    half = down * math.ceil(zero_crossings * ratio / down)  # delay = half / down output samples
    n = np.arange(-half, half + 1, dtype=np.float64)
    h = 2 * fc * np.sinc(2 * fc * n) * np.kaiser(2 * half + 1, beta)
    h *= up / h.sum()  # unity DC gain once the zero-stuffed input is filtered
    return h, half


def polyphase(h: np.ndarray, up: int) -> np.ndarray:
    """(up, n_taps) with taps[p, j] = h[p + j*up] (zero past the end)."""
    n_taps = -(-len(h) // up)
    padded = np.zeros(up * n_taps)
    padded[: len(h)] = h
    return padded.reshape(n_taps, up).T.copy()


def _resample_block_numpy(buf, taps, up, down, p0, i0, n_out):
    """Reference: vectorised over outputs, a fixed sequential loop over taps (float64)."""
    t = p0 + down * np.arange(n_out, dtype=np.int64)
    phase = t % up
    idx = i0 + t // up
    acc = np.zeros(n_out)
    for j in range(taps.shape[1]):
        acc += taps[phase, j] * buf[idx - j]
    return acc.astype(np.float32)


class StreamingResampler:
    """``process(block)`` returns what is ready; ``flush()`` returns the tail and resets."""

    def __init__(self, sr_in: int, sr_out: int = SR, backend: str = "auto", *,
                 zero_crossings: int = 64, beta: float = 8.0, rolloff: float | None = None):
        if sr_in <= 0 or sr_out <= 0:
            raise ValueError(f"sample rates must be positive, got {sr_in} -> {sr_out}")
        g = math.gcd(int(sr_in), int(sr_out))
        self.sr_in, self.sr_out = int(sr_in), int(sr_out)
        self.up, self.down = self.sr_out // g, self.sr_in // g
        self.backend = choose_backend(backend)
        h, half = design_lowpass(self.up, self.down, zero_crossings, beta, rolloff)
        self.taps = polyphase(h, self.up)  # float64 (the reference); the compiled kernels use float32
        self.n_taps = self.taps.shape[1]
        self.delay = half // self.down  # output samples, trimmed at the start
        self._half = half
        # every kernel is called as kernel(buf, p0, i0, n_out) -> float32 outputs
        if self.backend == "cuda":
            from . import _cuda  # imports Numba CUDA: only when the "cuda" backend runs

            self._kernel = _cuda.CudaResampler(self.taps, self.up, self.down)
        else:
            up, down = self.up, self.down
            if self.backend == "cpu":
                from ._cpu import PARALLEL, resample_block  # imports Numba: only when the "cpu" backend runs

                rtaps = np.ascontiguousarray(self.taps[:, ::-1], dtype=np.float32)

                def kernel(buf, p0, i0, n_out):
                    with PARALLEL:
                        return resample_block(buf, rtaps, up, down, p0, i0, n_out)
                self._kernel = kernel
            else:
                taps = self.taps
                self._kernel = lambda buf, p0, i0, n_out: _resample_block_numpy(buf, taps, up, down, p0, i0, n_out)
        self.reset()

    def reset(self) -> None:
        self._hist = np.zeros(self.n_taps - 1, np.float32)
        self._n_seen = 0  # input samples consumed
        self._n_emitted = 0  # output samples returned
        # The next output is m = delay + n_emitted, at m*down = half + n_emitted*down on the
        # upsampled grid; (q, p) = divmod(m*down, up) is its newest input index and filter phase.
        self._q, self._p = divmod(self._half, self.up)

    def _run(self, block: np.ndarray) -> np.ndarray:
        n_total = self._n_seen + len(block)
        avail = n_total - 1 - self._q  # how far past the next output's input index we can go
        n_out = 0 if avail < 0 else ((avail + 1) * self.up - self._p + self.down - 1) // self.down
        buf = np.concatenate([self._hist, block]) if len(block) else self._hist
        i0 = self._q - (self._n_seen - len(self._hist))  # buf index of input q
        out = self._kernel(buf, self._p, i0, n_out)
        dq, self._p = divmod(self._p + n_out * self.down, self.up)
        self._q += dq
        self._n_seen = n_total
        self._hist = buf[len(buf) - len(self._hist):].copy()
        self._n_emitted += n_out
        return out

    def process(self, block: np.ndarray) -> np.ndarray:
        block = np.ascontiguousarray(block, dtype=np.float32).reshape(-1)
        require_finite(block, "audio")
        return self._run(block)

    def flush(self) -> np.ndarray:
        """Release the outputs still inside the filter delay; total = ceil(n_in * up / down)."""
        target = -(-self._n_seen * self.up // self.down)
        remaining = target - self._n_emitted
        out = np.zeros(0, np.float32)
        if remaining > 0:
            # the last output, m = delay + target - 1, reads up to input index q_last
            q_last = ((self.delay + target - 1) * self.down) // self.up
            out = self._run(np.zeros(max(q_last - self._n_seen + 1, 0), np.float32))[:remaining]
        self.reset()
        return out


def resample_oneshot(audio: np.ndarray, sr_in: int, sr_out: int = SR, backend: str = "auto") -> np.ndarray:
    """One-shot convenience: the same as a fresh ``StreamingResampler``'s process + flush."""
    r = StreamingResampler(sr_in, sr_out, backend)
    return np.concatenate([r.process(audio), r.flush()])
