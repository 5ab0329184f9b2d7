"""Bounded queues, each with an explicit policy for when it is full, and a control side-channel."""

from __future__ import annotations

import collections
import threading
import time
from enum import Enum
from typing import Callable, Generic, Hashable, TypeVar

T = TypeVar("T")


class FullPolicy(Enum):
    BLOCK = "block"  # committed text: never lost, the producer waits
    DROP_OLDEST = "drop_oldest"  # audio-like data: the newest matters most
    COALESCE = "coalesce"  # tentative text: a newer item with the same key replaces the old


class Closed(Exception):
    pass


class BoundedQueue(Generic[T]):
    def __init__(
        self,
        maxsize: int,
        policy: FullPolicy,
        name: str = "queue",
        key: Callable[[T], Hashable] | None = None,
    ):
        if maxsize <= 0:
            raise ValueError("maxsize must be positive")
        self.maxsize = maxsize
        self.policy = policy
        self.name = name
        self._key = key or (lambda item: type(item))
        self._items: collections.deque = collections.deque()
        self._cond = threading.Condition()
        self._closed = False
        self.dropped = 0
        self.coalesced = 0
        self.max_depth = 0

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: T, timeout: float | None = None) -> bool:
        """Returns False only if a BLOCK queue stayed full past ``timeout``."""
        with self._cond:
            if self._closed:
                raise Closed(self.name)
            if self.policy is FullPolicy.COALESCE:
                k = self._key(item)
                for i, old in enumerate(self._items):
                    if self._key(old) == k:
                        self._items[i] = item
                        self.coalesced += 1
                        self._cond.notify_all()
                        return True
            if len(self._items) >= self.maxsize:
                if self.policy is FullPolicy.BLOCK:
                    ok = self._cond.wait_for(lambda: len(self._items) < self.maxsize or self._closed, timeout)
                    if self._closed:
                        raise Closed(self.name)
                    if not ok:
                        return False
                else:
                    self._items.popleft()
                    self.dropped += 1
            self._items.append(item)
            self.max_depth = max(self.max_depth, len(self._items))
            self._cond.notify_all()
            return True

    def get(self, timeout: float | None = None) -> T | None:
        """The oldest item, or None on timeout; raises Closed once closed and drained."""
        with self._cond:
            ok = self._cond.wait_for(lambda: self._items or self._closed, timeout)
            if self._items:
                item = self._items.popleft()
                self._cond.notify_all()
                return item
            if self._closed:
                raise Closed(self.name)
            return None if not ok else None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def wait_empty(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: not self._items, timeout)


class ControlChannel:
    """Control messages bypass data queues: a stage checks this before every unit of work."""

    def __init__(self):
        self._items: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self._event = threading.Event()

    def send(self, msg) -> None:
        with self._lock:
            self._items.append(msg)
            self._event.set()

    def drain(self) -> list:
        with self._lock:
            out = list(self._items)
            self._items.clear()
            self._event.clear()
            return out

    def wait(self, timeout: float) -> bool:
        return self._event.wait(timeout)


class MonotonicClock:
    """Seconds since construction from ``time.monotonic`` (immune to wall-clock steps)."""

    def __init__(self):
        self._t0 = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self._t0

    def sleep_until(self, t: float) -> None:
        d = t - self.now()
        if d > 0:
            time.sleep(d)


class FakeClock:
    """A clock that tests move by hand."""

    def __init__(self, t: float = 0.0):
        self.t = t

    def now(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt

    def sleep_until(self, t: float) -> None:
        self.t = max(self.t, t)


class PriorityGate:
    """Lets a latency-critical stage (MT on committed text) run without competing for the CPU:
    while it is inside ``urgent()``, a background stage (ASR) waits before starting its next step."""

    def __init__(self):
        self._busy = 0
        self._cond = threading.Condition()
        self.waits = 0

    def urgent(self):
        gate = self

        class _Ctx:
            def __enter__(self):
                with gate._cond:
                    gate._busy += 1

            def __exit__(self, *exc):
                with gate._cond:
                    gate._busy -= 1
                    gate._cond.notify_all()

        return _Ctx()

    def wait_clear(self, timeout: float) -> None:
        with self._cond:
            if self._busy:
                self.waits += 1
                self._cond.wait_for(lambda: self._busy == 0, timeout)
