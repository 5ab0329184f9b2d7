"""The plumbing every pipeline worker shares: a worker thread the supervisor can replace, model
calls timed for its stall watchdog, holds on the priority gate, and a stop flag for abort."""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
import weakref

from app.pipeline.messages import Metric
from app.pipeline.queues import Closed, ControlChannel, PriorityGate
from app.pipeline.supervisor import Superseded

log = logging.getLogger("relay.pipeline")
_all_workers: weakref.WeakSet = weakref.WeakSet()  # every stage worker of this process
LOCK_WAIT_S = 120.0  # the longest a stage waits for a shared backend before its call is timed


def workers_alive() -> int:
    """Stage workers of any session still running: after a session ended, only abandoned workers
    stuck in a model call that Python cannot interrupt."""
    return sum(1 for t in list(_all_workers) if t.is_alive())


class Stage:
    """A pipeline worker: a control channel that bypasses its data queue, and a worker thread
    the supervisor can replace. ``start/join/is_alive/name`` behave like a thread's, across
    replacements. Subclasses implement ``loop()``; ``recover()`` rebuilds their state from the
    last committed point when a fresh worker takes over, and says where it resumes.

    Model calls go through ``watched(fn, ...)``: on the stage's worker they are timed for the
    stall watchdog, and a worker replaced meanwhile leaves (``Superseded``) when its call returns.
    ``urgent()`` holds the priority gate; an abandoned worker's hold is released when it is
    replaced instead of blocking recognition until its call returns."""

    def __init__(self, name: str, bus, clock, gate: PriorityGate | None = None):
        self.name = name
        self.bus = bus
        self.clock = clock
        self.gate = gate
        self.control = ControlChannel()
        self.cancelled = threading.Event()  # abort: leave at the next unit of work, drop the rest
        self.error: BaseException | None = None
        self.busy_s = 0.0
        self.supervisor = None
        self.restarts = 0
        self.generation = 0  # bumped when the current worker is abandoned
        self.in_flight = None  # the unit of work a replaced worker had taken (see retake)
        self._thread: threading.Thread | None = None  # the newest worker
        self._workers: list[threading.Thread] = []  # workers join() waits for
        self._abandoned: set[threading.Thread] = set()  # leave _workers with the next spawn/detach
        self._left_behind: list[threading.Thread] = []  # abandoned workers, until their call returns
        self._threads_lock = threading.Lock()
        self._worker = threading.local()
        self._watch_lock = threading.Lock()
        self._call_since: float | None = None  # monotonic start of the model call in progress
        # how long this stage's recent model calls took: a machine that is merely slow (a CPU hog,
        # a long sentence) makes every call slower, and the stall limit grows with them
        self._call_s: collections.deque[float] = collections.deque(maxlen=32)
        self._holds: set = set()  # open priority-gate holds (the gate's context objects)

    # -- the worker thread -------------------------------------------------------------------
    def start(self) -> None:
        self.spawn()

    def spawn(self) -> None:
        """Start a worker. It is listed before it starts: a failing worker spawns its successor,
        which can fail and spawn a third before the first call returns, and ``join`` must find
        every one of them. The worker it replaces, if abandoned, leaves the list in the same
        step: the session does not wait for a stalled call."""
        t = threading.Thread(target=self.run, name=self.name, daemon=True)
        _all_workers.add(t)
        with self._threads_lock:
            self._workers = [w for w in self._workers if _not_ended(w) and w not in self._abandoned] + [t]
            self._abandoned.clear()
            self._thread = t
        try:
            t.start()
        except BaseException:
            with self._threads_lock:
                self._workers.remove(t)
            raise

    def run(self) -> None:
        gen = self.generation
        self._worker.generation = gen
        if self._thread is None:  # run() called directly (tests): this thread is the worker
            self._thread = threading.current_thread()
        try:
            self.loop()
        except (Closed, Superseded):
            pass
        except BaseException as e:
            if gen != self.generation:
                return  # this worker was replaced: its failure is no longer the stage's
            self.error = e
            if self.supervisor is not None and self.supervisor.crashed(self, e):
                return
            # reported to the engine, which stops the session cleanly (one line; the trace at DEBUG)
            log.error("stage %s failed: %s: %s", self.name, type(e).__name__, e)
            log.debug("stage %s failure", self.name, exc_info=e)
            self.bus.fail(self.name, e)

    def _running(self) -> list[threading.Thread]:
        me = threading.current_thread()
        with self._threads_lock:
            return [t for t in self._workers if t is not me and _not_ended(t)]

    def join(self, timeout: float | None = None) -> None:
        """Wait for the stage's workers, replacements included, up to ``timeout`` in all. A
        worker is listed before it starts, so while any listed worker runs, whatever it
        spawns is listed too."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while running := self._running():
            t = running[0]
            if t.ident is None:  # being started by another thread
                time.sleep(0.001)
            else:  # in short waits: the worker may be abandoned (stalled) meanwhile
                t.join(0.05 if deadline is None else min(0.05, max(0.0, deadline - time.monotonic())))
            if deadline is not None and time.monotonic() >= deadline:
                return

    def is_alive(self) -> bool:
        return bool(self._running())

    def cancel(self) -> None:
        """Ask the workers to leave at their next unit of work (``abort``); what is queued is dropped."""
        self.cancelled.set()

    # -- model calls and the priority gate ---------------------------------------------------
    def watched(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)``, a model call: timed for the watchdog on the stage's worker
        (elsewhere, as in warm-up or on the policy thread, a plain call). A generator (speech
        synthesis) comes back wrapped so that each item it yields is a watched call."""
        gen = getattr(self._worker, "generation", None)
        if gen is None:
            return fn(*args, **kwargs)
        # a backend two stages share (the recogniser: first and second pass) serialises its calls:
        # wait for it before the watchdog's clock starts, else a first-pass step waiting out a long
        # second-pass decode on a loaded machine looks stalled (measured: sessions failed at load 6
        # on 2 cores). Waited for at most LOCK_WAIT_S: a call that never returns is still caught
        lock = getattr(getattr(fn, "__self__", None), "call_lock", None)
        held = lock is not None and lock.acquire(timeout=LOCK_WAIT_S)
        try:
            return self._watched_call(gen, fn, *args, **kwargs)
        finally:
            if held:
                lock.release()

    def _watched_call(self, gen, fn, *args, **kwargs):
        with self._watch_lock:
            if gen != self.generation:
                raise Superseded(self.name)
            self._call_since = time.monotonic()
        try:
            out = fn(*args, **kwargs)
        finally:
            with self._watch_lock:
                superseded = gen != self.generation
                if not superseded:
                    if self._call_since is not None:
                        self._call_s.append(time.monotonic() - self._call_since)
                    self._call_since = None
        if superseded:
            raise Superseded(self.name)
        if hasattr(out, "__next__"):
            return self._watched_iter(out)
        return out

    def _watched_iter(self, it):
        while True:
            try:
                item = self.watched(next, it)
            except StopIteration:
                return
            yield item

    @contextlib.contextmanager
    def urgent(self):
        """Hold the priority gate (nothing without one) while latency-critical work runs."""
        if self.gate is None:
            yield
            return
        hold = self.gate.urgent()
        hold.__enter__()
        with self._watch_lock:
            self._holds.add(hold)
        try:
            yield
        finally:
            self._release(hold)

    def _release(self, hold) -> None:
        with self._watch_lock:
            if hold not in self._holds:
                return  # released already, when this worker was abandoned
            self._holds.discard(hold)
        hold.__exit__(None, None, None)

    # -- supervision hooks -------------------------------------------------------------------
    def stall_limit(self, base: float, factor: float) -> float:
        """How long a model call may run before it counts as a stall: ``base``, or ``factor``
        times the slowest of the stage's recent calls when that is longer (an overloaded machine
        is slow, not stuck: restarting there only adds a second decode beside the first), and
        twice that for each abandoned worker of this stage still inside its call (it competes
        for the same cores)."""
        with self._watch_lock:
            slowest = max(self._call_s, default=0.0)
        with self._threads_lock:
            self._left_behind = [t for t in self._left_behind if t.is_alive()]
            stuck = len(self._left_behind)
        return max(base, factor * slowest) * (2 ** stuck)

    def stalled(self, now: float, limit: float) -> bool:
        with self._watch_lock:
            return self._call_since is not None and now - self._call_since >= limit

    def abandon_worker(self) -> None:
        """The current worker no longer owns the stage: it leaves when its call returns."""
        with self._watch_lock:
            self.generation += 1
            self._call_since = None
            holds = list(self._holds)
        with self._threads_lock:  # a stalled worker, left behind by the watchdog; a failing
            # worker abandons itself and stays listed until it has published its restart
            if self._thread is not None and self._thread is not threading.current_thread():
                self._abandoned.add(self._thread)
                self._left_behind.append(self._thread)
        for h in holds:
            self._release(h)

    def detach_worker(self) -> None:
        """No worker will follow the abandoned one (the session is failing): stop waiting for it."""
        with self._threads_lock:
            self._workers = [t for t in self._workers if t not in self._abandoned]
            self._abandoned.clear()
            self._thread = None

    def retake(self):
        """The unit of work a replaced worker had taken, once; None otherwise."""
        item, self.in_flight = self.in_flight, None
        return item

    def recover(self) -> str:
        """Rebuild state for a fresh worker; returns where it resumes (for the log and event)."""
        return "its input queue"

    def loop(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def metric(self, name: str, value: float, **labels) -> None:
        self.bus.publish(Metric(name, float(value), self.clock.now(), tuple(labels.items())))


def _not_ended(t: threading.Thread) -> bool:
    """Listed but not started yet, or running."""
    return t.ident is None or t.is_alive()
