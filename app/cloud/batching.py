"""Micro-batched translation shared by every session of a server, with per-direction quotas.

Each session's MT stage sees an ordinary ``MTBackend`` (``SessionTranslator``); its calls become
requests in one ``MicroBatcher``. A worker takes the oldest request and everything else queued
for the same direction and beam size (one ``translate_batch`` call), after waiting at most
``window_s`` for more to arrive -- and not at all when every session of that direction already
has its request queued (each MT stage has at most one request outstanding, so none can come).

Quotas: a direction with live sessions reserves ``reserve`` workers, and no direction may hold a
worker reserved for another one: ``limit(d) = workers - sum(reserve of the other live
directions)`` (at least 1). Among the directions under their limit the one whose oldest request
is oldest goes first, so a rare direction waits for at most one batch per other direction,
never behind another direction's backlog.
"""

from __future__ import annotations

import collections
import logging
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Sequence

log = logging.getLogger("relay.cloud.batching")

class Item(NamedTuple):
    source: str
    prefix: str  # the target prefix to force
    beam: int
    memory: object = None  # the session's translator view (app/cloud/views.mt_view): its recent outputs


BatchFn = Callable[[Sequence[Item]], list[str]]


@dataclass
class _Request:
    direction: str
    item: Item
    t: float
    done: threading.Event = field(default_factory=threading.Event)
    result: str | None = None
    error: BaseException | None = None


@dataclass
class DirectionStats:
    requests: int = 0
    batches: int = 0
    max_batch: int = 0
    max_in_flight: int = 0
    wait_s: list[float] = field(default_factory=list)


class MicroBatcher:
    def __init__(self, workers: int = 2, window_s: float = 0.01, max_batch: int = 8, reserve: int = 1,
                 batching: bool = True, clock: Callable[[], float] = time.monotonic):
        if workers < 1 or max_batch < 1:
            raise ValueError("workers and max_batch must be at least 1")
        self.workers, self.window_s, self.max_batch, self.reserve = workers, window_s, max_batch, reserve
        self.batching = batching
        self.clock = clock
        self._engines: dict[str, BatchFn] = {}
        self._queues: dict[tuple[str, int], collections.deque[_Request]] = {}
        self._in_flight: collections.Counter[str] = collections.Counter()
        self._sessions: collections.Counter[str] = collections.Counter()
        self.stats: dict[str, DirectionStats] = collections.defaultdict(DirectionStats)
        self._cond = threading.Condition()
        self._closed = False
        self._threads = [threading.Thread(target=self._work, name=f"mt-batch-{i}", daemon=True)
                         for i in range(workers)]
        for t in self._threads:
            t.start()

    # -- registration ------------------------------------------------------------------------
    def add_direction(self, direction: str, engine: BatchFn) -> None:
        with self._cond:
            self._engines[direction] = engine

    def has_direction(self, direction: str) -> bool:
        return direction in self._engines

    def open_session(self, direction: str) -> None:
        with self._cond:
            self._sessions[direction] += 1
            self._cond.notify_all()

    def close_session(self, direction: str) -> None:
        with self._cond:
            self._sessions[direction] -= 1
            if self._sessions[direction] <= 0:
                del self._sessions[direction]
            self._cond.notify_all()

    def limit(self, direction: str) -> int:
        others = sum(self.reserve for d in self._sessions if d != direction)
        return max(1, self.workers - others)

    # -- requests ----------------------------------------------------------------------------
    def submit(self, direction: str, source: str, target_prefix: str, beam_size: int, memory=None) -> str:
        req = _Request(direction, Item(source, target_prefix, beam_size, memory), self.clock())
        with self._cond:
            if self._closed:
                raise RuntimeError("translation service stopped")
            if direction not in self._engines:
                raise KeyError(f"no translator for {direction}")
            self._queues.setdefault((direction, beam_size), collections.deque()).append(req)
            self._cond.notify_all()
        req.done.wait()
        if req.error is not None:
            raise req.error
        return req.result

    def _pick(self, now: float) -> tuple[tuple[str, int] | None, float | None]:
        best, best_t, wake = None, None, None
        for key, q in self._queues.items():
            if not q or self._in_flight[key[0]] >= self.limit(key[0]):
                continue
            head = q[0].t
            ready = (not self.batching or len(q) >= self.max_batch
                     or len(q) >= self._sessions.get(key[0], 0)  # nobody else can add to it
                     or now - head >= self.window_s)
            if ready:
                if best_t is None or head < best_t:
                    best, best_t = key, head
            else:
                w = head + self.window_s - now
                wake = w if wake is None else min(wake, w)
        return best, wake

    def _work(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return
                    key, wake = self._pick(self.clock())
                    if key is not None:
                        break
                    self._cond.wait(timeout=wake)
                q = self._queues[key]
                n = self.max_batch if self.batching else 1
                batch = [q.popleft() for _ in range(min(n, len(q)))]
                d = key[0]
                self._in_flight[d] += 1
                st = self.stats[d]
                st.requests += len(batch)
                st.batches += 1
                st.max_batch = max(st.max_batch, len(batch))
                st.max_in_flight = max(st.max_in_flight, self._in_flight[d])
                now = self.clock()
                st.wait_s.extend(now - r.t for r in batch)
                del st.wait_s[:-1000]
                engine = self._engines[d]
            try:
                results = engine([r.item for r in batch])
                for r, out in zip(batch, results, strict=True):
                    r.result = out
            except BaseException as e:  # delivered to every caller of the batch
                log.warning("translation batch for %s failed: %s", d, type(e).__name__)
                for r in batch:
                    r.error = e
            finally:
                with self._cond:
                    self._in_flight[d] -= 1
                    self._cond.notify_all()
                for r in batch:
                    r.done.set()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            pending = [r for q in self._queues.values() for r in q]
            self._queues.clear()
            self._cond.notify_all()
        for r in pending:
            r.error = RuntimeError("translation service stopped")
            r.done.set()


class SessionTranslator:
    """The MTBackend one session's pipeline sees: every call goes through the shared batcher.
    ``like`` is the session's view of the shared translator (its memory of recent outputs)."""

    def __init__(self, batcher: MicroBatcher, direction: str, like):
        self.batcher, self.direction, self.memory = batcher, direction, like
        self.name = getattr(like, "name", direction)
        self.source_lang = getattr(like, "source_lang", direction.split("-")[0])
        self.target_lang = getattr(like, "target_lang", direction.split("-")[-1])
        self.beam_size = getattr(like, "beam_size", 4)
        if hasattr(like, "translate_with_draft"):
            # speculative calls verify one session's own draft: no batching to gain, so they go
            # straight to the shared model and give exactly what the local pipeline would
            self.translate_with_draft = like.translate_with_draft

    def translate(self, source: str, target_prefix: str = "", beam_size: int | None = None) -> str:
        return self.batcher.submit(self.direction, source, target_prefix, beam_size or self.beam_size, self.memory)


def batch_engine(mt) -> BatchFn:
    """A batch function for a loaded MT backend. One item goes through its session's view's own
    ``translate`` (so a lone session gets exactly what the local pipeline would); several go
    through one CTranslate2 ``translate_batch`` with the same decoding options, prefix handling
    and target-token memory (each item's own session's) as ``CT2Translator.translate``."""
    ct2_parts = all(hasattr(mt, a) for a in ("_tr", "_sp_src", "_prefix_tokens", "_detok", "_remember", "_lock"))

    def run(items: Sequence[Item]) -> list[str]:
        if len(items) == 1 or not ct2_parts:
            return [_own(it, mt).translate(it.source, target_prefix=it.prefix, beam_size=it.beam)
                    for it in items]
        return _ct2_batch(mt, items)

    return run


def _ct2_batch(mt, items: Sequence[Item]) -> list[str]:
    out: list[str | None] = [None] * len(items)
    idx, srcs, prefixes = [], [], []
    with mt._lock:  # the views share the translator's lock
        for i, it in enumerate(items):
            s, p = it.source.strip(), it.prefix
            if not s:
                out[i] = p
                continue
            idx.append(i)
            srcs.append(mt._sp_src.encode(s, out_type=str))
            prefixes.append(_own(it, mt)._prefix_tokens(p) if p.strip() else None)
        if srcs:
            res = mt._tr.translate_batch(srcs, target_prefix=prefixes if any(prefixes) else None,
                                         beam_size=items[0].beam, max_decoding_length=_opt(mt, "MAX_DECODING_LENGTH", 256),
                                         repetition_penalty=_opt(mt, "REPETITION_PENALTY", 1.1))
            for i, pre, r in zip(idx, prefixes, res):
                toks = r.hypotheses[0]
                text = mt._detok(toks)
                _own(items[i], mt)._remember(text, toks)
                p = items[i].prefix
                forced = mt._detok(pre or [])
                if p and text.startswith(forced):  # keep the exact committed prefix string
                    text = p.strip() + text[len(forced):]
                out[i] = text
    return out  # type: ignore[return-value]


def _own(item: Item, mt):
    """The translator object whose memory this item uses: its session's view, else the shared one."""
    return mt if item.memory is None else item.memory


def _opt(mt, name: str, default):
    """A decoding constant of the backend's module, so batched and single calls decode alike."""
    return getattr(sys.modules.get(type(mt).__module__), name, default)
