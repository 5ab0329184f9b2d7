"""What every session of a `relay serve` shares: the loaded models per pair (``ModelPool``) and
the thread pools for blocking work (``Executors``)."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import queue
import threading
from concurrent.futures import Executor, Future

from app.cloud.batching import MicroBatcher, SessionTranslator, batch_engine
from app.cloud.limits import ServerLimits
from app.cloud.views import asr_view, mt_view, vad_view
from app.core import memory
from app.core.errors import UserError
from app.session.models import LoadedModels, load_models
from app.session.options import SessionOptions

log = logging.getLogger("relay.cloud.server")


def collect_garbage() -> None:
    """Collect closed sessions' pipelines (reference cycles: a ring buffer waits for the cyclic
    collector) and hand the freed memory back to the system. Cheap once ``gc.freeze()`` has
    put the models' objects out of the collector's sight (cmd_serve does, after loading)."""
    gc.collect()
    memory.trim()


class DaemonPool(Executor):
    """A fixed set of daemon worker threads, all started at once. Unlike ThreadPoolExecutor's,
    they are not joined at interpreter exit: a shutdown never waits for a model call that a
    pipeline's teardown or ``finish`` is stuck behind."""

    def __init__(self, workers: int, name: str):
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = False
        self.threads = [threading.Thread(target=self._work, name=f"{name}_{i}", daemon=True) for i in range(workers)]
        for t in self.threads:
            t.start()

    def submit(self, fn, /, *args, **kwargs) -> Future:
        if self._closed:
            raise RuntimeError("cannot schedule new futures after shutdown")
        f: Future = Future()
        self._q.put((f, fn, args, kwargs))
        return f

    def _work(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            f, fn, args, kwargs = item
            if f.set_running_or_notify_cancel():
                try:
                    f.set_result(fn(*args, **kwargs))
                except BaseException as e:  # delivered to the caller, like ThreadPoolExecutor
                    f.set_exception(e)
            # an idle worker must not keep its last task's arguments (a closed session's pipeline) alive
            del item, f, fn, args, kwargs

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._closed = True
        while cancel_futures:
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].cancel()
        for _ in self.threads:
            self._q.put(None)
        if wait:
            for t in self.threads:
                t.join()


class Executors:
    """Separate bounded pools, so that one kind of blocking work never waits behind another:
    loading a pair's models (minutes) cannot hold up a session's start, a burst of teardowns
    cannot hold up a ``finish``, and zlib never runs on the event loop. Every thread is started
    up front: the server's thread count does not creep up with load."""

    def __init__(self, limits: ServerLimits):
        sizes = {"load": 1, "build": 2, "finish": max(2, min(8, limits.max_sessions)), "teardown": 4, "decode": 2}
        self.pools = {k: DaemonPool(n, f"relay-{k}") for k, n in sizes.items()}
        self.load, self.build, self.finish = self.pools["load"], self.pools["build"], self.pools["finish"]
        self.teardown, self.decode = self.pools["teardown"], self.pools["decode"]

    def shutdown(self) -> None:
        for pool in self.pools.values():
            pool.shutdown(wait=False, cancel_futures=True)


class ModelPool:
    """LoadedModels per pair, loaded once, shared by every session of that pair. The pairs
    loaded at start are served; with ``lazy`` another installed pair loads on its first use
    (one load at a time, on the load pool)."""

    def __init__(self, batcher: MicroBatcher, lazy: bool = False, final_mt: str = "auto"):
        self.batcher, self.lazy, self.final_mt = batcher, lazy, final_mt
        self._models: dict[str, LoadedModels] = {}
        self._loading: dict[str, asyncio.Future] = {}
        self._lock = threading.Lock()

    @property
    def served(self) -> list[str]:
        return sorted(self._models)

    def load(self, pair: str) -> LoadedModels:
        """Blocking: load a pair's models (at start, or on the load pool)."""
        with self._lock:
            m = self._models.get(pair)
        if m is not None:
            return m
        # the finals' translator (an LLM pack, shared by the pair's sessions one call at a time)
        m = load_models(SessionOptions(pair=pair, final_mt=self.final_mt), lambda msg: log.info("%s", msg))
        with self._lock:
            if pair not in self._models:
                self._models[pair] = m
                self.batcher.add_direction(pair, batch_engine(m.mt))
            return self._models[pair]

    async def models_for(self, pair: str, executor) -> LoadedModels:
        m = self._models.get(pair)
        if m is not None:
            return m
        if not self.lazy:
            raise UserError(f"pair {pair} is not served here (served: {', '.join(self.served) or 'none'})")
        fut = self._loading.get(pair)
        if fut is None:
            fut = asyncio.ensure_future(asyncio.get_running_loop().run_in_executor(executor, self.load, pair))
            self._loading[pair] = fut
            fut.add_done_callback(lambda f: (self._loading.pop(pair, None), f.cancelled() or f.exception()))
        return await asyncio.shield(fut)  # a client that leaves does not cancel the load for others

    def session_models(self, m: LoadedModels, pair: str, no_tts: bool) -> LoadedModels:
        """Per-session views over the shared weights (streaming state and MT memory of its own)."""
        mt = SessionTranslator(self.batcher, pair, mt_view(m.mt))
        return dataclasses.replace(m, asr=asr_view(m.asr, m.plan.src != "xx"), vad=vad_view(m.vad), mt=mt,
                                   tts=None if no_tts else m.tts)
