"""Server-side limits without a network: settings, the message budget, refusal throttling, tokens,
hello bounds, strict JSON, and a session's event numbering and audio intake (fake pipeline)."""

import asyncio
import json
import logging
import os
import stat

import numpy as np
import pytest

from app.cloud import protocol as P
from app.cloud.batching import Item, MicroBatcher, SessionTranslator, batch_engine
from app.cloud.limits import (FrameLimiter, LogLimiter, PeerThrottle, ServerLimits, SessionCounter,
                              check_hello_options)
from app.cloud.server_auth import MIN_TOKEN_CHARS, bearer, load_tokens, token_index
from app.cloud.server_session import PUSH_SAMPLES, Session
from app.cloud.views import mt_view
from app.core.errors import UserError
from app.pipeline.engine import EventBus, SessionRecord
from app.pipeline.messages import DubChunk, Metric, Segment
from app.pipeline.protocols import Word

TOKEN = "x" * MIN_TOKEN_CHARS


# -- settings ----------------------------------------------------------------------------------

def test_limits_come_from_flags_over_the_environment_over_defaults():
    class Args:
        max_sessions = 5
        send_timeout_s = None

    env = {"RELAY_SERVE_MAX_SESSIONS": "7", "RELAY_SERVE_SEND_TIMEOUT_S": "2.5", "RELAY_SERVE_LAZY_PAIRS": "1",
           "RELAY_SERVE_PAIRS": "zh-en, en-en"}
    lim = ServerLimits.from_settings(Args(), env)
    assert lim.max_sessions == 5 and lim.send_timeout_s == 2.5 and lim.lazy_pairs is True
    assert lim.pair_list == ["zh-en", "en-en"] and lim.frames_per_s == ServerLimits().frames_per_s
    with pytest.raises(UserError, match="RELAY_SERVE_MAX_BEAM"):
        ServerLimits.from_settings(None, {"RELAY_SERVE_MAX_BEAM": "lots"})
    with pytest.raises(UserError, match="above 0"):
        ServerLimits.from_settings(None, {"RELAY_SERVE_SEND_TIMEOUT_S": "nan"})


def test_the_finals_translator_is_a_server_setting():
    class Args:
        final_mt = "qwen-0.5b"
        final_mt_budget = None

    lim = ServerLimits.from_settings(Args(), {"RELAY_SERVE_FINAL_MT": "opus", "RELAY_SERVE_FINAL_MT_BUDGET": "4"})
    assert (lim.final_mt, lim.final_mt_budget) == ("qwen-0.5b", 4.0)
    assert (ServerLimits().final_mt, ServerLimits().final_mt_budget) == ("auto", 1.5)
    with pytest.raises(UserError, match="final-mt must be one of auto, opus"):
        ServerLimits.from_settings(None, {"RELAY_SERVE_FINAL_MT": "gpt-9"})
    for bad in ("0", "-1", "61", "inf"):
        with pytest.raises(UserError, match="final-mt-budget"):
            ServerLimits.from_settings(None, {"RELAY_SERVE_FINAL_MT_BUDGET": bad})


def test_hello_bounds_are_protocol_errors():
    lim = ServerLimits()
    check_hello_options({"beam": 4, "asr_step": 0.5}, lim)
    for opts in ({"beam": 1_000_000}, {"beam": 0}, {"asr_step": 0.01}, {"asr_step": 50}):
        with pytest.raises(P.ProtocolError) as e:
            check_hello_options(opts, lim)
        assert e.value.code == "bad_options"
    hello = {"type": "hello", "v": 1, "pair": "zh-en"}
    for opts, code in (({"speculative": "sometimes"}, "bad_options"), ({"policy": "maybe"}, "bad_options"),
                       ({"preview": 3}, "malformed"), ({"asr_step": float("inf")}, "bad_options"),
                       ({"eager": 10 ** 30}, "bad_options")):
        with pytest.raises(P.ProtocolError) as e:
            P.parse_hello({**hello, "options": opts})
        assert e.value.code == code, opts
    huge = P.decode_client_text('{"type":"hello","v":1,"pair":"zh-en","start_sample":' + "9" * 4000 + "}")
    with pytest.raises(P.ProtocolError) as e:  # was an OverflowError deep in the session
        P.parse_hello(huge)
    assert e.value.code == "malformed"
    for pair in ("ZH-EN", "zh-en-x", "../../x", "zh_en"):
        with pytest.raises(P.ProtocolError):
            P.parse_hello({**hello, "pair": pair})


def test_non_finite_numbers_are_refused_and_never_sent():
    for text in ('{"type":"hb","t":NaN}', '{"type":"hb","t":Infinity}', '{"type":"hb","t":-Infinity}',
                 '{"type":"hb","t":1e999}', '{"type":"hb","t":true}'):
        with pytest.raises(P.ProtocolError) as e:
            P.decode_client_text(text)
        assert e.value.code == "malformed", text
    assert P.decode_client_text('{"type":"hb","t":1.25}')["t"] == 1.25
    with pytest.raises(ValueError):
        P.encode_json({"type": "pong", "t": float("nan")})


# -- the message budget -------------------------------------------------------------------------

def test_a_budget_slows_a_fast_client_and_closes_a_flood():
    lim = ServerLimits(frames_per_s=100, bytes_per_s=1e6, burst_s=1.0, flood_s=1.0)
    f = FrameLimiter(lim, now=0.0)
    assert all(f.charge(0.0, 1, 10) == 0 for _ in range(100))  # the burst
    wait = f.charge(0.0, 1, 10)
    assert wait == pytest.approx(0.01)
    # a fast client whose frames carry audio is slowed down, never closed
    t = 0.0
    for _ in range(1000):
        t += f.charge(t, 1, 640)
        f.account(t, 0.01, 320)
    assert t == pytest.approx(10.0, rel=0.05)
    # near-empty frames at the same pace are a flood: closed within about 2 x flood_s
    g = FrameLimiter(lim, now=0.0)
    for _ in range(100):
        g.charge(0.0, 1, 10)
    t, closed_at = 0.0, None
    for _ in range(1000):
        w = g.charge(t, 1, 80)
        t += w
        try:
            g.account(t, w, 1)
        except P.ProtocolError as e:
            assert e.code == "rate"
            closed_at = t
            break
    assert closed_at is not None and closed_at < 3.0


def test_refusals_are_throttled_per_peer_and_logged_sparingly(caplog):
    th = PeerThrottle(limit=3, window_s=60, max_peers=2)
    for _ in range(3):
        assert not th.blocked("a", 0.0)
        th.refused("a", 0.0)
    assert th.blocked("a", 1.0) and not th.blocked("b", 1.0)
    assert not th.blocked("a", 61.0)  # aged out
    th.refused("b", 2.0)
    th.refused("c", 2.0)
    th.refused("d", 2.0)
    assert len(th._peers) <= 2  # bounded however many addresses knock
    logger = logging.getLogger("test.loglimit")
    ll = LogLimiter(logger, interval_s=10)
    with caplog.at_level(logging.INFO, logger="test.loglimit"):
        sent = [ll.log(logging.WARNING, "refused", t * 0.1, "refused %s", "a") for t in range(50)]
        ll.log(logging.WARNING, "refused", 20.0, "refused %s", "a")
    assert sum(sent) == 1
    assert len(caplog.records) == 2 and "49 similar held back" in caplog.records[-1].getMessage()


def test_session_counts_per_token_and_in_all():
    c = SessionCounter(ServerLimits(max_sessions=3, max_sessions_per_token=2))
    assert c.acquire(0) is None and c.acquire(0) is None
    assert "token" in c.acquire(0)
    assert c.acquire(1) is None
    assert "full" in c.acquire(2)
    c.release(0)
    assert c.acquire(2) is None


# -- tokens ---------------------------------------------------------------------------------------

def test_tokens_file_must_be_private_and_tokens_long(tmp_path):
    f = tmp_path / "tokens"
    f.write_text(f"# comment\n{TOKEN}\n{'y' * 20}\n")
    f.chmod(0o644)
    with pytest.raises(UserError, match="chmod 600"):
        load_tokens(str(f), {})
    f.chmod(0o600)
    assert load_tokens(str(f), {}) == [TOKEN.encode(), b"y" * 20]
    f.write_text("short-token-123\n")  # 15 characters
    with pytest.raises(UserError, match=f"at least {MIN_TOKEN_CHARS}"):
        load_tokens(str(f), {})
    assert load_tokens(None, {"RELAY_TOKENS": f"{TOKEN}, {'z' * 16}\n"}) == [TOKEN.encode(), b"z" * 16]
    with pytest.raises(UserError, match="RELAY_TOKENS"):
        load_tokens(None, {})
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o600


def test_authorization_header_must_be_single():
    from websockets.datastructures import Headers

    h = Headers()
    h["Authorization"] = f"Bearer {TOKEN}"
    assert bearer(h) == (TOKEN, None)
    h["Authorization"] = f"Bearer {TOKEN}"  # a second one
    token, why = bearer(h)
    assert token is None and "one Authorization header" in why
    assert token_index(TOKEN, [b"a" * 16, TOKEN.encode()]) == 1 and token_index("nope", [TOKEN.encode()]) is None


# -- translation memory is per session ----------------------------------------------------------

class FakeCT2:
    """The parts of CT2Translator the batcher and the views touch."""

    def __init__(self):
        import collections
        import threading

        self._recent = collections.OrderedDict()
        self._lock = threading.Lock()
        self.name, self.beam_size = "fake", 1

    def translate(self, source, target_prefix="", beam_size=None):
        with self._lock:
            self._recent[source.upper()] = [source]
            return source.upper()


def test_each_session_has_its_own_translation_memory():
    shared = FakeCT2()
    a, b = mt_view(shared), mt_view(shared)
    assert a._lock is shared._lock and a._recent is not b._recent is not shared._recent
    batcher = MicroBatcher(workers=1)
    batcher.add_direction("zh-en", batch_engine(shared))
    batcher.open_session("zh-en")
    assert SessionTranslator(batcher, "zh-en", a).translate("hello") == "HELLO"
    batcher.close()
    assert list(a._recent) == ["HELLO"] and not b._recent and not shared._recent
    assert Item("s", "p", 1).memory is None


# -- a session's numbering and intake (fake pipeline) ---------------------------------------------

class FakeStage:
    window_start = 0


class FakePipe:
    def __init__(self):
        self.bus = EventBus()
        self.record = SessionRecord()
        self.bus.subscribe(self.record)
        self.asr_stage = FakeStage()
        self.pushed: list[int] = []

    def push_audio(self, samples, wait_if_full=False, at=None):
        self.pushed.append(len(samples))


def make_session(loop, limits=None, realtime=True):
    fatal = []
    hello = P.Hello("zh-en", "pcm16", 0, {})
    s = Session("s1", hello, FakePipe(), realtime, 0, limits or ServerLimits(), loop, lambda c, m: fatal.append(c))
    return s, fatal


def drain(loop, s) -> list:
    loop.run_until_complete(asyncio.sleep(0.01))
    out = []
    while len(s.outbox):
        out.append(loop.run_until_complete(s.outbox.get()))
    return out


def test_event_numbers_never_skip_when_an_event_cannot_be_encoded():
    loop = asyncio.new_event_loop()
    s, _ = make_session(loop)
    w = (Word("你好", 0.1, 0.5),)
    s.pipe.bus.publish(Segment(0, w, "pause", True, 1.0, "zh"))
    s.pipe.bus.publish(Metric("lag", float("nan"), 1.0))  # not JSON: never numbered, never sent
    s.pipe.bus.publish(DubChunk(0, None, 22050, "hi", 1.0, 1.0, True, 0.5))  # cannot encode
    s.pipe.bus.publish(Metric("lag", 0.5, 1.0))
    s.pipe.bus.publish(DubChunk(0, np.zeros(100, np.float32), 22050, "hi", 1.0, 1.0, True, 0.5))
    msgs = drain(loop, s)
    numbers = [json.loads(m)["n"] if isinstance(m, str) else P.decode_dub(m)[0] for m in msgs]
    assert numbers == [1, 2, 3]
    assert all("NaN" not in m for m in msgs if isinstance(m, str))
    assert s.pipe.record.keep_dub_audio is False and not s.pipe.record.dub  # server sessions keep no dub
    loop.close()


def test_a_full_outbox_closes_the_session_instead_of_dropping_committed_text():
    loop = asyncio.new_event_loop()
    s, fatal = make_session(loop, ServerLimits(outbox_items=10, outbox_soft=5))
    w = (Word("a", 0.1, 0.5),)
    for i in range(12):
        s.pipe.bus.publish(Segment(i, w, "pause", True, 1.0, "zh"))
    loop.run_until_complete(asyncio.sleep(0.01))
    assert fatal == ["slow_client"] and s.outbox.closed and len(s.outbox) == 0
    loop.close()


def test_tiny_frames_reach_the_pipeline_in_capture_blocks_and_replays_are_refused():
    loop = asyncio.new_event_loop()
    s, _ = make_session(loop, realtime=False)
    for i in range(1000):  # one sample a frame
        assert s.accept_audio(P.AudioFrame(i, i, np.zeros(1, np.float32)), 0.0) == 1
    assert s.pipe.pushed and min(s.pipe.pushed) >= PUSH_SAMPLES and sum(s.pipe.pushed) <= 1000
    assert len(s.frame_starts) <= 1000 // PUSH_SAMPLES + 1
    with pytest.raises(P.ProtocolError) as e:  # wholly received already
        s.accept_audio(P.AudioFrame(1000, 500, np.zeros(100, np.float32)), 0.0)
    assert e.value.code == "overlap"
    assert s.accept_audio(P.AudioFrame(1001, 990, np.zeros(20, np.float32)), 0.0) == 10  # partly: trimmed
    s.flush()
    assert sum(s.pipe.pushed) == 1010
    loop.close()
