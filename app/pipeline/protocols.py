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

    def transcribe_utterance(self, audio: np.ndarray, prompt: str = "", beam_size: int | None = None) -> list[Word]:
        """One whole utterance (the serial cascade, the second pass): ``prompt`` is earlier text
        used as context, ``beam_size`` overrides the backend's beam."""
        ...

    # Optional (the second pass uses it when a backend has it): ``transcribe_continued(audio,
    # prefix, prompt="", beam_size=None)``: ``audio`` opens with earlier speech whose text
    # ``prefix`` is forced; returns all words, the prefix's included, times from the audio start.


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


class RunningSession(Protocol):
    """A session that audio is pushed into and events come out of: the local engine
    (``app.pipeline.engine.StreamingPipeline`` / ``SerialCascade``) and the cloud client
    (``app.cloud.client.CloudClient``) both implement it, and ``app.session.runner`` drives either.

    ``bus`` carries the events (``app.pipeline.messages``) to subscribers, in order; ``tracker``,
    ``record``, ``ring`` and ``arrival`` are the latency tracker, the session record, the audio
    ring (``ring.written``: samples pushed so far) and the arrival stamps. Times are on ``clock``.
    """

    kind: str  # "local" or "cloud": how the summary names the session's mode
    bus: object
    clock: object
    ring: object
    arrival: object
    tracker: object
    record: object
    started_at: float
    finished_at: float
    first_audio_at: float | None

    def start(self) -> None:
        """Start the workers (the cloud client opens its server session, or falls back)."""

    def push_audio(self, samples: np.ndarray, wait_if_full: bool = False, at: float | None = None) -> None:
        """16 kHz mono float32; ``at`` is when the block's last sample was captured."""

    def failed(self) -> bool:
        """True once the session cannot go on (a stage failed past its restarts)."""

    def finish(self, timeout: float = 600.0) -> None:
        """End of input: what is left is committed, translated and spoken; raises PipelineError."""

    def abort(self) -> None:
        """Stop now, dropping what is in flight: every thread the session started ends, its
        buffers are released. Safe to call more than once and after finish()."""

    def stage_stats(self) -> dict:
        """Per-stage statistics for the summary and the gauges."""
