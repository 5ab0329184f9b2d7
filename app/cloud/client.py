"""The cloud client: stream audio to `relay serve`, show its results, fall back to the local
pipeline the moment the link fails, and return when it is back. Qt-free.

A RunningSession (app.pipeline.protocols), driven by app.session.runner like the local engine::

    c = CloudClient(url, token, ca=None, opts=SessionOptions(...), models=LoadedModels or None,
                    fallback=True, heartbeat_timeout=0.2, auto_return=False,
                    on_status=fn(str), on_link=fn(bool))
    c.bus.subscribe(fn)        # pipeline events (app.pipeline.messages), in order, cloud and
                               # local merged on one timeline: the same events a local pipeline sends
    c.start()                  # opens the session; without a server it starts local (or raises
                               # UserError when fallback=False)
    c.push_audio(samples)      # 16 kHz mono float32 blocks from a capture callback or feeder
    c.finish()                 # end of input: waits for the last results (UserError without fallback)
    c.abort()                  # closes the connection and the local pipeline (also after finish)
    c.status                   # "cloud" | "local" | "cloud-lost"
    c.rtt_ms                   # latest cloud round-trip time (None before the first)
    c.cloud_available          # True while on local and the server is reachable again
    c.return_to_cloud()        # switch back at the next segment boundary (auto with auto_return)
    c.metrics()                # dict: status, rtt, switches with their times, …
    check_server(url, token, ca=None)   # raises with a one-line reason when the server is not usable

``on_status`` gets "cloud", "cloud-lost" (the instant the link is found dead), "local",
"cloud-available"; ``on_link(healthy)`` is the degradation policy's hook. Both run on the
client's network thread: keep them short (the GUI re-emits them as Qt signals).

Fallback: the server acknowledges, in every heartbeat, the sample up to which it has answered
everything (docs/PROTOCOL.md). When no message arrives for ``heartbeat_timeout`` or the
connection drops, the warm local pipeline is fed from the later of that point and the end of
the last translation received, so no speech is lost and no committed segment repeats.

Finals (the second pass, protocol feature "final"): republished in the server's order with ids
that keep growing across switches; the client's ``record`` keeps them as its summary segments.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from typing import Callable

from websockets.exceptions import ConnectionClosed

from app.cloud import protocol as P
from app.cloud.ack import AnswerTracker
from app.cloud.delivery import CloudDelivery
from app.cloud.failover import Failover
from app.cloud.link import open_ws, reason, ssl_context, validate_url
from app.core.audio import SR
from app.core.errors import UserError
from app.pipeline.engine import EventBus, PipelineError, SessionRecord
from app.pipeline.latency import ArrivalClock, LatencyTracker, percentiles
from app.pipeline.messages import Metric
from app.pipeline.queues import MonotonicClock
from app.pipeline.ringbuffer import AudioRing
from app.session.build import shown_text, text_languages

log = logging.getLogger("relay.cloud.client")
FAST_AHEAD_S = 20.0  # fast mode: at most this much unanswered audio in flight
OUTBOX_MAX_S = 30.0  # audio sent and not answered; past it the link counts as lost (local fallback)
RING_S = 120.0


class CloudClient(CloudDelivery, Failover):
    kind = "cloud"

    def __init__(self, url: str, token: str, ca: str | None = None, *, opts, models=None,
                 fallback: bool = True, heartbeat_timeout: float = 0.2, auto_return: bool = False,
                 on_status: Callable[[str], None] | None = None, on_link: Callable[[bool], None] | None = None,
                 compress: bool = False, clock=None):
        problem = validate_url(url)
        if problem:
            raise UserError(f"{url}: {problem}")
        if not token:
            raise UserError("--cloud needs an access token: --token T (or $RELAY_TOKEN)")
        if fallback and models is None:
            raise ValueError("the local fallback needs loaded models")
        self.url, self.token, self.opts, self.models = url, token, opts, models
        self.ctx = ssl_context(url, ca)
        self.fallback, self.heartbeat_timeout, self.auto_return = fallback, heartbeat_timeout, auto_return
        self.loop_stalls = 0  # watchdog checks put off because this client's own loop was held up
        self.on_status, self.on_link, self.compress = on_status, on_link, compress
        self.clock = clock or MonotonicClock()
        self.bus = EventBus()
        # the profanity setting: the server applies it (feature "profanity"); from a server that
        # predates it the client filters the text itself (``bus.transform``) and mutes dub
        # audio whose text it had to change. A local pipeline filters its own events.
        self._shown = shown_text(getattr(opts, "profanity", "raw"), *text_languages(models, opts.pair))
        self._client_shown = None  # the filter the client applies itself (the server did not)
        self.arrival = ArrivalClock()
        self.tracker = LatencyTracker(self.arrival)
        # summary segments are the finals when the session makes them (app.pipeline.engine);
        # set again by each welcome (a server may not grant finals) and each local start
        self._wants_finals = bool(getattr(opts, "final_pass", False)) and not getattr(opts, "serial", False)
        self.record = SessionRecord(finals=self._wants_finals)
        self.bus.subscribe(self.tracker)
        self.bus.subscribe(self.record)
        self.ring = AudioRing(int(RING_S * SR))
        self.first_audio_at: float | None = None
        self.started_at = self.finished_at = 0.0
        self.status = "connecting"
        self.cloud_available = False
        self.rtts: list[float] = []
        self.switches: list[dict] = []
        self.returns: list[dict] = []
        self.error: str | None = None
        self._lock = threading.RLock()  # mode, feeding and delivery
        self._mode = "none"  # cloud | local | failed
        self._ws = None
        self._tasks: list[asyncio.Task] = []
        self._out: asyncio.Queue | None = None
        self._probe = None
        self._finishing = False
        self._done = threading.Event()
        self._changed = threading.Condition(self._lock)
        self._seq_base = 0
        self._max_seq = -1
        # finals get client ids 0, 1, 2 ... in delivery order, across every switch; each producer
        # (a cloud session, a local pipeline) numbers its own from 0: its id → the client's
        self._max_final = -1
        self._cloud_final_ids: dict[int, int] = {}
        self._final_end = 0.0  # source time up to which a delivered final has answered the audio
        self._cloud_finals = False  # this cloud session sends finals (feature "final" granted)
        self._open_pieces: dict[int, dict] = {}  # shown pieces no final has covered yet (finals on)
        self._dub_end = 0.0
        self._words_end = 0.0
        self._local = None
        self._local_answers: AnswerTracker | None = None
        self._local_base = 0
        self._local_seq_base = 0
        self._local_final_ids: dict[int, int] = {}
        self._reset_stream(0)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="relay-cloud", daemon=True)
        self._thread.start()

    # -- public ------------------------------------------------------------------------------
    @property
    def rtt_ms(self) -> float | None:
        return round(self.rtts[-1] * 1000, 1) if self.rtts else None

    def start(self, timeout: float = 60.0) -> None:
        self.started_at = self.clock.now()
        fut = asyncio.run_coroutine_threadsafe(self._open_session(0, None, timeout), self._loop)
        try:
            fut.result(timeout + 5)
        except Exception as e:
            why = e.args[0] if isinstance(e, UserError) else reason(e)
            if not self.fallback:
                raise UserError(f"cannot use the Relay server at {self.url}: {why}") from None
            log.warning("cloud unavailable (%s): running locally", why)
            self.error = why
            with self._lock:
                self._go_local(f"no cloud: {why}", self.clock.now(), self.clock.now())
            self._loop.call_soon_threadsafe(self._start_reconnect)

    def push_audio(self, samples, wait_if_full: bool = False, at: float | None = None) -> None:
        """``at``: when the block's last sample was captured, on this client's clock (live capture)."""
        if wait_if_full:  # fast mode: keep the unanswered audio in flight bounded
            with self._changed:
                while (self._mode == "cloud" and self.ring.written - self._refeed_point() > FAST_AHEAD_S * SR):
                    self._changed.wait(0.05)
        with self._lock:
            now = self.clock.now() if at is None else min(at, self.clock.now())
            if self.first_audio_at is None:
                self.first_audio_at = now
            start = self.ring.written
            self.ring.write(samples)
            self.arrival.record(self.ring.written, now)
            if self._mode == "cloud":
                self._queue_frame(start, samples)
            elif self._mode == "local":
                self._local.push_audio(samples, wait_if_full=wait_if_full, at=at)

    def failed(self) -> bool:
        return self._mode == "failed" or (self._local is not None and self._local.failed())

    def return_to_cloud(self) -> None:
        self._loop.call_soon_threadsafe(lambda: self._loop.create_task(self._try_return()))

    def finish(self, timeout: float = 600.0) -> None:
        """End of input: the cloud session (or the local pipeline) finishes and sends the rest."""

        end = time.monotonic() + timeout
        with self._changed:
            self._finishing = True
            while True:
                if self._mode == "cloud":
                    if self._out is not None:
                        self._loop.call_soon_threadsafe(self._out.put_nowait, P.encode_json({"type": "end"}))
                    mode = "cloud"
                    while self._mode == "cloud" and not self._done.is_set() and time.monotonic() < end:
                        self._changed.wait(0.05)
                    if self._mode == "cloud" and not self._done.is_set():
                        raise PipelineError("the cloud session did not finish in time")
                    if self._mode == mode:
                        break
                    continue  # the link died while finishing: the local pipeline finishes
                if self._mode == "local":
                    pipe = self._local
                    break
                if self._mode == "failed":
                    raise UserError(f"cloud session failed ({self.error}) and --no-fallback is set")
                break
        if self._mode == "local":
            pipe.finish(max(1.0, end - time.monotonic()))
        self.finished_at = self.clock.now()

    def abort(self) -> None:
        """Close the connection, the network thread and the local pipeline; idempotent."""
        if self._local is not None:
            self._local.abort()
        if not self._thread.is_alive():
            return

        async def shut():
            for t in self._tasks:
                t.cancel()
            for ws in (self._ws, self._probe):
                if ws is not None:
                    ws.transport.abort()

        try:
            asyncio.run_coroutine_threadsafe(shut(), self._loop).result(2)
        except Exception:
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(2)

    def stage_stats(self) -> dict:
        out = {"cloud": self.metrics()}
        if self._local is not None:
            out["local"] = self._local.stage_stats()
        return out

    def metrics(self) -> dict:
        return {"status": self.status, "url": self.url, "rtt_ms": percentiles(self.rtts),
                "switches": list(self.switches), "returns": list(self.returns), "error": self.error,
                "loop_stalls": self.loop_stalls}

    # -- status --------------------------------------------------------------------------------
    def _set_status(self, s: str) -> None:
        self.status = s
        self.bus.publish(Metric("cloud_status", {"cloud": 1.0, "local": 0.0}.get(s, -1.0), self.clock.now(),
                                (("status", s),)))
        if self.on_status:
            try:
                self.on_status(s)
            except Exception:
                log.exception("on_status failed")

    def _link(self, healthy: bool) -> None:
        if self.on_link:
            try:
                self.on_link(healthy)
            except Exception:
                log.exception("on_link failed")

    # -- cloud session (network thread) ------------------------------------------------------
    def _reset_stream(self, start: int) -> None:
        self._next_n = 1
        self._reorder: dict[int, tuple] = {}
        self._held: dict[int, object] = {}
        self._server_acked = start
        self._answered = start
        self._frame_seq = 0
        self._last_rx = self.clock.now()
        self._gap_since: float | None = None
        self._done.clear()

    def _refeed_point(self) -> int:
        return max(self._server_acked, self._answered)

    async def _open_session(self, start: int, ws, timeout: float) -> None:
        if ws is None:
            ws = await open_ws(self.url, self.token, self.ctx, min(timeout, 10.0))
        o = self.opts
        options = {"no_tts": o.no_tts, "beam": o.beam, "asr_step": o.asr_step,
                   "commit_lookahead": o.commit_lookahead,
                   "first_commit_lookahead": o.first_commit_lookahead, "asr_context": o.asr_context,
                   "confident_commit": o.confident_commit, "confident_lookahead": o.confident_lookahead,
                   "preview": o.preview,
                   "eager": o.eager, "speculative": o.speculative, "policy": o.policy, "realtime": o.realtime}
        await ws.send(P.encode_json({"type": "hello", "v": P.VERSION, "pair": o.pair,
                                     "codec": "pcm16-zlib" if self.compress else "pcm16",
                                     "start_sample": start, "options": options,
                                     "profanity": getattr(o, "profanity", "raw"),
                                     "features": (["final"] if self._wants_finals else []) + ["profanity"]}))
        first = json.loads(await asyncio.wait_for(ws.recv(), timeout))
        if first.get("type") != "welcome":
            ws.transport.abort()
            raise UserError(f"the server refused the session: {first.get('message', first.get('type'))}")
        granted = P.granted_features(first)
        finals = self._wants_finals and "final" in granted
        if self._wants_finals and not finals:
            log.warning("the server does not make final sentences (it predates them): first pass only")
        self._client_shown = None if "profanity" in granted else self._shown
        if self._client_shown is not None:
            log.warning("the server predates the profanity setting: the client filters what it shows")
        self.bus.transform = self._client_shown
        self._begin_cloud(ws, start, finals)

    def _begin_cloud(self, ws, start: int, finals: bool = False) -> None:
        with self._lock:
            self._ws = ws
            self._reset_stream(start)
            self._seq_base = self._max_seq + 1
            self._cloud_final_ids = {}
            self._cloud_finals = finals
            if self._max_final < 0 and not self._open_pieces:  # the session's first producer decides
                self.record.final_mode = finals
            self._out = asyncio.Queue()
            self._mode = "cloud"
            if self.ring.written > start:  # audio from the hand-over point on
                self._queue_frame(start, self.ring.read(max(start, self.ring.written - self.ring.capacity),
                                                        self.ring.written).copy())
            self._tasks = [self._loop.create_task(f(ws)) for f in (self._reader, self._sender, self._heartbeat, self._watchdog)]
            self._changed.notify_all()
        self._set_status("cloud")
        self._link(True)

    def _queue_frame(self, start: int, samples) -> None:
        block = P.MAX_FRAME_SAMPLES // 2
        for off in range(0, len(samples), block):
            data = P.encode_audio(self._frame_seq, start + off, samples[off:off + block], self.compress)
            self._frame_seq += 1
            self._loop.call_soon_threadsafe(self._out.put_nowait, data)
        if self.ring.written - self._refeed_point() > OUTBOX_MAX_S * SR:  # fast mode waits at FAST_AHEAD_S
            self._loop.call_soon_threadsafe(self._lost, "the server has not answered 30 s of audio", self._ws)

    async def _sender(self, ws) -> None:
        while True:
            await ws.send(await self._out.get())

    async def _heartbeat(self, ws) -> None:
        while True:
            self._out.put_nowait(P.encode_json({"type": "hb", "t": round(self.clock.now(), 4)}))
            await asyncio.sleep(P.HEARTBEAT_S)

    async def _watchdog(self, ws) -> None:
        graced = False
        while True:
            before = self.clock.now()
            await asyncio.sleep(0.01)
            if not graced and self.clock.now() - before > 0.01 + self.heartbeat_timeout / 4:
                # this loop itself was held up (a busy process, the GIL): what the server sent
                # meanwhile is waiting unread in the socket. Judge the silence once the reader
                # has had its turn (one check later), not on a stale last-received time
                self.loop_stalls += 1
                graced = True
                continue
            graced = False
            if self.clock.now() - self._last_rx > self.heartbeat_timeout:
                self._lost(f"no heartbeat for {self.heartbeat_timeout * 1000:.0f} ms", ws)
                return
            if self._gap_lost():
                return

    async def _reader(self, ws) -> None:
        try:
            async for msg in ws:
                if ws is not self._ws:
                    return
                self._last_rx = now = self.clock.now()
                if isinstance(msg, bytes):
                    n, ts, header, audio = P.decode_dub(msg)
                    self._insert(n, ("dub", header, audio))
                    continue
                obj = json.loads(msg)
                t = obj.get("type")
                if t == "hb":
                    with self._changed:
                        self._server_acked = max(self._server_acked, int(obj["acked"]))
                        self._changed.notify_all()
                elif t == "pong":
                    self.rtts.append(max(0.0, now - float(obj["t"])))
                    del self.rtts[:-2000]
                elif t == "ev":
                    self._insert(int(obj["n"]), ("ev", obj["ev"], None))
                elif t == "error":
                    log.warning("server: %s (%s)", obj.get("message"), obj.get("code"))
                    if obj.get("fatal"):
                        self.error = f"server: {obj.get('message')}"
                elif t == "done":
                    with self._changed:
                        self._done.set()
                        self._changed.notify_all()
                    return
        except ConnectionClosed:
            pass
        except Exception as e:
            log.warning("bad message from the server: %s", type(e).__name__)
        if not self._done.is_set():
            self._lost(self.error or "connection closed", ws)

    def _lost(self, reason: str, ws) -> None:
        detected = self.clock.now()
        with self._changed:
            if self._mode != "cloud" or ws is not self._ws:
                return
            silent_since = self._last_rx
            self._ws = None
            for t in self._tasks:
                if t is not asyncio.current_task():
                    t.cancel()
            ws.transport.abort()
            self.error = reason
            self._mode = "lost"
        self._set_status("cloud-lost")
        self._link(False)
        with self._changed:
            if not self.fallback:
                self._mode = "failed"
                self._changed.notify_all()
                return
            self._go_local(reason, silent_since, detected)
            self._changed.notify_all()
        self._start_reconnect()

