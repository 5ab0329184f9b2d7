"""The cloud client: stream audio to `relay serve`, show its results, fall back to the local
pipeline the moment the link fails, and return when it is back. Qt-free.

API (what `relay run --cloud` and the desktop window use)::

    c = CloudClient(url, token, ca=None, opts=SessionOptions(...), models=LoadedModels or None,
                    fallback=True, heartbeat_timeout=0.2, auto_return=False,
                    on_status=fn(str), on_link=fn(bool))
    c.bus.subscribe(fn)        # pipeline events (app.pipeline.messages), in order, cloud and
                               # local merged on one timeline: the same events a local pipeline sends
    c.connect()                # opens the session; without a server it starts local (or raises
                               # UserError when fallback=False)
    c.send_audio(samples)      # 16 kHz mono float32 blocks from a capture callback or feeder
    c.finish()                 # end of input: waits for the last results (UserError without fallback)
    c.close()
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
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import ssl
import sys
import threading
import time
from types import SimpleNamespace
from typing import Callable
from urllib.parse import urlparse

from app.cloud import protocol as P
from app.cloud.ack import AnswerTracker
from app.cloud.views import fresh_models
from app.core.errors import UserError

log = logging.getLogger("relay.cloud.client")
SR = P.SR
FAST_AHEAD_S = 20.0  # fast mode: at most this much unanswered audio in flight
RETURN_NEAR_S = 2.0  # return to the cloud only when the local pipeline is this close to live
RING_S = 120.0


def validate_url(url: str) -> str | None:
    u = urlparse(url)
    if u.scheme not in ("wss", "ws") or not u.hostname:
        return "write it as wss://HOST:PORT"
    if u.scheme == "ws" and u.hostname not in ("127.0.0.1", "localhost", "::1"):
        return "plain ws:// is allowed on loopback only; use wss://"
    try:
        u.port
    except ValueError:
        return "the port is not a number"
    return None


def _ssl_context(url: str, ca: str | None) -> ssl.SSLContext | None:
    if not url.startswith("wss://"):
        return None
    if ca and not os.path.isfile(ca):
        raise UserError(f"{ca}: no such certificate file")
    try:
        ctx = ssl.create_default_context(cafile=ca)
    except ssl.SSLError:
        raise UserError(f"{ca}: not a PEM certificate") from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    return ctx


def _reason(e: BaseException) -> str:
    from websockets.exceptions import InvalidStatus

    if isinstance(e, InvalidStatus):
        code = e.response.status_code
        return "the server refused the access token" if code == 401 else f"the server answered HTTP {code}"
    if isinstance(e, ssl.SSLCertVerificationError):
        return f"the server's certificate is not trusted ({e.verify_message}); pass it with --ca"
    if isinstance(e, (asyncio.TimeoutError, TimeoutError)):
        return "timed out"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror.lower()
    return str(e).splitlines()[0] if str(e) else type(e).__name__


async def _open_ws(url: str, token: str, ctx, timeout: float):
    from websockets.asyncio.client import connect

    return await connect(url, ssl=ctx, additional_headers={"Authorization": f"Bearer {token}"},
                         subprotocols=[P.SUBPROTOCOL], compression=None, open_timeout=timeout,
                         ping_interval=None, max_size=P.MAX_MESSAGE_BYTES, proxy=None,
                         close_timeout=0.5, logger=logging.getLogger("relay.cloud.ws"))


def check_server(url: str, token: str, ca: str | None = None, timeout: float = 3.0) -> None:
    """Open and close a connection: raises UserError with the reason when it fails."""
    problem = validate_url(url)
    if problem:
        raise UserError(f"{url}: {problem}")
    ctx = _ssl_context(url, ca)

    async def probe():
        ws = await _open_ws(url, token, ctx, timeout)
        await ws.close()

    try:
        asyncio.run(probe())
    except UserError:
        raise
    except Exception as e:
        raise UserError(f"cannot use the Relay server at {url}: {_reason(e)}") from None


class CloudClient:
    def __init__(self, url: str, token: str, ca: str | None = None, *, opts, models=None,
                 fallback: bool = True, heartbeat_timeout: float = 0.2, auto_return: bool = False,
                 on_status: Callable[[str], None] | None = None, on_link: Callable[[bool], None] | None = None,
                 compress: bool = False, clock=None):
        from app.pipeline.engine import EventBus, SessionRecord
        from app.pipeline.latency import ArrivalClock, LatencyTracker
        from app.pipeline.queues import MonotonicClock
        from app.pipeline.ringbuffer import AudioRing

        problem = validate_url(url)
        if problem:
            raise UserError(f"{url}: {problem}")
        if not token:
            raise UserError("--cloud needs an access token: --token T (or $RELAY_TOKEN)")
        if fallback and models is None:
            raise ValueError("the local fallback needs loaded models")
        self.url, self.token, self.opts, self.models = url, token, opts, models
        self.ctx = _ssl_context(url, ca)
        self.fallback, self.heartbeat_timeout, self.auto_return = fallback, heartbeat_timeout, auto_return
        self.on_status, self.on_link, self.compress = on_status, on_link, compress
        self.clock = clock or MonotonicClock()
        self.bus = EventBus()
        self.arrival = ArrivalClock()
        self.tracker = LatencyTracker(self.arrival)
        self.record = SessionRecord()
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
        self._dub_end = 0.0
        self._words_end = 0.0
        self._local = None
        self._local_answers: AnswerTracker | None = None
        self._local_base = 0
        self._local_seq_base = 0
        self._reset_stream(0)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="relay-cloud", daemon=True)
        self._thread.start()

    # -- public ------------------------------------------------------------------------------
    @property
    def rtt_ms(self) -> float | None:
        return round(self.rtts[-1] * 1000, 1) if self.rtts else None

    def connect(self, timeout: float = 60.0) -> None:
        self.started_at = self.clock.now()
        fut = asyncio.run_coroutine_threadsafe(self._open_session(0, None, timeout), self._loop)
        try:
            fut.result(timeout + 5)
        except Exception as e:
            reason = e.args[0] if isinstance(e, UserError) else _reason(e)
            if not self.fallback:
                raise UserError(f"cannot use the Relay server at {self.url}: {reason}") from None
            log.warning("cloud unavailable (%s): running locally", reason)
            self.error = reason
            with self._lock:
                self._go_local(f"no cloud: {reason}", self.clock.now(), self.clock.now())
            self._loop.call_soon_threadsafe(self._start_reconnect)

    def send_audio(self, samples, wait_if_full: bool = False, at: float | None = None) -> None:
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

    push_audio = send_audio  # so app.session.feed_array can drive a client like a pipeline

    def failed(self) -> bool:
        return self._mode == "failed" or (self._local is not None and self._local.failed())

    def return_to_cloud(self) -> None:
        self._loop.call_soon_threadsafe(lambda: self._loop.create_task(self._try_return()))

    def finish(self, timeout: float = 600.0) -> None:
        """End of input: the cloud session (or the local pipeline) finishes and sends the rest."""
        from app.pipeline.engine import PipelineError

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

    def close(self) -> None:
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
        from app.pipeline.latency import percentiles

        return {"status": self.status, "url": self.url, "rtt_ms": percentiles(self.rtts),
                "switches": list(self.switches), "returns": list(self.returns), "error": self.error}

    # -- status --------------------------------------------------------------------------------
    def _set_status(self, s: str) -> None:
        from app.pipeline.messages import Metric

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
        self._done.clear()

    def _refeed_point(self) -> int:
        return max(self._server_acked, self._answered)

    async def _open_session(self, start: int, ws, timeout: float) -> None:
        if ws is None:
            ws = await _open_ws(self.url, self.token, self.ctx, min(timeout, 10.0))
        o = self.opts
        options = {"no_tts": o.no_tts, "beam": o.beam, "asr_step": o.asr_step,
                   "commit_lookahead": o.commit_lookahead,
                   "first_commit_lookahead": o.first_commit_lookahead, "asr_context": o.asr_context,
                   "confident_commit": o.confident_commit, "confident_lookahead": o.confident_lookahead,
                   "preview": o.preview,
                   "eager": o.eager, "speculative": o.speculative, "policy": o.policy, "realtime": o.realtime}
        await ws.send(P.encode_json({"type": "hello", "v": P.VERSION, "pair": o.pair,
                                     "codec": "pcm16-zlib" if self.compress else "pcm16",
                                     "start_sample": start, "options": options}))
        first = json.loads(await asyncio.wait_for(ws.recv(), timeout))
        if first.get("type") != "welcome":
            ws.transport.abort()
            raise UserError(f"the server refused the session: {first.get('message', first.get('type'))}")
        self._begin_cloud(ws, start)

    def _begin_cloud(self, ws, start: int) -> None:
        with self._lock:
            self._ws = ws
            self._reset_stream(start)
            self._seq_base = self._max_seq + 1
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

    async def _sender(self, ws) -> None:
        while True:
            await ws.send(await self._out.get())

    async def _heartbeat(self, ws) -> None:
        while True:
            self._out.put_nowait(P.encode_json({"type": "hb", "t": round(self.clock.now(), 4)}))
            await asyncio.sleep(P.HEARTBEAT_S)

    async def _watchdog(self, ws) -> None:
        while True:
            await asyncio.sleep(0.01)
            if self.clock.now() - self._last_rx > self.heartbeat_timeout:
                self._lost(f"no heartbeat for {self.heartbeat_timeout * 1000:.0f} ms", ws)
                return

    async def _reader(self, ws) -> None:
        from websockets.exceptions import ConnectionClosed

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

    def _insert(self, n: int, item: tuple) -> None:
        """Reorder by the server's event number; release in order, never twice."""
        if n < self._next_n:
            return
        self._reorder[n] = item
        while self._next_n in self._reorder:
            it = self._reorder.pop(self._next_n)
            self._next_n += 1
            self._deliver_cloud(*it)

    def _deliver_cloud(self, kind: str, d: dict, audio) -> None:
        from app.pipeline.messages import CommittedWords, DubChunk, Segment, Translation

        with self._lock:
            if self._mode != "cloud":
                return
            now = self.clock.now()
            if kind == "dub":
                start_at = max(now, self._dub_end)
                self._dub_end = start_at + len(audio) / d["sample_rate"]
                self.bus.publish(DubChunk(self._seq_base + d["seq"], audio, d["sample_rate"], d["text"], now, start_at,
                                          d["first"], d["src_end"], d.get("speed", 1.0), d.get("skipped", False)))
                return
            ev = P.wire_to_event(d, now, self._held)
            if isinstance(ev, Segment):
                self._held[ev.seq] = ev  # shown with its translation: acknowledged together
                return
            if isinstance(ev, CommittedWords) and ev.words:
                self._words_end = max(self._words_end, ev.words[-1].end)
            if isinstance(ev, Translation) and not ev.preview:
                seg = self._held.pop(ev.seq, None)
                seq = self._seq_base + ev.seq
                self._max_seq = max(self._max_seq, seq)
                if seg is not None:
                    seg = dataclasses.replace(seg, seq=seq)
                    self.bus.publish(seg)
                ev = dataclasses.replace(ev, seq=seq, segment=seg)
                self._answered = max(self._answered, int(round(ev.src_end * SR)))
            self.bus.publish(ev)

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

    # -- local pipeline --------------------------------------------------------------------------
    def _go_local(self, reason: str, silent_since: float, detected: float) -> None:
        """Caller holds the lock. Feed the warm local pipeline from the acknowledged point."""
        from app import session
        from app.pipeline.messages import Metric

        written = self.ring.written
        base = min(max(self._refeed_point(), written - self.ring.capacity), written)
        pipe = session.build_pipeline(fresh_models(self.models), self.opts, clock=self.clock)
        self._local_base, self._local_seq_base = base, self._max_seq + 1
        self._local_answers = AnswerTracker(0, lambda p=pipe: p.asr_stage.window_start)
        pipe.bus.subscribe(self._local_answers)
        pipe.bus.subscribe(lambda ev, p=pipe: self._deliver_local(p, ev))
        pipe.start()
        backlog = self.ring.read(base, written)
        block = int(0.1 * SR)
        for off in range(0, len(backlog), block):
            pipe.push_audio(backlog[off:off + block].copy())
        self._local = pipe
        self._mode = "local"
        on_local = self.clock.now()
        sw = {"reason": reason, "at_s": round(on_local, 3), "silent_ms": round((detected - silent_since) * 1000, 1),
              "switch_ms": round((on_local - detected) * 1000, 1),
              "fallback_ms": round((on_local - silent_since) * 1000, 1),
              "refeed_from_s": round(base / SR, 3), "refed_s": round((written - base) / SR, 3)}
        self.switches.append(sw)
        self.bus.publish(Metric("fallback_ms", sw["fallback_ms"], on_local, (("reason", reason[:60]),)))
        self._set_status("local")

    def _deliver_local(self, pipe, ev) -> None:
        from app.pipeline.messages import CommittedWords, DubChunk, Segment, TentativeText, Translation
        from app.pipeline.protocols import Word

        with self._lock:
            if pipe is not self._local or self._mode != "local":
                return
            off = self._local_base / SR

            def words(ws):
                return tuple(Word(w.text, w.start + off, w.end + off, w.probability) for w in ws)

            def seg_of(s):
                return dataclasses.replace(s, seq=s.seq + self._local_seq_base, words=words(s.words))

            if isinstance(ev, TentativeText):
                ev = dataclasses.replace(ev, words=words(ev.words))
            elif isinstance(ev, CommittedWords):
                keep = [i for i, w in enumerate(ev.words) if w.end + off > self._words_end + 0.05]
                if not keep:
                    return  # already shown by the cloud before it went away
                ev = CommittedWords(words([ev.words[i] for i in keep]), tuple(ev.first_seen_at[i] for i in keep),
                                    ev.emitted_at, ev.pause_after)
            elif isinstance(ev, Segment):
                ev = seg_of(ev)
                self._max_seq = max(self._max_seq, ev.seq)
            elif isinstance(ev, Translation):
                ev = dataclasses.replace(ev, seq=ev.seq + self._local_seq_base if ev.seq >= 0 else ev.seq,
                                         src_start=ev.src_start + off, src_end=ev.src_end + off,
                                         segment=seg_of(ev.segment) if ev.segment is not None else None)
            elif isinstance(ev, DubChunk):
                start_at = max(ev.start_at, self._dub_end)
                self._dub_end = start_at + len(ev.audio) / ev.sample_rate
                ev = dataclasses.replace(ev, seq=ev.seq + self._local_seq_base, src_end=ev.src_end + off,
                                         start_at=start_at)
            self.bus.publish(ev)

    # -- reconnect and return ----------------------------------------------------------------------
    def _start_reconnect(self) -> None:
        self._loop.call_soon_threadsafe(lambda: self._tasks.append(self._loop.create_task(self._reconnect())))

    async def _reconnect(self) -> None:
        delay = 0.25
        while self._mode in ("local",) and not self._finishing:
            await asyncio.sleep(delay)
            try:
                ws = await _open_ws(self.url, self.token, self.ctx, 2.0)
            except Exception:
                delay = min(2.0, delay * 2)
                continue
            self._probe, delay = ws, 0.25
            self.cloud_available = True
            self._set_status("cloud-available")
            self._link(True)
            if self.auto_return:
                await self._try_return()
            while self._probe is ws and ws.state.name == "OPEN":
                await asyncio.sleep(0.1)
            self.cloud_available = False

    async def _try_return(self) -> None:
        """Hand back to the cloud at a boundary: nothing in flight locally and close to live.
        While the new session opens, audio only goes into the ring; it is sent from the
        hand-over point once the server welcomes the session."""
        for _ in range(600):
            ws = self._probe
            if ws is None or self._mode != "local" or self._finishing:
                return
            with self._lock:
                ans = self._local_answers
                point = self._local_base + (ans.poll() if ans else 0)
                ready = ans is not None and ans.clean and self.ring.written - point <= RETURN_NEAR_S * SR
                if ready:
                    old, detected, held_from = self._local, self.clock.now(), self.ring.written
                    self._probe, self._local, self._mode = None, None, "returning"
            if not ready:
                await asyncio.sleep(0.05)
                continue
            try:
                await self._open_session(point, ws, 5.0)
            except Exception as e:
                log.info("return to the cloud failed: %s", _reason(e))
                with self._lock:  # the local pipeline carries on, with what arrived meanwhile
                    old.push_audio(self.ring.read(held_from, self.ring.written).copy())
                    self._local, self._mode = old, "local"
                self._start_reconnect()
                return
            self.cloud_available = False
            self.returns.append({"at_s": round(detected, 3), "from_s": round(point / SR, 3),
                                 "switch_ms": round((self.clock.now() - detected) * 1000, 1)})
            threading.Thread(target=_stop_quietly, args=(old,), daemon=True).start()
            return


def _stop_quietly(pipe) -> None:
    pipe._abort() if hasattr(pipe, "_abort") else pipe.ring.close()
    for t in pipe.threads:
        t.join(10)


# -- `relay run --cloud` ---------------------------------------------------------------------------

def cmd_run_cloud(args) -> int:
    from app import session
    from app.audio.files import load_audio
    from app.cli import Printer, check_output_folders, finish_run, options_from_args

    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    if args.serial:
        raise UserError("--serial is a local comparison: leave out --cloud")
    if args.source and (args.input or args.demo):
        raise UserError("--source captures live audio: leave out --input/--demo")
    if args.demo and not args.input:
        args.input = str(session.DEMO_CLIP)
    if not args.input and not args.source:
        raise UserError("say which audio to use: --input FILE (or --demo, or --source DEVICE)")
    problem = validate_url(args.cloud)
    if problem:
        raise UserError(f"{args.cloud}: {problem}")
    token = args.token or os.environ.get("RELAY_TOKEN")
    if not token:
        raise UserError("--cloud needs an access token: --token T (or $RELAY_TOKEN)")
    opts = options_from_args(args)
    opts.validate()
    check_output_folders(args)
    if args.source:  # a wrong device name fails before anything loads
        from app.audio.devices import list_devices, resolve

        devices = list_devices()
        resolve(args.source, devices=devices)
        if args.dub_device:
            resolve(args.dub_device, output=True, devices=devices)
    audio = load_audio(args.input, accel=opts.accel_request) if args.input else None

    def status(msg):
        if not args.json:
            print(msg, file=sys.stderr, flush=True)

    if args.no_fallback:
        models = SimpleNamespace(plan=SimpleNamespace(pair=opts.pair, models={"server": args.cloud}),
                                 load_s=0.0, warm_s=0.0, accel="server")
    else:
        plan = session.check_models(opts)
        if args.dub_out and plan.tts_pack is None:
            raise UserError("--dub-out needs speech synthesis, which is off for this run")
        models = session.load_models(opts, status, plan=plan)  # warm, so a fallback is instant
    client = CloudClient(args.cloud, token, args.ca, opts=opts, models=None if args.no_fallback else models,
                         fallback=not args.no_fallback,
                         on_status=lambda s: print(f"relay: cloud: {s}", file=sys.stderr, flush=True))
    if args.source:
        from app.audio.live import run_live

        try:
            return run_live(args, opts, models, pipe=client)
        finally:
            client.close()
    try:
        client.bus.subscribe(Printer(args.json))
        client.connect()
        cpu0 = time.process_time()
        t0 = client.clock.now()
        interrupted = False
        try:
            session.feed_array(client, audio, args.realtime)
        except KeyboardInterrupt:
            interrupted = True
            status("relay: stopping: finishing the last segment")
        return finish_run(args, opts, models, client, len(audio) / SR, t0, cpu0, os.fsdecode(args.input), interrupted)
    finally:
        client.close()
