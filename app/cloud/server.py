"""`relay serve`: the streaming pipeline over WebSocket + TLS 1.3 for many sessions at once.

Network I/O runs on one asyncio loop (the ``websockets`` library: small, no framework between
the socket and us, per-frame control). Each session owns its pipeline threads, audio ring and
bounded outbox; the heavy model weights are shared: one Whisper model per pair (each session
gets a view with its own streaming feature state), one Piper voice, one translator per
direction behind the micro-batcher (app/cloud/batching.py). Nothing is written to disk; logs
carry ids and figures, never audio or text.

``RELAY_SERVE_PAIRS`` (default ``zh-en``) lists the pairs loaded at start; others load on first
use. ``RELAY_SERVE_BATCHING=off`` turns micro-batching off (for the benchmark).
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import hmac
import http
import logging
import os
import secrets
import ssl
import sys
import threading
import time
from pathlib import Path

from app.cloud import protocol as P
from app.cloud.ack import AnswerTracker
from app.cloud.batching import MicroBatcher, SessionTranslator, batch_engine
from app.cloud.views import asr_view, vad_view
from app.core.errors import UserError

log = logging.getLogger("relay.cloud.server")
LOOPBACK = ("127.0.0.1", "::1", "localhost")
OUTBOX_SOFT = 256  # above this, partials, previews and metrics are dropped
OUTBOX_HARD = 4096  # above this the client is too slow: the session closes
MAX_ERRORS = 20  # protocol errors before a session is closed
CLIENT_SILENCE_S = 5.0  # no message from the client for this long: the session ends


def load_tokens(path: str | None) -> list[bytes]:
    if not path:
        raise UserError("relay serve needs --tokens FILE (one access token a line)")
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise UserError(f"{path}: cannot read the tokens file ({e.strerror})") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: the tokens file is not UTF-8 text") from None
    toks = [t.strip().encode() for t in lines if t.strip() and not t.strip().startswith("#")]
    if not toks:
        raise UserError(f"{path}: no tokens in the file")
    if any(len(t) < 8 for t in toks):
        raise UserError(f"{path}: tokens must be at least 8 characters")
    return toks


def token_ok(given: str | None, tokens: list[bytes]) -> bool:
    """Constant time in the token's content: every stored token is compared, always."""
    g = (given or "").encode()
    ok = False
    for t in tokens:
        ok |= hmac.compare_digest(g, t)
    return ok


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    for p in (cert, key):
        if not Path(p).is_file():
            raise UserError(f"{p}: no such file")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    try:
        ctx.load_cert_chain(cert, key)
    except (ssl.SSLError, ValueError) as e:
        raise UserError(f"cannot use {cert} / {key} as a TLS certificate and key ({e.__class__.__name__})") from None
    return ctx


# -- shared models -------------------------------------------------------------------------------

class ModelPool:
    """LoadedModels per pair, loaded once, shared by every session of that pair."""

    def __init__(self, batcher: MicroBatcher):
        self.batcher = batcher
        self._models: dict[str, object] = {}
        self._lock = threading.Lock()

    def get(self, pair: str):
        from app import session

        with self._lock:
            m = self._models.get(pair)
            if m is None:
                opts = session.SessionOptions(pair=pair)
                m = session.load_models(opts, lambda msg: log.info("%s", msg))
                self._models[pair] = m
                self.batcher.add_direction(pair, batch_engine(m.mt))
            return m

    def session_models(self, pair: str, no_tts: bool):
        m = self.get(pair)
        mt = SessionTranslator(self.batcher, pair, m.mt)
        return dataclasses.replace(m, asr=asr_view(m.asr, m.plan.src != "xx"), vad=vad_view(m.vad), mt=mt,
                                   tts=None if no_tts else m.tts)


# -- one session -----------------------------------------------------------------------------------

class Session:
    """One client's pipeline and its bookkeeping: frame stamps, the acknowledged point, outbox."""

    def __init__(self, sid: str, hello: P.Hello, models, opts, loop: asyncio.AbstractEventLoop):
        from app import session

        self.sid, self.hello, self.loop = sid, hello, loop
        self.base = hello.start_sample
        self.realtime = opts.realtime
        self.off = self.base / P.SR
        self.next_sample = self.base
        self.last_seq = -1
        self.frame_starts: list[int] = []
        self.frame_seqs: list[int] = []
        self.pipe = session.build_pipeline(models, opts)
        self.outbox: asyncio.Queue = asyncio.Queue()
        self.n = 0
        self.dropped = 0
        self.overflow = False
        self.answers = AnswerTracker(self.base, lambda: self.pipe.asr_stage.window_start)
        self.pipe.bus.subscribe(self.answers)
        self.pipe.bus.subscribe(self._on_event)

    @property
    def acked(self) -> int:
        return min(self.answers.poll(), self.next_sample)

    def _stamp(self, sample: int) -> tuple[int, int]:
        i = bisect.bisect_right(self.frame_starts, sample) - 1
        return (self.frame_seqs[i] if i >= 0 else 0, int(sample))

    def _on_event(self, ev) -> None:
        """Pipeline thread: encode the event and hand it to the loop (numbered there, in order)."""
        from app.pipeline.messages import DubChunk

        if isinstance(ev, DubChunk):
            stamp = self._stamp(self.base + int(round(ev.src_end * P.SR)))
            header = {"k": "dub", "seq": ev.seq, "sample_rate": ev.sample_rate, "text": ev.text,
                      "first": ev.first_of_segment, "src_end": round(ev.src_end + self.off, 3),
                      "speed": ev.speed, "skipped": ev.skipped}
            audio = ev.audio
            item = (True, lambda n: P.encode_dub(n, stamp, header, audio))
        else:
            d = P.event_to_wire(ev, self.off)
            if d is None:
                return
            if d["k"] in ("committed", "segment") and d["words"]:
                sample = int(round(d["words"][-1][2] * P.SR))
            elif d["k"] == "translation":
                sample = int(round(d["src_end"] * P.SR))
            else:
                sample = self.next_sample
            ts = list(self._stamp(sample))
            item = (d["k"] not in ("partial", "preview", "metric"),
                    lambda n: P.encode_json({"type": "ev", "n": n, "ts": ts, "ev": d}))
        self.loop.call_soon_threadsafe(self._enqueue, item)

    def _enqueue(self, item) -> None:
        must, build = item
        size = self.outbox.qsize()
        if size >= OUTBOX_HARD:
            self.overflow = True
            return
        if not must and size >= OUTBOX_SOFT:
            self.dropped += 1
            return
        self.n += 1
        self.outbox.put_nowait(build(self.n))

    def accept_audio(self, fr: P.AudioFrame, now_s: float) -> None:
        if fr.seq <= self.last_seq:
            raise P.ProtocolError("sequence", f"frame seq {fr.seq} after {self.last_seq}")
        if fr.first_sample > self.next_sample:
            raise P.ProtocolError("gap", f"audio from sample {fr.first_sample}, expected {self.next_sample}")
        samples = fr.samples
        if fr.first_sample < self.next_sample:  # a resent overlap: keep only what is new
            samples = samples[self.next_sample - fr.first_sample:]
        end = self.next_sample + len(samples)
        if self.realtime and (end - self.base) / P.SR > now_s + P.AUDIO_BURST_S:
            raise P.ProtocolError("rate", "audio arrives faster than real time")
        if not self.realtime and (end - self.acked) / P.SR > P.FAST_AHEAD_S:
            raise P.ProtocolError("rate", f"more than {P.FAST_AHEAD_S:.0f} s of audio ahead of the answers")
        self.last_seq = fr.seq
        if not len(samples):
            return
        self.frame_starts.append(self.next_sample)
        self.frame_seqs.append(fr.seq)
        if len(self.frame_starts) > 4096:  # keep the stamp index small; old audio is answered
            del self.frame_starts[:2048], self.frame_seqs[:2048]
        self.pipe.push_audio(samples)
        self.next_sample += len(samples)


class Server:
    def __init__(self, tokens: list[bytes], batcher: MicroBatcher, pool: ModelPool):
        self.tokens, self.batcher, self.pool = tokens, batcher, pool
        self.sessions: dict[str, Session] = {}
        self.refused = 0

    def process_request(self, connection, request):
        auth = request.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else None
        if not token_ok(token, self.tokens):
            self.refused += 1
            log.warning("refused a connection from %s: bad or missing token", connection.remote_address[0])
            return connection.respond(http.HTTPStatus.UNAUTHORIZED, "relay: a valid access token is required\n")
        return None

    async def handler(self, ws) -> None:
        sid = secrets.token_hex(4)
        sess: Session | None = None
        tasks: list[asyncio.Task] = []
        try:
            sess = await self._open(ws, sid)
            if sess is None:
                return
            tasks = [asyncio.create_task(self._sender(ws, sess)), asyncio.create_task(self._heartbeat(ws, sess))]
            await self._receive(ws, sess)
        except Exception as e:  # a connection's failure never takes the server down
            from websockets.exceptions import ConnectionClosed

            if not isinstance(e, ConnectionClosed):
                log.warning("session %s failed: %s", sid, e.__class__.__name__)
        finally:
            for t in tasks:
                t.cancel()
            if sess is not None:
                self.sessions.pop(sid, None)
                self.batcher.close_session(sess.hello.pair)
                await asyncio.get_running_loop().run_in_executor(None, self._stop_pipeline, sess)
                log.info("session %s closed: %.1f s of audio, %d events, %d dropped", sid,
                         (sess.next_sample - sess.base) / P.SR, sess.n, sess.dropped)

    @staticmethod
    def _stop_pipeline(sess: Session) -> None:
        sess.pipe._abort() if hasattr(sess.pipe, "_abort") else sess.pipe.ring.close()
        for t in sess.pipe.threads:
            t.join(5.0)

    async def _error(self, ws, code: str, message: str, fatal: bool) -> None:
        await ws.send(P.encode_json({"type": "error", "code": code, "message": message, "fatal": fatal}))
        if fatal:
            await ws.close(1008 if code != "server" else 1011, code)

    async def _open(self, ws, sid: str) -> Session | None:
        from app.session import SessionOptions

        try:
            first = await asyncio.wait_for(ws.recv(), timeout=10)
        except asyncio.TimeoutError:
            await self._error(ws, "timeout", "no hello within 10 s", True)
            return None
        try:
            if not isinstance(first, str):
                raise P.ProtocolError("malformed", "the first message must be a JSON 'hello'")
            hello = P.parse_hello(P.decode_client_text(first))
            opts = SessionOptions(**{"realtime": True, **hello.options, "pair": hello.pair})
            opts.validate()
        except (P.ProtocolError, UserError, TypeError) as e:
            await self._error(ws, getattr(e, "code", "bad_options"), str(e), True)
            return None
        loop = asyncio.get_running_loop()
        try:
            models = await loop.run_in_executor(None, self.pool.session_models, hello.pair, opts.no_tts)
        except UserError as e:
            await self._error(ws, "pair", str(e), True)
            return None
        self.batcher.open_session(hello.pair)
        try:
            sess = Session(sid, hello, models, opts, loop)
            sess.pipe.start()
        except BaseException:
            self.batcher.close_session(hello.pair)
            raise
        sess.t0 = time.monotonic()
        self.sessions[sid] = sess
        log.info("session %s opened: %s from sample %d", sid, hello.pair, hello.start_sample)
        await ws.send(P.encode_json({"type": "welcome", "v": P.VERSION, "session": sid, "hb_ms": int(P.HEARTBEAT_S * 1000),
                                     "max_frame_samples": P.MAX_FRAME_SAMPLES, "pair": hello.pair,
                                     "out_lang": models.out_lang, "start_sample": hello.start_sample}))
        return sess

    async def _receive(self, ws, sess: Session) -> None:
        errors = 0
        bucket = P.TokenBucket(P.TEXT_RATE_PER_S, P.TEXT_RATE_PER_S, time.monotonic())
        while True:
            try:
                msg = await asyncio.wait_for(ws.recv(), timeout=CLIENT_SILENCE_S)
            except asyncio.TimeoutError:
                await self._error(ws, "timeout", f"nothing from the client for {CLIENT_SILENCE_S:.0f} s", True)
                return
            now = time.monotonic()
            try:
                if isinstance(msg, bytes):
                    sess.accept_audio(P.decode_audio(msg), now - sess.t0)
                    continue
                if not bucket.take(now):
                    raise P.ProtocolError("rate", "too many control messages")
                obj = P.decode_client_text(msg)
                if obj["type"] == "hb":
                    await ws.send(P.encode_json({"type": "pong", "t": obj.get("t", 0)}))
                elif obj["type"] == "end":
                    await self._finish(ws, sess)
                    return
                else:
                    raise P.ProtocolError("malformed", "a second hello")
            except P.ProtocolError as e:
                errors += 1
                fatal = errors >= MAX_ERRORS
                log.info("session %s: protocol error %s", sess.sid, e.code)
                await self._error(ws, e.code, str(e), fatal)
                if fatal:
                    return

    async def _finish(self, ws, sess: Session) -> None:
        loop = asyncio.get_running_loop()
        from app.pipeline.engine import PipelineError

        try:
            await loop.run_in_executor(None, sess.pipe.finish, 120.0)
        except PipelineError as e:
            await self._error(ws, "server", f"pipeline failed: {e}", True)
            return
        while not sess.outbox.empty():
            await asyncio.sleep(0.01)
        await ws.send(P.encode_json({"type": "done", "acked": sess.next_sample, "audio_s": (sess.next_sample - sess.base) / P.SR,
                                     "stages": sess.pipe.stage_stats()}))
        await ws.close(1000, "done")

    async def _sender(self, ws, sess: Session) -> None:
        while True:
            data = await sess.outbox.get()
            if sess.overflow:
                await self._error(ws, "slow_client", "the client does not read fast enough", True)
                return
            await ws.send(data)

    async def _heartbeat(self, ws, sess: Session) -> None:
        while True:
            await ws.send(P.encode_json({"type": "hb", "t": round(time.monotonic() - sess.t0, 3),
                                         "acked": sess.acked, "received": sess.next_sample}))
            await asyncio.sleep(P.HEARTBEAT_S)


def cmd_serve(args) -> int:
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    tokens = load_tokens(args.tokens)
    if bool(args.cert) != bool(args.key):
        raise UserError("--cert and --key go together")
    ctx = tls_context(args.cert, args.key) if args.cert else None
    if ctx is None and args.host not in LOOPBACK:
        raise UserError(f"without --cert/--key relay serve listens on loopback only, not {args.host}")
    if not 0 <= args.port < 65536:
        raise UserError("--port must be between 0 and 65535")
    batching = os.environ.get("RELAY_SERVE_BATCHING", "on") != "off"
    batcher = MicroBatcher(workers=max(2, min(4, os.cpu_count() or 2)), batching=batching)
    pool = ModelPool(batcher)
    for pair in filter(None, os.environ.get("RELAY_SERVE_PAIRS", "zh-en").split(",")):
        pool.get(pair.strip())
    server = Server(tokens, batcher, pool)
    try:
        asyncio.run(_serve(server, args, ctx))
    except KeyboardInterrupt:
        pass
    finally:
        batcher.close()
    return 0


async def _serve(server: Server, args, ctx) -> None:
    from websockets.asyncio.server import serve

    try:
        srv = await serve(server.handler, args.host, args.port, ssl=ctx, process_request=server.process_request,
                          subprotocols=[P.SUBPROTOCOL], compression=None, max_size=P.MAX_MESSAGE_BYTES,
                          ping_interval=None, open_timeout=5, logger=logging.getLogger("relay.cloud.ws"))
    except OSError as e:
        raise UserError(f"cannot listen on {args.host}:{args.port} ({e.strerror})") from None
    port = srv.sockets[0].getsockname()[1]
    print(f"relay: serving on {'wss' if ctx else 'ws'}://{args.host}:{port}", file=sys.stderr, flush=True)
    async with srv:
        await srv.serve_forever()
