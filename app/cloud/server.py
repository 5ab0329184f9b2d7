"""`relay serve`: the streaming pipeline over WebSocket + TLS 1.3 for many sessions at once.

Network I/O runs on one asyncio loop (the ``websockets`` library: small, no framework between
the socket and us, per-frame control). Each session owns its pipeline threads, audio ring and
bounded outbox (app/cloud/server_session.py); the heavy model weights are shared
(app/cloud/server_pool.py): one Whisper model per pair (each session gets a view with its own
streaming feature state), one Piper voice, one translator per direction behind the
micro-batcher (app/cloud/batching.py). Blocking work runs on separate bounded thread pools.
Nothing is written to disk; logs carry ids and figures, never audio or text.

Limits (sessions, message rates, send timeout, hello bounds...) are settings:
app/cloud/limits.py and docs/DEPLOY.md. ``RELAY_SERVE_BATCHING=off`` turns micro-batching off
(for the benchmark).
"""

from __future__ import annotations

import asyncio
import gc
import http
import logging
import os
import secrets
import signal
import sys
import threading
import time
import weakref

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

from app.cloud import protocol as P
from app.cloud.batching import MicroBatcher
from app.cloud.limits import FrameLimiter, LogLimiter, PeerThrottle, ServerLimits, SessionCounter, check_hello_options
from app.cloud.server_auth import bearer, load_tokens, tls_context, token_index
from app.cloud.server_link import CLOSE_GRACE_S, Fatal, Link, SlowClient, set_send_buffer
from app.cloud.server_pool import Executors, ModelPool, collect_garbage
from app.cloud.server_session import Session
from app.core.errors import UserError
from app.pipeline.engine import PipelineError
from app.session.build import build_pipeline
from app.session.options import SessionOptions

log = logging.getLogger("relay.cloud.server")
LOOPBACK = ("127.0.0.1", "::1", "localhost")
FINISH_TIMEOUT_S = 120.0  # `end`: the pipeline drains what it holds within this
HOUSEKEEP_S = 1.0  # after teardowns, freed memory goes back to the system at most this often


class Server:
    def __init__(self, tokens: list[bytes], batcher: MicroBatcher, pool: ModelPool, limits: ServerLimits | None = None):
        self.tokens, self.batcher, self.pool = tokens, batcher, pool
        self.limits = limits or ServerLimits()
        self.ex = Executors(self.limits)
        self.sessions: dict[str, Session] = {}
        self.counter = SessionCounter(self.limits)
        self.throttle = PeerThrottle(self.limits.refusals_per_min)
        self.logs = LogLimiter(log)
        self.refused = 0
        self.closed_with: dict[str, int] = {}  # error code → sessions closed with it
        self._token_of: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._links: set[Link] = set()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._housekeeping = False
        self._tearing = 0  # teardowns in flight

    # -- admission (before the WebSocket upgrade) ----------------------------------------------
    def process_request(self, connection, request):
        now = time.monotonic()
        peer = str((connection.remote_address or ("?",))[0])
        try:
            if self._stop is not None and self._stop.is_set():
                return connection.respond(http.HTTPStatus.SERVICE_UNAVAILABLE, "relay: shutting down\n")
            if self.throttle.blocked(peer, now):
                self.refused += 1
                self.logs.log(logging.WARNING, "throttled", now, "refusing %s for a while: too many refused connections", peer)
                return connection.respond(http.HTTPStatus.TOO_MANY_REQUESTS, "relay: too many refused connections, try later\n")
            token, malformed = bearer(request.headers)
            status = http.HTTPStatus.BAD_REQUEST if malformed else None
            idx = None if malformed else token_index(token, self.tokens)
        except Exception as e:  # whatever the request holds, it gets an answer and no traceback
            malformed, status, idx = f"unreadable request ({type(e).__name__})", http.HTTPStatus.BAD_REQUEST, None
        if idx is None:
            self.refused += 1
            self.throttle.refused(peer, now)
            why = malformed or "bad or missing token"
            self.logs.log(logging.WARNING, "refused", now, "refused a connection from %s: %s", peer, why)
            if status is not None:
                return connection.respond(status, f"relay: {why}\n")
            return connection.respond(http.HTTPStatus.UNAUTHORIZED, "relay: a valid access token is required\n")
        self._token_of[connection] = idx
        return None

    # -- one connection ---------------------------------------------------------------------------
    async def handler(self, ws) -> None:
        sid = secrets.token_hex(4)
        link = Link(ws, self.limits.send_timeout_s)
        self._links.add(link)
        token = self._token_of.pop(ws, -1)
        set_send_buffer(ws, self.limits.send_buffer)
        refused = self.counter.acquire(token)
        sess: Session | None = None
        try:
            if refused:
                self.logs.log(logging.WARNING, "busy", time.monotonic(), "session refused: %s", refused)
                raise Fatal("busy", refused)
            sess = await self._open(link, sid, token)
            await self._run(link, sess)
        except ConnectionClosed:
            pass
        except Fatal as e:
            await link.fail(e.code, str(e))
        except SlowClient:
            await link.fail("slow_client", f"the client read nothing for {self.limits.send_timeout_s:g} s")
        except Exception as e:  # a connection's failure never takes the server down
            self.logs.log(logging.WARNING, "failed", time.monotonic(), "session %s failed: %s", sid, type(e).__name__)
            await link.fail("server", "internal error")
        finally:
            self._links.discard(link)
            if link.sent_error:
                self.closed_with[link.sent_error] = self.closed_with.get(link.sent_error, 0) + 1
            try:
                if sess is not None:
                    why = link.sent_error or ("done" if getattr(sess, "done_msg", None) else "client left")
                    await self._release(sess, why)
            finally:  # a session counts until its pipeline has stopped: killed sessions cannot pile up
                if not refused:
                    self.counter.release(token)

    async def _open(self, link: Link, sid: str, token: int) -> Session:
        ws = link.ws
        try:
            first = await asyncio.wait_for(ws.recv(), self.limits.hello_timeout_s)
        except TimeoutError:
            raise Fatal("timeout", f"no hello within {self.limits.hello_timeout_s:g} s") from None
        try:
            if not isinstance(first, str):
                raise P.ProtocolError("malformed", "the first message must be a JSON 'hello'")
            hello = P.parse_hello(P.decode_client_text(first))
            check_hello_options(hello.options, self.limits)
            # the second pass runs only for a client that asked for its finals (feature "final"):
            # a client that predates it gets the first pass, and the dub made from its pieces
            # the profanity setting applies for a client that asked for it (feature "profanity");
            # one that predates it gets the text as recognised, as before
            # the finals' translator and its budget are the server's (its operator's) choice
            opts = SessionOptions(**{"realtime": True, **hello.options, "pair": hello.pair,
                                     "final_pass": "final" in hello.features,
                                     "profanity": hello.profanity_applied, "final_mt": self.limits.final_mt,
                                     "final_mt_budget": self.limits.final_mt_budget})
            opts.validate()
        except P.ProtocolError as e:
            raise Fatal(e.code, str(e)) from None
        except (UserError, TypeError, ValueError) as e:
            raise Fatal("bad_options", str(e)) from None
        try:
            models = await self.pool.models_for(hello.pair, self.ex.load)
        except UserError as e:
            raise Fatal("pair", str(e)) from None
        loop = asyncio.get_running_loop()
        pipe = await loop.run_in_executor(
            self.ex.build, lambda: build_pipeline(self.pool.session_models(models, hello.pair, opts.no_tts), opts))
        fatal = loop.create_future()

        def on_fatal(code: str, message: str) -> None:
            if not fatal.done():
                fatal.set_result((code, message))

        sess = Session(sid, hello, pipe, opts.realtime, token, self.limits, loop, on_fatal)
        sess.fatal = fatal
        self.sessions[sid] = sess
        self.batcher.open_session(hello.pair)
        try:
            pipe.start()  # on the loop: a few threads started
            sess.t0 = time.monotonic()
            log.info("session %s opened: %s from sample %d", sid, hello.pair, hello.start_sample)
            await link.send(P.encode_json({"type": "welcome", "v": P.VERSION, "session": sid,
                                           "hb_ms": int(P.HEARTBEAT_S * 1000), "pair": hello.pair,
                                           "max_frame_samples": P.MAX_FRAME_SAMPLES, "out_lang": models.out_lang,
                                           "start_sample": hello.start_sample,
                                           "features": list(hello.features)}))
        except BaseException:  # the handler never saw this session: released here
            await self._release(sess, "not started")
            raise
        return sess

    async def _run(self, link: Link, sess: Session) -> None:
        """Receive, send and beat until one of them ends; a close, a fatal error or `done`."""
        recv = asyncio.create_task(self._receive(link, sess))
        send = asyncio.create_task(self._sender(link, sess))
        beat = asyncio.create_task(self._heartbeat(link, sess))
        closed = asyncio.create_task(link.ws.wait_closed())
        tasks = {recv, send, beat, closed, sess.fatal}
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            if recv in done and not recv.cancelled() and recv.exception() is None:
                # `end` was handled and `done` queued: the sender delivers it and closes
                await asyncio.wait({send, closed, sess.fatal}, return_when=asyncio.FIRST_COMPLETED,
                                   timeout=self.limits.send_timeout_s + CLOSE_GRACE_S)
        finally:
            for t in (recv, send, beat, closed):
                t.cancel()
            results = await asyncio.gather(recv, send, beat, closed, return_exceptions=True)
        for r in results:
            if isinstance(r, (Fatal, SlowClient)):
                raise r
            if isinstance(r, Exception) and not isinstance(r, (ConnectionClosed, asyncio.CancelledError)):
                raise r
        if sess.fatal.done():
            raise Fatal(*sess.fatal.result())

    async def _receive(self, link: Link, sess: Session) -> None:
        lim = FrameLimiter(self.limits, time.monotonic())
        control = P.TokenBucket(P.TEXT_RATE_PER_S, P.TEXT_RATE_PER_S, time.monotonic())
        errors = 0
        while True:
            try:
                msg = await asyncio.wait_for(link.ws.recv(), self.limits.client_silence_s)
            except TimeoutError:
                raise Fatal("timeout", f"nothing from the client for {self.limits.client_silence_s:g} s") from None
            now = time.monotonic()
            waited = lim.charge(now, 1, len(msg))
            if waited:
                await asyncio.sleep(waited)
            new = 0
            try:
                if isinstance(msg, bytes):
                    fr = await self._decode(msg)
                    extra = lim.charge(time.monotonic(), 0, max(0, 2 * len(fr.samples) - len(msg)))
                    if extra:  # decompressed audio counts at its decoded size
                        await asyncio.sleep(extra)
                        waited += extra
                    new = sess.accept_audio(fr, time.monotonic() - sess.t0)
                else:
                    if not control.take(now):
                        raise P.ProtocolError("rate", "too many control messages")
                    obj = P.decode_client_text(msg)
                    if obj["type"] == "hb":
                        await link.send(P.encode_json({"type": "pong", "t": obj.get("t", 0)}))
                    elif obj["type"] == "end":
                        await self._finish(sess)
                        return
                    else:
                        raise P.ProtocolError("malformed", "a second hello")
            except P.ProtocolError as e:
                errors += 1
                if errors >= self.limits.max_errors:
                    raise Fatal(e.code, f"{e} ({errors} protocol errors)") from None
                self.logs.log(logging.INFO, f"protocol:{e.code}", now, "session %s: protocol error %s", sess.sid, e.code)
                await link.send(P.encode_json({"type": "error", "code": e.code, "message": str(e), "fatal": False}))
            try:
                lim.account(time.monotonic(), waited, new)
            except P.ProtocolError as e:
                raise Fatal(e.code, str(e)) from None

    async def _decode(self, msg: bytes) -> P.AudioFrame:
        if len(msg) > 4 and msg[4] & P.FLAG_ZLIB:  # inflating is off the loop, on a bounded pool
            return await asyncio.get_running_loop().run_in_executor(self.ex.decode, P.decode_audio, msg)
        return P.decode_audio(msg)

    async def _finish(self, sess: Session) -> None:
        sess.flush()
        try:
            await asyncio.get_running_loop().run_in_executor(self.ex.finish, sess.pipe.finish, FINISH_TIMEOUT_S)
        except PipelineError as e:
            raise Fatal("server", f"pipeline failed: {e}") from None
        sess.done_msg = P.encode_json({"type": "done", "acked": sess.next_sample,
                                       "audio_s": (sess.next_sample - sess.base) / P.SR,
                                       "stages": sess.pipe.stage_stats()})
        sess.outbox.put_last(sess.done_msg)

    async def _sender(self, link: Link, sess: Session) -> None:
        while True:
            data = await sess.outbox.get()
            await link.send(data)
            if data is getattr(sess, "done_msg", None):
                await link.close(1000, "done")
                return

    async def _heartbeat(self, link: Link, sess: Session) -> None:
        while True:
            await link.send(P.encode_json({"type": "hb", "t": round(time.monotonic() - sess.t0, 3),
                                           "acked": sess.acked, "received": sess.next_sample}))
            await asyncio.sleep(P.HEARTBEAT_S)

    async def _release(self, sess: Session, why: str) -> None:
        """Everything the session holds goes: its outbox now, its pipeline's threads and buffers
        on the teardown pool (shielded: a cancelled handler still releases)."""
        sess.close()
        self.sessions.pop(sess.sid, None)
        self.batcher.close_session(sess.hello.pair)
        t = time.monotonic()
        try:
            fut = asyncio.get_running_loop().run_in_executor(self.ex.teardown, self._teardown, sess.pipe)
        except RuntimeError:  # the pools are shut down: the process is ending
            threading.Thread(target=self._teardown, args=(sess.pipe,), daemon=True).start()
            return
        self._tearing += 1
        fut.add_done_callback(self._torn_down)
        await asyncio.shield(fut)
        log.info("session %s closed (%s) after %.1f s: %.1f s of audio, %d events, %d dropped; stopped in %.0f ms",
                 sess.sid, why, t - sess.t0 if sess.t0 else 0.0, (sess.next_sample - sess.base) / P.SR,
                 sess.outbox.n, sess.outbox.dropped, (time.monotonic() - t) * 1000)
        self._housekeep_soon()

    def _torn_down(self, fut) -> None:
        self._tearing -= 1
        if not fut.cancelled() and fut.exception() is not None:
            log.warning("a session's teardown failed: %s", type(fut.exception()).__name__)

    def _teardown(self, pipe) -> None:
        pipe.abort()

    def _housekeep_soon(self) -> None:
        """Once the handlers have let go of closed sessions: collect their pipelines (reference
        cycles: a ring buffer waits for the cyclic collector) and hand the freed memory back to
        the system. Coalesced: at most once per ``HOUSEKEEP_S``, on the teardown pool."""
        if self._housekeeping:
            return
        self._housekeeping = True
        loop = asyncio.get_running_loop()

        def run() -> None:
            self._housekeeping = False
            try:
                self.ex.teardown.submit(collect_garbage)
            except RuntimeError:  # the pools are shut down: the process is ending
                pass

        loop.call_later(HOUSEKEEP_S, run)

    # -- the whole server ------------------------------------------------------------------------
    async def run(self, host: str, port: int, ctx, ready=None) -> None:
        """Serve until ``stop()``; then shut down within ``limits.shutdown_s``."""
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            srv = await serve(self.handler, host, port, ssl=ctx, process_request=self.process_request,
                              subprotocols=[P.SUBPROTOCOL], compression=None, max_size=P.MAX_MESSAGE_BYTES,
                              ping_interval=None, open_timeout=self.limits.hello_timeout_s, close_timeout=CLOSE_GRACE_S,
                              logger=logging.getLogger("relay.cloud.ws"))
        except OSError as e:
            raise UserError(f"cannot listen on {host}:{port} ({e.strerror})") from None
        if ready is not None:
            ready(srv.sockets[0].getsockname()[1])
        try:
            await self._stop.wait()
        finally:
            await self._shutdown(srv)

    def stop(self) -> None:
        """Ask for a graceful shutdown (from any thread, or a signal handler)."""
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)

    async def _shutdown(self, srv) -> None:
        """Every connection is told (`shutdown`) and closed, and every pipeline stopped, within
        ``shutdown_s``; what is still stuck then (a model call) is left to the process's end."""
        deadline = time.monotonic() + self.limits.shutdown_s
        srv.close(close_connections=False)  # no new connections; open ones are told below
        for link in list(self._links):
            asyncio.ensure_future(link.fail("shutdown", "the server is shutting down"))
        while (self._links or self.sessions or self._tearing) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for link in list(self._links):
            link.ws.transport.abort()
        try:
            await asyncio.wait_for(srv.wait_closed(), 0.5)
        except TimeoutError:
            log.warning("shutting down with %d connection(s) and %d teardown(s) unfinished",
                        len(self._links), self._tearing)
        self.ex.shutdown()


def cmd_serve(args) -> int:
    # CTranslate2's OpenMP workers spin between calls by default. Sessions call the shared models
    # from their own threads, each with its own OpenMP team, and on few cores the idle teams'
    # spinning starves the working one: with 4 sessions on 2 cores one Whisper call took 80 s
    # (under 1 s passive). Set before the models load (libgomp reads it once); the operator's wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    limits = ServerLimits.from_settings(args, os.environ)
    tokens = load_tokens(getattr(args, "tokens", None))
    if bool(args.cert) != bool(args.key):
        raise UserError("--cert and --key go together")
    ctx = tls_context(args.cert, args.key) if args.cert else None
    if ctx is None and args.host not in LOOPBACK:
        raise UserError(f"without --cert/--key relay serve listens on loopback only, not {args.host}")
    if not 0 <= args.port < 65536:
        raise UserError("--port must be between 0 and 65535")
    batching = os.environ.get("RELAY_SERVE_BATCHING", "on") != "off"
    batcher = MicroBatcher(workers=max(2, min(4, os.cpu_count() or 2)), batching=batching)
    try:
        pool = ModelPool(batcher, lazy=limits.lazy_pairs, final_mt=limits.final_mt)
        for pair in limits.pair_list:
            pool.load(pair)
        gc.freeze()  # the loaded models live as long as the process: full collections skip them
        server = Server(tokens, batcher, pool, limits)
        asyncio.run(_serve(server, args, ctx))
    finally:
        batcher.close()
    return 0


async def _serve(server: Server, args, ctx) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, server.stop)

    def ready(port: int) -> None:
        print(f"relay: serving on {'wss' if ctx else 'ws'}://{args.host}:{port}", file=sys.stderr, flush=True)

    await server.run(args.host, args.port, ctx, ready)
