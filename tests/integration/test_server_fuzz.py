"""A seeded fuzz of a few thousand client frames against a real server in this process: the
server stays up, logs no traceback, answers every refusal with a protocol error frame, and ends a
session only with a fatal error frame and a clean close (1000/1008)."""

import json
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cloud import protocol as P

from .test_server_abuse import Running, shared, tracebacks  # noqa: F401 (fixtures)

pytestmark = pytest.mark.models
CODES = {"malformed", "too_large", "version", "sequence", "gap", "overlap", "rate", "timeout", "pair",
         "bad_options", "slow_client", "busy", "server"}


def audio_frame(seq: int, first: int, n: int, compress: bool, flags: int) -> bytes:
    data = P.encode_audio(seq, first, np.zeros(n, np.float32), compress)
    return data[:4] + bytes([flags]) + data[5:] if flags else data


numbers = st.one_of(st.integers(-10, 10 ** 6), st.floats(allow_nan=False, allow_infinity=False),
                    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "9" * 400]))
frames = st.one_of(
    st.binary(max_size=64),
    st.binary(max_size=48).map(lambda b: P.AUDIO_MAGIC + b),
    st.builds(audio_frame, st.integers(0, 2 ** 32 - 1), st.integers(0, 2 ** 40), st.integers(1, 400),
              st.booleans(), st.sampled_from([0, 0, 0, 2, 3, 255])),
    st.text(max_size=60),
    st.builds(lambda t, v: '{"type":"%s","t":%s}' % (t, v), st.sampled_from(["hb", "hello", "end", "x"]),
              numbers.map(str)),
    st.fixed_dictionaries({"type": st.sampled_from(["hello", "hb"]), "v": st.integers(0, 2),
                           "pair": st.sampled_from(["zh-en", "en-en", "x"]),
                           "options": st.dictionaries(st.sampled_from(["beam", "eager", "speculative", "asr_step"]),
                                                      st.one_of(st.integers(), st.text(max_size=5)), max_size=2)}
                          ).map(json.dumps),
)


class Fuzz:
    srv = None
    ws = None
    sent = 0
    refusals = 0
    closes: list = []


def fresh_session():
    if Fuzz.ws is None:
        Fuzz.ws = Fuzz.srv.session()
    return Fuzz.ws


@pytest.fixture(scope="module")
def fuzz_server(shared):  # noqa: F811
    # many errors per session, so that one session takes many frames
    Fuzz.srv = Running(shared, max_errors=400, frames_per_s=5000)
    yield Fuzz.srv
    if Fuzz.ws is not None:
        Fuzz.ws.close()
    Fuzz.srv.stop()


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(batch=st.lists(frames, min_size=100, max_size=100))
def test_fuzzed_frames_get_protocol_error_frames_and_never_a_crash(fuzz_server, tracebacks, batch):  # noqa: F811
    from websockets.exceptions import ConnectionClosed

    ws = fresh_session()
    try:
        for msg in batch:
            ws.send(msg)
            Fuzz.sent += 1
        ws.send(P.encode_json({"type": "hb", "t": 7.5}))
        end = time.monotonic() + 30
        while time.monotonic() < end:
            m = ws.recv(timeout=30)
            if isinstance(m, bytes):
                continue
            d = json.loads(m)  # the server's JSON is always strict JSON
            assert d["type"] in ("error", "hb", "ev", "pong", "done"), d
            if d["type"] == "error":
                assert d["code"] in CODES, d
                Fuzz.refusals += 1
            if d["type"] == "pong" and d["t"] == 7.5:
                break
    except ConnectionClosed as e:  # a session closed by the server: clean, after a fatal error frame
        assert e.rcvd is not None and e.rcvd.code in (1000, 1008), e
        Fuzz.closes.append(e.rcvd.reason)
        Fuzz.ws = None
    assert fuzz_server.thread.is_alive()


def test_the_fuzz_ran_and_the_server_is_still_healthy(fuzz_server, tracebacks):  # noqa: F811
    assert Fuzz.sent >= 2000 and Fuzz.refusals > 100, (Fuzz.sent, Fuzz.refusals)
    ws = fuzz_server.session()
    ws.send(P.encode_json({"type": "hb", "t": 1.0}))
    while json.loads(ws.recv(timeout=10))["type"] != "pong":
        pass
    ws.close()
