"""Protocol v1 framing: round trips, limits, and fuzzed input that must only ever raise ProtocolError."""

import json
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cloud import protocol as P
from app.cloud.ack import AnswerTracker
from app.cloud.server_auth import token_ok
from app.pipeline.messages import CommittedWords, Segment, TentativeText, Translation
from app.pipeline.protocols import Word


@pytest.mark.parametrize("compress", [False, True])
def test_audio_frames_round_trip_with_their_stamp(compress):
    x = np.sin(np.arange(1600) / 10).astype(np.float32) * 0.5
    fr = P.decode_audio(P.encode_audio(7, 123456789, x, compress))
    assert (fr.seq, fr.first_sample, fr.end_sample) == (7, 123456789, 123456789 + 1600)
    assert np.max(np.abs(fr.samples - x)) < 1e-4


def test_oversized_and_bomb_frames_are_refused():
    big = np.zeros(P.MAX_FRAME_SAMPLES + 1, np.float32)
    with pytest.raises(P.ProtocolError) as e:
        P.decode_audio(P.encode_audio(0, 0, big))
    assert e.value.code == "too_large"
    bomb = P.encode_audio(0, 0, np.zeros(10, np.float32))[:18] + zlib.compress(b"\0" * 10_000_000)
    bomb = bomb[:4] + bytes([P.FLAG_ZLIB]) + bomb[5:]
    with pytest.raises(P.ProtocolError) as e:
        P.decode_audio(bomb)
    assert e.value.code == "too_large"
    with pytest.raises(P.ProtocolError):
        P.decode_client_text('{"type":"hb","pad":"' + "x" * 5000 + '"}')


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_fuzzed_binary_frames_raise_only_protocol_errors(data):
    try:
        fr = P.decode_audio(data)
    except P.ProtocolError:
        return
    assert len(fr.samples) <= P.MAX_FRAME_SAMPLES


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=300),
                 st.dictionaries(st.sampled_from(["type", "v", "pair", "codec", "start_sample", "options", "t"]),
                                 st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10),
                                           st.sampled_from(["hello", "hb", "end", "zh-en", "pcm16"]),
                                           st.dictionaries(st.text(max_size=8), st.integers(), max_size=3)),
                                 max_size=7).map(json.dumps)))  # json.dumps: NaN and Infinity too
def test_fuzzed_control_messages_raise_only_protocol_errors(text):
    try:
        obj = P.decode_client_text(text)
        if obj["type"] == "hello":
            h = P.parse_hello(obj)
            assert h.codec in P.CODECS and h.start_sample >= 0
    except P.ProtocolError as e:
        assert e.code in ("malformed", "too_large", "version", "bad_options")


def test_hello_is_checked():
    ok = P.parse_hello({"type": "hello", "v": 1, "pair": "zh-en", "options": {"beam": 2, "no_tts": True}})
    assert ok.options == {"beam": 2, "no_tts": True} and ok.start_sample == 0
    for bad in ({"type": "hello", "v": 2, "pair": "zh-en"}, {"type": "hello", "v": 1},
                {"type": "hello", "v": 1, "pair": "zh-en", "options": {"beam": "4"}},
                {"type": "hello", "v": 1, "pair": "zh-en", "options": {"rm": True}},
                {"type": "hello", "v": 1, "pair": "zh-en", "start_sample": -1}):
        with pytest.raises(P.ProtocolError):
            P.parse_hello(bad)


def test_events_survive_the_wire_with_times_on_the_session_timeline():
    w = (Word("你好", 0.5, 0.9), Word("世界", 0.9, 1.4))
    seg = Segment(3, w, "pause", True, 2.0, "zh")
    segs = {}
    back = P.wire_to_event(P.event_to_wire(seg, 10.0), 5.0, segs)
    assert back.seq == 3 and back.text == "你好世界" and back.src_start == pytest.approx(10.5)
    segs[3] = back
    tr = Translation(3, "你好世界", "Hello world", 0.5, 1.4, 2.5, False, 2.0, 2.1, seg)
    t2 = P.wire_to_event(P.event_to_wire(tr, 10.0), 6.0, segs)
    assert t2.target == "Hello world" and t2.segment is back and t2.src_end == pytest.approx(11.4)
    cw = P.wire_to_event(P.event_to_wire(CommittedWords(w, (1.0, 1.5), 2.0), 0.0), 9.0, segs)
    assert cw.first_seen_at == pytest.approx((8.0, 8.5))


def test_answer_tracker_acknowledges_only_answered_audio():
    ws = [0]
    a = AnswerTracker(16000, lambda: ws[0])  # this pipeline starts at absolute sample 16000
    w = (Word("a", 0.1, 0.5),)
    a(CommittedWords(w, (0.0,), 0.0))
    a(Segment(0, w, "pause", True, 0.0))
    ws[0] = 32000  # the recogniser moved on, but segment 0 is not translated yet
    a(TentativeText((), "", 0.0))
    assert a.poll() == 16000 and not a.clean
    a(Translation(0, "a", "A", 0.1, 0.5, 0.1, False))
    assert a.clean and a.poll() == 16000 + 32000
    a(TentativeText((Word("b", 2.1, 2.3),), "", 0.0))  # speech in flight: hold the point
    ws[0] = 48000
    assert a.poll() == 48000


def test_tokens_compare_exactly():
    toks = [b"alpha-123456", b"beta-1234567"]
    assert token_ok("beta-1234567", toks)
    assert not token_ok("beta-123456", toks) and not token_ok(None, toks) and not token_ok("", toks)


def test_token_bucket_limits_the_rate():
    b = P.TokenBucket(10, 5, now=0.0)
    assert sum(b.take(0.0) for _ in range(20)) == 5
    assert b.take(0.1) and not b.take(0.1)


def test_a_bool_is_not_a_number_in_hello_options():
    ok = P.parse_hello({"type": "hello", "v": 1, "pair": "zh-en", "options": {"beam": None, "eager": None}})
    assert ok.options == {"beam": None, "eager": None}  # null: the language's default
    for opt in ({"beam": True}, {"eager": False}, {"asr_step": True}):
        with pytest.raises(P.ProtocolError):
            P.parse_hello({"type": "hello", "v": 1, "pair": "zh-en", "options": opt})
