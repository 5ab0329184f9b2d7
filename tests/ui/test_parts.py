"""Bridge, transcript model, settings and cloud switch, without models."""

import socket
import threading
from dataclasses import dataclass

from PySide6.QtCore import QThread

from app.pipeline.messages import Segment, TentativeText, Translation
from app.pipeline.policy import PolicySignal, PolicyTransition
from app.pipeline.protocols import Word
from app.pipeline.speculation import SpeculationEvent
from app.session.subtitles import parse_srt, to_srt
from app.ui.bridge import EventBridge, is_policy_event
from app.ui.cloud import CloudLink
from app.ui.settings import Settings, save_token, validate_server_url
from app.ui.subtitles_view import SubtitlesView
from app.ui.transcript import TranscriptModel


def _seg(seq, text, a, b):
    return Segment(seq, (Word(text, a, b, 0.9),), "punctuation", True, b + 0.5, "zh")


def test_bridge_delivers_worker_events_on_gui_thread_in_order(qtbot):
    bridge = EventBridge()
    got, threads = [], set()
    bridge.segment.connect(lambda ev: (got.append(("seg", ev.seq)), threads.add(QThread.currentThread())))
    bridge.translation.connect(lambda ev: got.append(("tr", ev.seq)))
    bridge.tentative.connect(lambda ev: got.append(("tent", ev.text)))

    def worker():
        for i in range(50):
            bridge(TentativeText((Word(f"t{i}", 0, 1, 0.5),), "", float(i)))
            bridge(_seg(i, f"s{i}", i, i + 1))
            bridge(Translation(i, f"s{i}", f"T{i}", i, i + 1, i + 1.0))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    qtbot.waitUntil(lambda: ("tr", 49) in got, timeout=5000)
    assert threads == {QThread.currentThread()}  # delivered on the GUI thread
    segs = [s for k, s in got if k == "seg"]
    assert segs == list(range(50))
    for i in range(50):  # a segment always precedes its translation
        assert got.index(("seg", i)) < got.index(("tr", i))


def test_bridge_coalesces_tentative_within_a_batch(qtbot):
    bridge = EventBridge()
    seen = []
    bridge.tentative.connect(lambda ev: seen.append(ev.text))
    for i in range(10):
        bridge(TentativeText((Word(f"w{i}", 0, 1, 0.5),), "", float(i)))
    bridge.flush()
    assert seen == ["w9"]


def _transition(level: int) -> PolicyTransition:
    return PolicyTransition(1.0, "latency", 0, level, level, "p99 subtitle latency 4.1 s > 3.5 s", ("mt_beam",))


def test_policy_events_are_recognised_by_type():
    assert is_policy_event(_transition(2))
    assert not is_policy_event(_seg(0, "x", 0, 1))
    assert not is_policy_event(PolicySignal("cloud_link", 1.0))
    assert not is_policy_event(SpeculationEvent("fallback", "mt", "draft rejected", 1.0))

    @dataclass
    class DegradationLevel:  # an unrelated class: its name and a level are not enough
        level: int
        reason: str

    @dataclass
    class PolicyDocument:
        level: str
        reason: str = ""

    assert not is_policy_event(DegradationLevel(2, "queue"))
    assert not is_policy_event(PolicyDocument("confidential"))


def test_bridge_emits_policy_only_for_level_changes(qtbot):
    @dataclass
    class PolicyLevelNote:
        level: str

    bridge = EventBridge()
    seen = []
    bridge.policy.connect(seen.append)
    for ev in (PolicyLevelNote("not a level"), PolicySignal("cloud_link", 0.0), _transition(1),
               SpeculationEvent("disabled", "mt", "policy", 2.0)):
        bridge(ev)
    bridge.flush()
    assert seen == [_transition(1)]
    assert bridge.delivered == 4


def test_transcript_tentative_in_place_commit_and_correction(qtbot):
    m = TranscriptModel()
    m.set_live_active(True)
    assert m.rowCount() == 1
    m.set_tentative("今天", "主要")
    m.set_tentative("今天主要", "讨论")  # replaced in place: still one live row
    assert m.rowCount() == 1 and m.live.tentative == "讨论"
    m.add_segment(0, "今天主要", 0.0, 1.2, 1.5)
    assert m.rowCount() == 2 and m.live.committed == ""
    m.set_translation(0, "Today", 2.0)
    m.add_segment(1, "讨论", 1.2, 2.0, 2.5)
    m.set_translation(1, "discussion", 3.0)
    assert m.setData(m.index(1), ("讨论", "we discuss"))
    m.set_translation(1, "late machine text", 3.5)  # the user's correction wins
    segs = m.segments()
    assert segs[1]["target"] == "we discuss" and segs[1]["corrected"] and not segs[0]["corrected"]
    cues = parse_srt(to_srt(segs))
    assert [c[2] for c in cues] == ["Today", "we discuss"]
    assert "[corrected]" in m.plain_text()
    assert not m.setData(m.index(2), ("x", "y"))  # the live row is not editable
    m.set_live_active(False)
    assert m.rowCount() == 2


def test_reconcile_adds_segments_the_view_missed(qtbot):
    m = TranscriptModel()
    m.add_segment(0, "a", 0, 1, 1)
    rec = [{"seq": 0, "source": "a", "src_start": 0, "src_end": 1, "target": "A"},
           {"seq": 1, "source": "b", "src_start": 1, "src_end": 2, "target": "B", "committed_at": 2.5}]
    assert m.reconcile(rec) == 1
    assert [s["target"] for s in m.segments()] == ["A", "B"]


def test_auto_scroll_stops_when_user_scrolls_back(qtbot):
    m = TranscriptModel()
    v = SubtitlesView(m)
    qtbot.addWidget(v)
    v.resize(600, 300)
    v.show()
    for i in range(60):
        m.add_segment(i, f"line {i} " * 4, i, i + 1, i)
    qtbot.wait(50)
    sb = v.list.verticalScrollBar()
    assert sb.maximum() > 0 and sb.value() == sb.maximum()
    sb.setValue(0)  # the user reads back
    assert not v.follow and v.jump.isVisible()
    for i in range(60, 70):
        m.add_segment(i, "more", i, i + 1, i)
    qtbot.wait(50)
    assert sb.value() == 0
    v.scroll_to_live()
    qtbot.wait(50)
    assert v.follow and sb.value() == sb.maximum()


def test_settings_persist_and_token_never_in_the_file(qtbot, settings_dir):
    s = Settings()
    s.set("font_size", 21)
    s.set("cloud_url", "wss://relay.example.org:8765")
    msg = save_token("wss://relay.example.org:8765", "s3cret-token")
    assert msg and "this run only" in msg  # the test keyring is the failing backend
    s.sync()
    assert Settings().get("font_size") == 21
    assert "s3cret-token" not in (settings_dir / "relay.ini").read_text()
    s.reset()
    assert Settings().get("font_size") == 15
    assert validate_server_url("wss://relay.example.org:8765") is None
    assert validate_server_url("ws://localhost:8765") is None
    for bad in ("http://x", "wss://", "wss://h:99999", "ws://remote.example.org", "relay.example.org"):
        assert validate_server_url(bad), bad


def test_cloud_switch_without_server_says_so_and_stays_local(qtbot):
    c = CloudLink()
    c.go_cloud("", "")
    assert c.state == "local" and "no cloud server configured" in c.message
    c.go_cloud("wss://relay.example.org:8765", "t")
    assert c.state in ("lost", "connecting", "cloud")
    assert not (c.state == "local")


def test_cloud_switch_checks_the_server_it_is_given(qtbot):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    c = CloudLink()
    c.go_cloud(f"wss://127.0.0.1:{port}", "t")
    assert c.state == "connecting", c.message  # the client's connection check runs
    qtbot.waitUntil(lambda: c.state != "connecting", timeout=10_000)
    assert c.state == "lost" and c.message.startswith("cloud lost ("), c.message
