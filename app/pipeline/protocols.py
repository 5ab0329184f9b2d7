"""The small protocols that model backends implement. The pipeline knows nothing else about them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Protocol, Sequence

import numpy as np


@dataclass(frozen=True)
class Word:
    """A recognised word with its times in seconds on the source timeline."""

    text: str
    start: float
    end: float
    probability: float = 1.0


class ASRBackend(Protocol):
    """Recognises one window of 16 kHz mono audio.

    ``prefix`` is text already committed inside the window, forced as the decoder prefix;
    ``prompt`` is earlier committed text used as context. Returned words carry times relative
    to the window start and include the prefix words.
    """

    name: str
    language: str

    def transcribe_window(
        self, audio: np.ndarray, window_start_sample: int, prompt: str, prefix: Sequence[Word]
    ) -> list[Word]: ...

    def transcribe_utterance(self, audio: np.ndarray) -> list[Word]: ...


class MTBackend(Protocol):
    """Translates text; ``target_prefix`` is target text the output must begin with."""

    name: str

    def translate(self, source: str, target_prefix: str = "", beam_size: int | None = None) -> str: ...


class TTSBackend(Protocol):
    """Synthesises text into float32 mono chunks at ``sample_rate``, streaming clause by clause."""

    name: str
    sample_rate: int

    def synthesize(self, text: str, speed: float = 1.0) -> Iterator[np.ndarray]: ...


class VADBackend(Protocol):
    """Streaming voice activity: speech probability for each consecutive ``frame_samples`` block."""

    frame_samples: int

    def reset(self) -> None: ...

    def process(self, audio: np.ndarray) -> np.ndarray: ...
