"""The voice gate: Silero's speech probabilities turned into speech/non-speech frames with
hysteresis, as Silero's own segmenter does (speech starts above ``on``, goes on until the
probability falls below ``off``).

The thresholds were measured on the robustness set (bench/robust: real English speech under
applause, music, noise, clipping, attenuation and a telephone band). A telephone band (300-3400
Hz) takes Silero's probabilities down: with a plain 0.5 threshold 24 % of the speech frames were
speech (clean: 78 %), and five of eight sentences were never recognised. With 0.3/0.15: 65 %, and
no more frames of applause, music or pink noise between the sentences taken for speech (0 % at
both settings, every variant)."""

from __future__ import annotations

import numpy as np

ON = 0.3
OFF = 0.15


class Hysteresis:
    """Stateful across calls (frames arrive block by block, in order)."""

    def __init__(self, on: float = ON, off: float = OFF):
        self.on, self.off = on, min(off, on)
        self.speaking = False

    def __call__(self, probs: np.ndarray) -> np.ndarray:
        out = np.zeros(len(probs), dtype=bool)
        s = self.speaking
        for i, p in enumerate(np.asarray(probs, dtype=np.float32)):
            if s:
                s = p >= self.off
            else:
                s = p > self.on
            out[i] = s
        self.speaking = bool(s)
        return out

    def reset(self) -> None:
        self.speaking = False
