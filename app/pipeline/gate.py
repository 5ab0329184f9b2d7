"""The voice gate: Silero's speech probabilities turned into speech/non-speech frames with
hysteresis, as Silero's own segmenter does (speech starts above ``on``, goes on until the
probability falls below ``off``).

The thresholds were measured on the robustness set (bench/robust: real English speech under
applause, music, noise, clipping, attenuation and a telephone band). A telephone band (300-3400
Hz) takes Silero's probabilities down: with a plain 0.5 threshold 24 % of the speech frames were
speech (clean: 78 %), and five of eight sentences were never recognised. With 0.3/0.15: 65 %, and
no more frames of applause, music or pink noise between the sentences taken for speech (0 % at
both settings, every variant).

A telephone band still hides some voices from Silero at 0.3 (a LibriVox reader's sentence never
passed 0.27), so the gate watches the audio's band too: when the speech holds (almost) nothing above
3.8 kHz — 90 % of its loud pieces under 1e-4 of their energy there: telephone audio measured
3e-6, every wide-band recording in bench/robust and bench/corpus (music, noise and applause
included) 1.8e-3 or more — both thresholds are halved. Silence on such a line stays near 0."""

from __future__ import annotations

from collections import deque

import numpy as np

ON = 0.3
OFF = 0.15
NARROW_SCALE = 0.5  # the thresholds on narrow-band (telephone) audio
NARROW_RATIO = 1e-4  # energy above 3.8 kHz / energy above 100 Hz, 90th percentile of loud pieces
PIECE = 2048  # samples per band measurement (128 ms at 16 kHz)


class BandWatch:
    """Whether the audio heard so far is narrow-band (a telephone line): the share of each loud
    piece's energy above ``edge_hz``, over the last ``keep`` loud pieces."""

    def __init__(self, sr: int = 16000, edge_hz: float = 3800.0, keep: int = 64, min_pieces: int = 16,
                 loud_db: float = -50.0):
        freqs = np.fft.rfftfreq(PIECE, 1.0 / sr)
        self._hi, self._all = freqs > edge_hz, freqs > 100.0
        self._win = np.hanning(PIECE).astype(np.float32)
        self._ratios: deque[float] = deque(maxlen=keep)
        self._rest = np.zeros(0, dtype=np.float32)
        self.min_pieces, self._loud = min_pieces, 10 ** (loud_db / 10)
        self.narrow = False

    def feed(self, audio: np.ndarray) -> bool:
        a = np.concatenate([self._rest, np.asarray(audio, dtype=np.float32)])
        n = len(a) // PIECE
        self._rest = a[n * PIECE:].copy()
        if n:
            pieces = a[: n * PIECE].reshape(n, PIECE)
            loud = pieces[np.mean(pieces * pieces, axis=1) > self._loud]
            if len(loud):
                spec = np.abs(np.fft.rfft(loud * self._win, axis=1)) ** 2
                ratio = spec[:, self._hi].sum(axis=1) / np.maximum(spec[:, self._all].sum(axis=1), 1e-20)
                self._ratios.extend(float(r) for r in ratio)
            if len(self._ratios) >= self.min_pieces:
                self.narrow = bool(np.percentile(np.fromiter(self._ratios, float), 90) < NARROW_RATIO)
        return self.narrow


class Hysteresis:
    """Stateful across calls (frames arrive block by block, in order). Given the audio the
    probabilities came from, the thresholds drop on narrow-band audio (``BandWatch``)."""

    def __init__(self, on: float = ON, off: float = OFF):
        self.on, self.off = on, min(off, on)
        self.speaking = False
        self.band = BandWatch()

    def __call__(self, probs: np.ndarray, audio: np.ndarray | None = None) -> np.ndarray:
        scale = NARROW_SCALE if audio is not None and self.band.feed(audio) else 1.0
        on, off = self.on * scale, self.off * scale
        out = np.zeros(len(probs), dtype=bool)
        s = self.speaking
        for i, p in enumerate(np.asarray(probs, dtype=np.float32)):
            if s:
                s = p >= off
            else:
                s = p > on
            out[i] = s
        self.speaking = bool(s)
        return out

    @property
    def narrow(self) -> bool:
        return self.band.narrow

    def reset(self) -> None:
        self.speaking = False
