"""Stage supervision: a stage whose worker raises, or stalls inside a model call past a
deadline, gets a fresh worker thread over the same queues, resuming from the stage's last
committed point (``Stage.recover``). A restart budget bounds it: past ``max_restarts`` in
``window_s`` the session fails cleanly, as an unsupervised stage failure does.

A stalled worker cannot be killed in Python. It is abandoned instead: its generation no longer
matches the stage's, so when its model call returns it leaves (``Superseded``) without touching
the stage's state, and a priority-gate hold it had is released at once."""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("relay.supervisor")


class Superseded(BaseException):
    """Raised in a worker that was replaced while it was inside a model call."""


class StageStalled(RuntimeError):
    pass


@dataclass(frozen=True)
class StageRestarted:
    """A stage got a fresh worker (published on the bus; the metrics, the JSON lines and the
    summary count these)."""

    stage: str
    reason: str  # error | stall
    error: str  # exception type and message (never the speech or text it was working on)
    resumed_from: str  # where the new worker picks up
    restarts: int  # restarts so far in this session, all stages
    at: float  # pipeline clock

    def as_dict(self) -> dict:
        return {"stage": self.stage, "reason": self.reason, "error": self.error,
                "resumed_from": self.resumed_from, "restarts": self.restarts, "at": round(self.at, 3)}


@dataclass
class SupervisorConfig:
    stall_s: float = 20.0  # a single model call running longer than this is a stall ...
    stall_factor: float = 5.0  # ... and longer than this many times the stage's slowest recent call
    max_restarts: int = 3  # at most this many restarts (all stages) ...
    window_s: float = 60.0  # ... in any window this long; one more fails the session
    poll_s: float = 0.2  # how often the watchdog looks


def describe(err: BaseException) -> str:
    msg = str(err).splitlines()[0][:200] if str(err) else ""
    return f"{type(err).__name__}: {msg}" if msg else type(err).__name__


class Supervisor:
    """Watches a pipeline's stages; ``crashed`` is called by a stage's dying worker, the
    watchdog thread looks for stalls. ``now`` is a monotonic time source (tests pass their own)."""

    def __init__(self, stages, bus, clock, cfg: SupervisorConfig | None = None,
                 now: Callable[[], float] = time.monotonic):
        self.stages = list(stages)
        self.bus, self.clock = bus, clock
        self.cfg = cfg or SupervisorConfig()
        self._now = now
        self.restarts: list[StageRestarted] = []
        self._recent: collections.deque[float] = collections.deque()
        self._granted = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        for s in self.stages:
            s.supervisor = self

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        if self.cfg.stall_s > 0:
            self._thread = threading.Thread(target=self._watch, name="relay-supervisor", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(2.0)

    # -- decisions -------------------------------------------------------------------------------
    def _allow(self) -> int | None:
        """Take one restart from the budget: the new total, or None when it is spent."""
        with self._lock:
            now = self._now()
            while self._recent and self._recent[0] <= now - self.cfg.window_s:
                self._recent.popleft()
            if len(self._recent) >= self.cfg.max_restarts or self.bus.failures or self._stop.is_set():
                return None
            self._recent.append(now)
            self._granted += 1
            return self._granted

    def crashed(self, stage, err: BaseException) -> bool:
        """Called on the failing worker's own thread; True when a fresh worker took over."""
        n = self._allow()
        if n is None:
            return False
        stage.abandon_worker()
        self._restart(stage, "error", err, n)
        return True

    def check_stalls(self) -> None:
        now = self._now()
        for stage in self.stages:
            limit = stage.stall_limit(self.cfg.stall_s, self.cfg.stall_factor) if hasattr(stage, "stall_limit") \
                else self.cfg.stall_s
            if not stage.stalled(now, limit):
                continue
            err = StageStalled(f"no progress for {limit:.0f} s inside a model call")
            n = self._allow()
            stage.abandon_worker()  # whatever happens next, that worker no longer owns the stage
            if n is None:
                log.error("stage %s stalled; restart budget spent (%d in %g s)", stage.name,
                          self.cfg.max_restarts, self.cfg.window_s)
                stage.error = err
                stage.detach_worker()
                self.bus.fail(stage.name, err)
                continue
            self._restart(stage, "stall", err, n)

    def _restart(self, stage, reason: str, err: BaseException, n: int) -> None:
        resumed = stage.recover()
        ev = StageRestarted(stage.name, reason, describe(err), resumed, n, self.clock.now())
        stage.restarts += 1
        self.restarts.append(ev)
        log.warning("stage %s restarted after %s (%s); resuming from %s; %d restart(s) so far",
                    stage.name, reason, ev.error, resumed, n)
        log.debug("stage %s failure", stage.name, exc_info=err if reason == "error" else None)
        stage.spawn()
        self.bus.publish(ev)

    def _watch(self) -> None:
        while not self._stop.wait(self.cfg.poll_s):
            try:
                self.check_stalls()
            except Exception:  # the watchdog must outlive whatever it watches
                log.exception("supervisor check failed")

    def summary(self) -> dict:
        by_stage: dict[str, int] = {}
        for r in self.restarts:
            by_stage[r.stage] = by_stage.get(r.stage, 0) + 1
        return {"restarts": len(self.restarts), "by_stage": by_stage,
                "events": [r.as_dict() for r in self.restarts],
                "stall_s": self.cfg.stall_s, "budget": f"{self.cfg.max_restarts} per {self.cfg.window_s:g} s"}
