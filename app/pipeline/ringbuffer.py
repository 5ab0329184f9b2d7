"""A preallocated float32 ring buffer for audio, indexed by absolute sample position."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np


class Overrun(Exception):
    """The requested samples were overwritten before the reader got to them."""


@dataclass
class ReaderCursor:
    """Each consumer keeps its own position; one capture can feed several readers."""

    position: int = 0
    overruns: int = 0


class AudioRing:
    """Single writer, many readers. The writer never blocks: when full, the oldest audio is
    overwritten (drop-oldest) and a reader that fell that far behind is told by ``Overrun``.

    ``write`` copies into preallocated storage (no allocation); ``read`` returns a view when the
    span is contiguous and a copy only when it wraps.
    """

    def __init__(self, capacity: int):
        if capacity <= 0:
            raise ValueError("capacity must be positive")
        self.capacity = capacity
        self._buf = np.zeros(capacity, dtype=np.float32)
        self._written = 0  # absolute index one past the last written sample
        self._cond = threading.Condition()
        self._closed = False

    @property
    def written(self) -> int:
        return self._written

    @property
    def oldest(self) -> int:
        return max(0, self._written - self.capacity)

    @property
    def closed(self) -> bool:
        return self._closed

    def write(self, samples: np.ndarray) -> int:
        """Append samples; returns the absolute index of the first one."""
        n = len(samples)
        first = self._written
        if n == 0:
            return first
        if n > self.capacity:
            samples = samples[-self.capacity :]
            first += n - self.capacity
            n = self.capacity
        pos = first % self.capacity
        k = min(n, self.capacity - pos)
        self._buf[pos : pos + k] = samples[:k]
        if k < n:
            self._buf[: n - k] = samples[k:]
        with self._cond:
            self._written = first + n
            self._cond.notify_all()
        return first

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def read(self, start: int, end: int) -> np.ndarray:
        """Samples [start, end) by absolute index."""
        if end > self._written:
            raise ValueError("cannot read past what was written")
        if start < self.oldest:
            raise Overrun(f"samples from {start} were overwritten (oldest is {self.oldest})")
        n = end - start
        if n <= 0:
            return self._buf[:0]
        pos = start % self.capacity
        if pos + n <= self.capacity:
            return self._buf[pos : pos + n]
        k = self.capacity - pos
        return np.concatenate((self._buf[pos:], self._buf[: n - k]))

    def wait_for(self, index: int, timeout: float | None = None) -> bool:
        """Block until sample ``index`` exists (or the ring is closed); True if it exists."""
        with self._cond:
            self._cond.wait_for(lambda: self._written >= index or self._closed, timeout)
            return self._written >= index

    def read_new(self, cursor: ReaderCursor, max_samples: int | None = None) -> tuple[int, np.ndarray]:
        """Everything after the reader's cursor; advances it. Counts and skips an overrun."""
        start = cursor.position
        if start < self.oldest:
            cursor.overruns += 1
            start = self.oldest
        end = self._written if max_samples is None else min(self._written, start + max_samples)
        data = self.read(start, end)
        cursor.position = end
        return start, data
