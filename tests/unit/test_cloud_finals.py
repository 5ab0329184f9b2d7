"""Final sentences (the second pass) over the cloud protocol: the wire format, the "final" feature
negotiation, the server's outbox, and the client's delivery and failover (fake pipelines)."""

import asyncio
import json
from types import SimpleNamespace

import numpy as np
import pytest

from app.cloud import failover as F
from app.cloud import protocol as P
from app.cloud.client import CloudClient
from app.cloud.limits import ServerLimits
from app.cloud.server_session import DROPPABLE, Session
from app.core.audio import SR
from app.pipeline.engine import EventBus, SessionRecord
from app.pipeline.messages import DubChunk, FinalSentence, Metric, Segment, Translation
from app.pipeline.protocols import Word
from app.session.options import SessionOptions

W = (Word(" Hello", 0.5, 0.9, 0.8), Word(" world.", 0.9, 1.4, 0.95))


def a_final(**kw):
    f = FinalSentence(4, W, "Hello world.", "Bonjour le monde.", 0.5, 1.4, 10.0, 8.5, (7, 8), "Hello word.",
                      "Bonjour mot.", "mark", False, 9.25, "qwen-1.5b")
    return FinalSentence(**{**f.__dict__, **kw})


# -- wire format -------------------------------------------------------------------------------

def test_a_final_round_trips_with_every_field_and_times_on_the_session_timeline():
    f = a_final()
    d = P.event_to_wire(f, 10.0)
    assert d["k"] == "final" and d["words"] == [[" Hello", 10.5, 10.9, 0.8], [" world.", 10.9, 11.4, 0.95]]
    back = P.wire_to_event(json.loads(P.encode_json(d)), 100.0, {})
    assert isinstance(back, FinalSentence)
    assert (back.id, back.source, back.target, back.covers) == (4, f.source, f.target, (7, 8))
    assert (back.first_source, back.first_target, back.reason, back.failed) == (f.first_source, f.first_target,
                                                                                 "mark", False)
    assert back.words == tuple(Word(w.text, w.start + 10.0, w.end + 10.0, w.probability) for w in W)
    assert back.src_start == pytest.approx(10.5) and back.src_end == pytest.approx(11.4)
    # wall times travel as durations, restamped on the receiver's clock
    assert back.final_at == 100.0 and back.first_shown_at == pytest.approx(98.5)
    assert back.started_at == pytest.approx(99.25)
    assert back.mt == "qwen-1.5b"  # the translator that made it (the server's, in cloud mode)
    # a server that predates the field: no name
    assert P.wire_to_event({k: v for k, v in d.items() if k != "mt"}, 100.0, {}).mt == ""


def test_a_failed_final_with_no_words_and_never_shown_round_trips():
    f = a_final(words=(), first_shown_at=None, covers=(), failed=True, reason="lost")
    back = P.wire_to_event(P.event_to_wire(f, 0.0), 5.0, {})
    assert back.words == () and back.first_shown_at is None and back.covers == () and back.failed
    assert back.reason == "lost"


def test_the_final_feature_is_negotiated_and_unknown_features_are_ignored():
    hello = {"type": "hello", "v": 1, "pair": "zh-en"}
    assert P.parse_hello(hello).features == ()  # a client that predates finals
    assert P.parse_hello({**hello, "features": ["final", "later-thing"]}).features == ("final",)
    for bad in ("final", [1], ["x" * 40], ["f"] * (P.MAX_FEATURES + 1)):
        with pytest.raises(P.ProtocolError) as e:
            P.parse_hello({**hello, "features": bad})
        assert e.value.code == "malformed"
    assert P.granted_features({"type": "welcome", "features": ["final"]}) == ("final",)
    assert P.granted_features({"type": "welcome"}) == ()  # a server that predates finals
    assert P.granted_features({"type": "welcome", "features": "final"}) == ()


# -- server: forwarding and the outbox -----------------------------------------------------------

class FakePipe:
    def __init__(self):
        self.bus = EventBus()
        self.record = SessionRecord()
        self.asr_stage = SimpleNamespace(window_start=0)

    def push_audio(self, samples, wait_if_full=False, at=None):
        pass


def server_session(loop, features, limits=None):
    hello = P.Hello("zh-en", "pcm16", 16000, {}, features)
    return Session("s1", hello, FakePipe(), True, 0, limits or ServerLimits(), loop, lambda c, m: None)


def sent(loop, s) -> list[dict]:
    loop.run_until_complete(asyncio.sleep(0.01))
    out = []
    while len(s.outbox):
        out.append(json.loads(loop.run_until_complete(s.outbox.get())))
    return out


def test_the_server_sends_finals_in_order_stamped_and_never_drops_them_past_the_soft_bound():
    assert "final" not in DROPPABLE
    loop = asyncio.new_event_loop()
    s = server_session(loop, ("final",), ServerLimits(outbox_items=50, outbox_soft=2))
    for i in range(3):
        s.pipe.bus.publish(Metric("m", 1.0, 0.0))
    for i in range(5):
        s.pipe.bus.publish(a_final(id=i))
    msgs = sent(loop, s)
    finals = [m for m in msgs if m["ev"]["k"] == "final"]
    assert [m["ev"]["id"] for m in finals] == [0, 1, 2, 3, 4]  # past the soft bound, still all sent
    assert [m["n"] for m in msgs] == list(range(1, len(msgs) + 1))
    assert s.outbox.dropped == 1  # the third metric
    assert finals[0]["ts"] == [0, 16000 + int(round(1.4 * SR))]  # stamped at the final's end
    assert finals[0]["ev"]["src_start"] == pytest.approx(1.5)  # the session opened at 1 s
    loop.close()


def test_a_client_that_did_not_ask_for_finals_never_gets_one_and_no_number_is_spent():
    loop = asyncio.new_event_loop()
    s = server_session(loop, ())
    s.pipe.bus.publish(a_final())
    s.pipe.bus.publish(Metric("m", 1.0, 0.0))
    msgs = sent(loop, s)
    assert [(m["n"], m["ev"]["k"]) for m in msgs] == [(1, "metric")]
    loop.close()


# -- client: delivery and failover ----------------------------------------------------------------

class ManualClock:
    def __init__(self):
        self.t = 0.0

    def now(self):
        return self.t


class FakeWS:
    def __init__(self):
        self.transport = SimpleNamespace(abort=lambda: None)


class FakeLocal:
    """A local two-pass pipeline: its events are published by the test."""

    def __init__(self):
        self.bus = EventBus()
        self.record = SessionRecord(finals=True)
        self.asr_stage = SimpleNamespace(window_start=0)
        self.pushed = 0

    def start(self):
        pass

    def push_audio(self, samples, wait_if_full=False, at=None):
        self.pushed += len(samples)

    def failed(self):
        return False

    def abort(self):
        pass


@pytest.fixture()
def client(monkeypatch):
    local = FakeLocal()
    monkeypatch.setattr(F, "build_pipeline", lambda models, opts, clock=None: local)
    monkeypatch.setattr(F, "fresh_models", lambda models: models)
    c = CloudClient("ws://127.0.0.1:9", "a-token-of-sixteen+", opts=SessionOptions(), models=object(),
                    clock=ManualClock())
    c._start_reconnect = lambda: None
    c._ws, c._mode, c._cloud_finals = FakeWS(), "cloud", True
    c.ring.write(np.zeros(4 * SR, np.float32))
    seen = []
    c.bus.subscribe(seen.append)
    yield c, local, seen
    c.abort()


def words(a, b, text=" w"):
    return [[text, a, b, 0.9]]


def cloud_piece(c, n, seq, a, b):
    """Segment ``seq`` and its translation, as server events ``n`` and ``n + 1``."""
    c._insert(n, ("ev", {"k": "segment", "seq": seq, "words": words(a, b, f" s{seq}"), "reason": "pause",
                         "sentence_end": True, "lang": "en"}, None))
    c._insert(n + 1, ("ev", {"k": "translation", "seq": seq, "source": f"s{seq}", "target": f"T{seq}",
                             "src_start": a, "src_end": b, "queue_s": 0.0, "compute_s": 0.1}, None))


def cloud_final(c, n, fid, covers, a, b):
    f = a_final(id=fid, words=(Word(" f", a, b, 0.9),), src_start=a, src_end=b, covers=tuple(covers))
    c._insert(n, ("ev", P.event_to_wire(f, 0.0), None))


def finals(seen):
    return [e for e in seen if isinstance(e, FinalSentence)]


def test_cloud_finals_reach_the_bus_in_order_and_the_record_keeps_them_as_segments(client):
    c, _, seen = client
    cloud_piece(c, 1, 0, 0.1, 0.5)
    cloud_piece(c, 3, 1, 0.6, 1.0)
    c._insert(6, ("dub", {"seq": 0, "sample_rate": 16000, "text": "x", "first": True, "src_end": 1.0},
                  np.zeros(160, np.float32)))
    cloud_final(c, 5, 0, [0, 1], 0.1, 1.0)  # the final comes before its dub (server order)
    assert [type(e).__name__ for e in seen if not isinstance(e, Metric)][-2:] == ["FinalSentence", "DubChunk"]
    (f,) = finals(seen)
    assert f.id == 0 and f.covers == (0, 1) and not c._open_pieces
    assert f.first_shown_at == 0.0  # the first piece's display, on this client's clock
    assert [d["id"] for d in c.record.segments] == [0]  # summary segments are the finals


def test_failover_keeps_finals_in_order_none_twice_none_lost_and_ids_continue(client):
    c, local, seen = client
    cloud_piece(c, 1, 0, 0.1, 0.5)
    cloud_piece(c, 3, 1, 0.6, 1.0)
    cloud_final(c, 5, 0, [0, 1], 0.1, 1.0)
    cloud_piece(c, 6, 2, 1.5, 2.0)  # shown; its final had not come when the link died
    c._insert(8, ("ev", {"k": "segment", "seq": 3, "words": words(2.1, 2.4), "reason": "pause",
                         "sentence_end": True, "lang": "en"}, None))  # held: never shown, redone locally
    c._lost("test", c._ws)
    assert c._mode == "local"
    # the shown, unfinalised piece keeps its first-pass text in a final of its own, before any local one
    _, f1 = finals(seen)
    assert (f1.id, f1.covers, f1.failed, f1.reason, f1.target) == (1, (2,), True, "lost", "T2")
    assert c._local_base == 2 * SR  # from the end of the last answer, not before
    cloud_final(c, 9, 1, [2], 1.5, 2.0)  # a late event from the dead link is never shown
    assert len(finals(seen)) == 2

    local.bus.publish(Segment(0, (Word(" s", 0.1, 0.4),), "pause", True, 1.0, "en"))
    local.bus.publish(Translation(0, "s", "L0", 0.1, 0.4, 1.1, False, 1.0, 1.0))
    local.bus.publish(FinalSentence(0, (Word(" s", 0.1, 0.4),), "s", "F", 0.1, 0.4, 2.0, 1.1, (0,)))
    local.bus.publish(DubChunk(0, np.zeros(10, np.float32), 16000, "F", 2.0, 2.0, True, 0.4))
    fs = finals(seen)
    assert [f.id for f in fs] == [0, 1, 2]  # ids continue across the switch
    assert fs[2].covers == (3,) and fs[2].src_start == pytest.approx(2.1)
    assert fs[2].words[0].end == pytest.approx(2.4)
    dub = [e for e in seen if isinstance(e, DubChunk)]
    assert [d.seq for d in dub] == [2]  # the local dub speaks its final, under the final's client id
    # every piece shown is covered by exactly one final
    shown = [e.seq for e in seen if isinstance(e, Segment)]
    covered = [s for f in fs for s in f.covers]
    assert sorted(covered) == sorted(shown) == [0, 1, 2, 3]  # the held cloud segment 3 was never shown
    assert [d["id"] for d in c.record.segments] == [0, 1, 2]
    assert not c._open_pieces


def test_the_local_pipeline_starts_after_audio_a_final_already_answered(client):
    c, _, seen = client
    cloud_piece(c, 1, 0, 0.1, 0.5)
    cloud_final(c, 3, 0, [0], 0.1, 1.2)  # the whole-sentence decode heard a word past the last piece
    c._lost("test", c._ws)
    assert c._local_base == int(round(1.2 * SR))
    assert len(finals(seen)) == 1  # nothing left open: no failed final


def test_a_server_without_finals_keeps_the_first_pass_dub_numbering(client):
    c, _, seen = client
    c._cloud_finals = False
    c._seq_base, c._max_final = 5, 1
    cloud_piece(c, 1, 0, 0.1, 0.5)
    c._insert(3, ("dub", {"seq": 0, "sample_rate": 16000, "text": "x", "first": True, "src_end": 0.5},
                  np.zeros(160, np.float32)))
    cloud_final(c, 4, 0, [0], 0.1, 0.5)  # never sent by such a server; ignored if it were
    assert [e.seq for e in seen if isinstance(e, DubChunk)] == [5]
    assert not finals(seen) and not c._open_pieces


def test_an_unknown_event_kind_is_skipped_not_fatal(client):
    c, _, seen = client
    c._insert(1, ("ev", {"k": "from-a-later-version"}, None))
    c._insert(2, ("ev", {"k": "metric", "name": "x", "value": 1.0, "labels": {}}, None))
    assert c._mode == "cloud" and any(getattr(e, "name", "") == "x" for e in seen)


def test_a_local_final_for_audio_the_cloud_finalised_is_dropped_and_ids_stay_contiguous(client):
    c, local, seen = client
    cloud_piece(c, 1, 0, 0.1, 0.5)
    cloud_final(c, 3, 0, [0], 0.1, 1.2)
    c._lost("test", c._ws)
    base = c._local_base / SR  # 1.2 s
    # a final of the local pipeline over audio the cloud's final answered (a safeguard: not re-fed)
    local.bus.publish(FinalSentence(0, (), "x", "X", 1.0 - base, 1.2 - base, 2.0, None))
    local.bus.publish(FinalSentence(1, (Word(" y", 0.2, 0.6),), "y", "Y", 0.2, 0.6, 2.5, None))
    local.bus.publish(DubChunk(1, np.zeros(10, np.float32), 16000, "Y", 2.5, 2.5, True, 0.6))
    fs = finals(seen)
    assert [(f.id, f.target) for f in fs] == [(0, "Bonjour le monde."), (1, "Y")]
    assert [d.seq for d in seen if isinstance(d, DubChunk)] == [1]  # the dub follows its final's client id
