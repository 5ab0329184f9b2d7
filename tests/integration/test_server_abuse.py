"""`relay serve` under abuse, driven in this process on loopback (real models, real TLS 1.3):
sessions that end in every wrong way release every thread and pipeline, a flood or a client
that stops reading is closed with its error code while a healthy session goes on, bad hellos
and headers get clear refusals, and the server shuts down within its deadline."""

import asyncio
import gc
import json
import logging
import os
import socket
import ssl
import threading
import time

import numpy as np
import pytest

from app.cloud import protocol as P
from app.cloud.batching import MicroBatcher
from app.cloud.limits import ServerLimits
from app.cloud.server import Server
from app.cloud.server_auth import tls_context
from app.cloud.server_pool import ModelPool
from app.core import memory

from ..certs import make_cert

pytestmark = pytest.mark.models
# what cmd_serve sets (see there): effective when this process has not loaded CTranslate2 yet
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
TOKEN = "abuse-test-token-0123456789"
OTHER = "abuse-other-token-abcdefgh"


class Running:
    """A Server on an ephemeral loopback port, its loop on a thread of this process."""

    def __init__(self, shared, **limits):
        self.cert, key, self.pool, self.batcher = shared
        # the handshake deadline as long as the clients' own (connect below): on a loaded 2-core
        # machine a handshake beside a session that is starting once took over 10 s, and the
        # server's default deadline dropped it before the limit under test was reached
        limits.setdefault("hello_timeout_s", 30.0)
        self.server = Server([TOKEN.encode(), OTHER.encode()], self.batcher, self.pool, ServerLimits(**limits))
        ready, port = threading.Event(), []

        def main():
            asyncio.run(self.server.run("127.0.0.1", 0, tls_context(self.cert, key),
                                        lambda p: (port.append(p), ready.set())))

        self.thread = threading.Thread(target=main, name="test-server", daemon=True)
        self.thread.start()
        assert ready.wait(30)
        self.port = port[0]
        self.url = f"wss://127.0.0.1:{self.port}"

    def ctx(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.cert)

    def connect(self, token=TOKEN, **kw):
        from websockets.sync.client import connect

        kw.setdefault("open_timeout", 30)  # a loaded 2-core CI machine once took over 10 s to answer
        ws = connect(self.url, ssl=self.ctx(), additional_headers={"Authorization": f"Bearer {token}"},
                     subprotocols=[P.SUBPROTOCOL], compression=None, max_size=None,
                     ping_interval=None, **kw)
        return ws.__enter__()

    def session(self, options=None, token=TOKEN, **kw):
        ws = self.connect(token, **kw)
        ws.send(P.encode_json({"type": "hello", "v": 1, "pair": "zh-en",
                               "options": {"no_tts": True, **(options or {})}}))
        m = json.loads(ws.recv(timeout=30))
        assert m["type"] == "welcome", m
        return ws

    def on_loop(self, fn, *args):
        self.server._loop.call_soon_threadsafe(fn, *args)

    def wait_idle(self, timeout=60.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not self.server.sessions and self.server.counter.total == 0 and not self.server._links:
                return
            time.sleep(0.05)
        raise AssertionError(f"sessions left open: {len(self.server.sessions)}")

    def stop(self, timeout=10.0) -> float:
        t = time.monotonic()
        self.server.stop()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the server did not stop"
        return time.monotonic() - t


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    cert, key = make_cert(tmp_path_factory.mktemp("abuse"))
    batcher = MicroBatcher(workers=2)
    pool = ModelPool(batcher)
    pool.load("zh-en")
    yield cert, key, pool, batcher
    batcher.close()


@pytest.fixture
def tracebacks(caplog):
    """Every log record of the test; the test fails if any carries a traceback."""
    caplog.set_level(logging.INFO)
    yield caplog
    bad = [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    assert not bad, [r.getMessage() for r in bad]


SPEECH = None


def speech() -> np.ndarray:
    global SPEECH
    if SPEECH is None:
        from app.audio.files import load_audio

        from .conftest import DATA

        SPEECH = load_audio(str(DATA / "zh_03.wav"))
    return SPEECH


def feed(ws, seconds=1.0, compress=False) -> None:
    a = speech()[: int(seconds * P.SR)]
    for seq, off in enumerate(range(0, len(a), 8000)):
        ws.send(P.encode_audio(seq, off, a[off:off + 8000], compress))


async def killed_sessions(srv, n: int, start: int = 0) -> None:
    """``n`` sessions that each send a second of audio and end a wrong way, in turn: closed
    without `end`, killed (the TCP connection dropped, no close frame), killed right after
    `end`; one in ten is killed before its welcome. On an asyncio client: its connection is dropped on the thread that reads it (a
    websockets.sync client's socket closed under its reading thread lets OpenSSL touch a file
    descriptor that the next connection may already reuse)."""
    from websockets.asyncio.client import connect

    a = speech()[:P.SR]
    for i in range(start, start + n):
        ws = await connect(srv.url, ssl=srv.ctx(), additional_headers={"Authorization": f"Bearer {TOKEN}"},
                           subprotocols=[P.SUBPROTOCOL], compression=None, ping_interval=None, max_size=None)
        await ws.send(P.encode_json({"type": "hello", "v": 1, "pair": "zh-en",
                                     "options": {"no_tts": True, "realtime": False}}))
        if i % 10 == 9:  # gone before its welcome: the server's pipeline is built for nobody
            ws.transport.abort()
            continue
        welcome = json.loads(await ws.recv())
        assert welcome["type"] == "welcome", welcome
        for seq, off in enumerate(range(0, len(a), 8000)):
            await ws.send(P.encode_audio(seq, off, a[off:off + 8000], compress=i % 2 == 0))
        if i % 3 == 0:
            await ws.close()
            continue
        if i % 3 == 2:
            await ws.send(P.encode_json({"type": "end"}))
        ws.transport.abort()


def server_threads() -> list[str]:
    """This process's threads but the test clients' own (websockets.sync reader threads)."""
    return sorted(t.name for t in threading.enumerate() if not t.name.endswith(("(recv_events)", "(keepalive)")))


def read_until(ws, pred, timeout=10.0) -> list:
    seen, end = [], time.monotonic() + timeout
    while time.monotonic() < end:
        m = ws.recv(timeout=max(0.01, end - time.monotonic()))
        if isinstance(m, str):
            d = json.loads(m)
            seen.append(d)
            if pred(d):
                return seen
    raise AssertionError(f"not seen; got {[d.get('type') for d in seen][-20:]}")


def fatal_error(ws, timeout=15.0) -> dict:
    from websockets.exceptions import ConnectionClosed

    try:
        return read_until(ws, lambda d: d["type"] == "error" and d["fatal"], timeout)[-1]
    except ConnectionClosed as e:
        raise AssertionError(f"closed without a fatal error frame: {e}") from None


def live_pipelines() -> int:
    from app.pipeline.engine import StreamingPipeline

    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is StreamingPipeline)


def rss_mb() -> float:
    import psutil

    gc.collect()
    memory.trim()
    return psutil.Process().memory_info().rss / 2 ** 20


def test_sessions_ended_every_wrong_way_release_threads_and_pipelines(shared, tracebacks):
    srv = Running(shared, max_sessions=64, max_sessions_per_token=64)
    try:
        for _ in range(3):  # warm: every lazily created object exists before the baseline
            ws = srv.session({"realtime": False})
            feed(ws)
            ws.close()
        # and sessions ended the same wrong ways: their first round can grow the process by more
        # than the bound (likely the allocator's arenas for threads torn down mid-decode; not
        # proven), which a second round does not; a leak grows with every round
        # (measured: +86-98 MB over a baseline taken after clean sessions only, in 2 of 11 runs)
        asyncio.run(killed_sessions(srv, 20))
        srv.wait_idle()
        threads0, rss0, pipes0 = server_threads(), rss_mb(), live_pipelines()
        asyncio.run(killed_sessions(srv, 50))
        srv.wait_idle()
        time.sleep(0.5)
        threads1, rss1, pipes1 = server_threads(), rss_mb(), live_pipelines()
        assert len(threads1) <= len(threads0), threads1
        assert pipes1 <= pipes0, "pipelines of closed sessions are still alive"
        assert rss1 <= rss0 * 1.05 + 10, (rss0, rss1)
        ws = srv.session()  # and the server still serves
        ws.close()
    finally:
        srv.stop()


def test_graceful_shutdown_with_sessions_open_is_prompt(shared, tracebacks):
    srv = Running(shared)
    threads0 = len(server_threads())
    busy = [srv.session({"realtime": False}) for _ in range(2)]
    for ws in busy:
        feed(ws, 2.0)
    asyncio.run(killed_sessions(srv, 1, start=2))  # `end` and gone: used to keep shutdown waiting forever
    silent = srv.session(max_queue=1)  # never reads
    time.sleep(0.5)
    took = srv.stop()
    assert took < 5.0, took
    for ws in busy:
        assert fatal_error(ws)["code"] == "shutdown"
    time.sleep(0.5)
    assert len(server_threads()) <= threads0, server_threads()
    silent.close()


def test_a_flood_is_closed_with_rate_while_a_healthy_session_goes_on(shared, tracebacks):
    from websockets.exceptions import ConnectionClosed

    srv = Running(shared, frames_per_s=200, burst_s=1.0, flood_s=1.0)
    try:
        healthy = srv.session()
        flood = srv.session()
        errors, error_at, stop = [], [], threading.Event()

        def flooder():  # valid, contiguous, one sample a frame: only the budget can stop it
            try:
                for i in range(200_000):
                    if stop.is_set():
                        return
                    flood.send(P.encode_audio(i, i, np.zeros(1, np.float32), compress=True))
            except (ConnectionClosed, OSError):
                pass

        def reader():
            try:
                for m in flood:
                    if isinstance(m, str) and json.loads(m)["type"] == "error":
                        errors.append(json.loads(m))
                        error_at.append(time.monotonic())
            except ConnectionClosed:
                pass

        threads = [threading.Thread(target=f, daemon=True) for f in (flooder, reader)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        rtts = []
        while time.monotonic() - t0 < 20 and threads[1].is_alive():
            s = time.monotonic()
            healthy.send(P.encode_json({"type": "hb", "t": 1.0}))
            read_until(healthy, lambda d: d["type"] == "pong")
            rtts.append(time.monotonic() - s)
            time.sleep(P.HEARTBEAT_S)  # a client's heartbeat pace
        took = time.monotonic() - t0
        stop.set()
        for t in threads:
            t.join(10)
        assert errors and errors[-1]["code"] == "rate" and errors[-1]["fatal"], errors
        # the rate error comes within the 20 s the healthy session is watched (10 s here, 12.4 s
        # once on a loaded 2-core machine, where the flooder itself sends slower); the close
        # after it can take longer
        assert error_at[0] - t0 < 20, (error_at[0] - t0, took)
        assert srv.server.closed_with.get("rate") == 1
        read_until(healthy, lambda d: d["type"] == "hb")  # still served
        assert np.median(rtts) < 0.25, rtts
        healthy.close()
    finally:
        srv.stop()


def test_a_client_that_never_reads_is_closed_within_the_send_timeout(shared, tracebacks):
    from websockets.exceptions import InvalidMessage

    srv = Running(shared, send_timeout_s=1.0, send_buffer=16 << 10, outbox_bytes=256 << 20)
    try:
        silent = None
        for attempt in range(2):  # the handshake is not what this test is about: a loaded CI box may drop one
            sock = socket.create_connection(("127.0.0.1", srv.port))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            try:
                silent = srv.session(sock=sock, max_queue=1)
                break
            except InvalidMessage:
                sock.close()
                if attempt:
                    raise
        sess = next(iter(srv.server.sessions.values()))
        blob = b"\0" * (256 << 10)
        t0 = time.monotonic()
        for _ in range(64):  # 16 MiB of dub frames on their way to a client that reads nothing
            srv.on_loop(sess.outbox.put_event, True, lambda n: blob)
        while srv.server.sessions and time.monotonic() - t0 < 15:
            silent.send(P.encode_json({"type": "hb", "t": 1.0}))  # alive, just not reading
            time.sleep(0.1)
        took = time.monotonic() - t0
        assert not srv.server.sessions and srv.server.closed_with.get("slow_client") == 1
        assert took < 1.0 + 3.0, took  # the send timeout, plus filling the buffers on the way
        srv.wait_idle()
    finally:
        srv.stop()


def test_bad_hellos_get_error_frames(shared, tracebacks):

    srv = Running(shared)
    try:
        cases = [({"beam": 1_000_000}, "bad_options"), ({"speculative": "sometimes"}, "bad_options"),
                 ({"asr_step": 0.01}, "bad_options"), ({"eager": -5}, "bad_options")]
        for options, code in cases:
            ws = srv.connect()
            ws.send(P.encode_json({"type": "hello", "v": 1, "pair": "zh-en", "options": options}))
            assert fatal_error(ws)["code"] == code, options
        for raw, code in (('{"type":"hello","v":1,"pair":"zh-en","start_sample":' + "7" * 4000 + "}", "malformed"),
                          ('{"type":"hello","v":1,"pair":"en-en"}', "pair"),
                          ('{"type":"hello","v":1,"pair":"zh-en","options":{"beam":NaN}}', "malformed")):
            ws = srv.connect()
            ws.send(raw)
            e = refused(ws)
            assert e["code"] == code and ("not served" in e["message"] or code != "pair"), e
        srv.wait_idle()
    finally:
        srv.stop()


def refused(ws) -> dict:
    """The fatal error a refused hello gets, after which the server closes with 1008."""
    from websockets.exceptions import ConnectionClosed

    e = fatal_error(ws)
    with pytest.raises(ConnectionClosed) as closed:
        ws.recv(timeout=5)
    assert closed.value.rcvd.code == 1008
    return e


def test_the_profanity_setting_is_granted_applied_and_a_bad_value_refused(shared, tracebacks):
    """Feature "profanity": a client that asks gets it in its welcome and its session's pipeline
    filters as asked; one that predates it gets the text as before; a bad value is refused."""

    srv = Running(shared)
    try:
        for extra, granted, shown in (({"features": ["profanity"], "profanity": "removed"}, True, "a day."),
                                      ({"features": ["profanity"]}, True, "a f****** day."),
                                      ({}, False, "a fucking day.")):
            ws = srv.connect()
            ws.send(P.encode_json({"type": "hello", "v": 1, "pair": "zh-en", "options": {"no_tts": True}, **extra}))
            m = json.loads(ws.recv(timeout=30))
            assert m["type"] == "welcome" and ("profanity" in m.get("features", [])) == granted, m
            (sess,) = srv.server.sessions.values()
            assert sess.pipe.shown.target_text("a fucking day.") == shown
            ws.close()
            srv.wait_idle()
        ws = srv.connect()
        ws.send(P.encode_json({"type": "hello", "v": 1, "pair": "zh-en", "features": ["profanity"],
                               "profanity": "bleep"}))
        e = refused(ws)
        assert e["code"] == "bad_options" and "profanity" in e["message"], e
        srv.wait_idle()
    finally:
        srv.stop()


def test_nan_heartbeat_and_replayed_audio_are_refused(shared, tracebacks):
    srv = Running(shared)
    try:
        ws = srv.session()
        for raw in ('{"type":"hb","t":NaN}', '{"type":"hb","t":Infinity}', '{"type":"hb","t":1e999}'):
            ws.send(raw)
            e = read_until(ws, lambda d: d["type"] in ("error", "pong"))[-1]
            assert e["type"] == "error" and e["code"] == "malformed" and not e["fatal"]
        ws.send(P.encode_audio(0, 0, np.zeros(1600, np.float32)))
        ws.send(P.encode_audio(1, 0, np.zeros(1600, np.float32)))  # the same audio again
        e = read_until(ws, lambda d: d["type"] == "error")[-1]
        assert e["code"] == "overlap" and not e["fatal"]
        ws.close()
    finally:
        srv.stop()


def test_session_limits_and_duplicate_authorization(shared, tracebacks):
    from websockets.exceptions import ConnectionClosed

    srv = Running(shared, max_sessions=2, max_sessions_per_token=1)
    try:
        a = srv.session()
        second = srv.connect()  # the same token again
        try:  # the server refuses it on connect: its error and close may come before this hello goes
            second.send(P.encode_json({"type": "hello", "v": 1, "pair": "zh-en", "options": {"no_tts": True}}))
        except ConnectionClosed:
            pass
        assert fatal_error(second)["code"] == "busy"
        b = srv.session(token=OTHER)
        third = srv.connect(token=OTHER)
        assert fatal_error(third)["code"] == "busy"
        a.close()
        b.close()
        srv.wait_idle()
        raw = socket.create_connection(("127.0.0.1", srv.port))
        tls = srv.ctx().wrap_socket(raw, server_hostname="127.0.0.1")
        tls.sendall((f"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                     f"Sec-WebSocket-Protocol: relay.v1\r\nAuthorization: Bearer {TOKEN}\r\n"
                     f"Authorization: Bearer {OTHER}\r\n\r\n").encode())
        status = tls.recv(200).split(b"\r\n")[0]
        tls.close()
        assert status.startswith(b"HTTP/1.1 400"), status
    finally:
        srv.stop()


def test_refused_peers_are_throttled(shared, tracebacks):
    from websockets.exceptions import InvalidStatus

    srv = Running(shared, refusals_per_min=3)
    try:
        codes = []
        for token in ["wrong-token-0123456789"] * 4 + [TOKEN]:
            try:
                srv.connect(token).close()
                codes.append(101)
            except InvalidStatus as e:
                codes.append(e.response.status_code)
        assert codes == [401, 401, 401, 429, 429]
        refusals = [r for r in tracebacks.records if "refus" in r.getMessage()]
        assert len(refusals) <= 2  # one line per kind within the log interval
    finally:
        srv.stop()


def test_blocking_work_has_its_own_pools(shared, tracebacks):
    srv = Running(shared)
    try:
        release = threading.Event()
        for pool in (srv.server.ex.load, srv.server.ex.decode):  # a model load that takes forever
            pool.submit(release.wait, 30)
        ws = srv.session({"realtime": False})
        feed(ws, 1.0)
        ws.send(P.encode_json({"type": "end"}))
        read_until(ws, lambda d: d["type"] == "done", timeout=30)
        release.set()
        ws.close()
        names = set()
        orig = P.decode_audio

        def spy(data):
            names.add(threading.current_thread().name.split("_")[0])
            return orig(data)

        P.decode_audio = spy
        try:
            ws = srv.session()
            feed(ws, 0.5, compress=True)
            ws.send(P.encode_json({"type": "hb", "t": 1}))
            read_until(ws, lambda d: d["type"] == "pong")
            ws.close()
        finally:
            P.decode_audio = orig
        assert names == {"relay-decode"}  # zlib never runs on the event loop
    finally:
        srv.stop()
