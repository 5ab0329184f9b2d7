"""Fault injection between the client and a real server: a TCP proxy in the test adds delay and
jitter, stalls, or cuts the link, or the server process is killed mid-sentence. The client must
be on the local pipeline within the heartbeat timeout + one heartbeat, lose no speech and
repeat no committed segment."""

import difflib
import random
import re
import select
import signal
import socket
import threading
import time

import pytest

from app.cloud import protocol as P

from .conftest import DATA
from .test_cloud import TOKEN, Server

pytestmark = pytest.mark.models
HB_TIMEOUT = 0.2
BOUND_S = HB_TIMEOUT + P.HEARTBEAT_S  # the bound: 200 ms + one heartbeat
CLIP = "zh_demo_20s.wav"


class FaultProxy:
    """Loopback TCP proxy. ``delay``/``jitter`` (s) apply to server → client data; ``stall()``
    stops forwarding (sockets stay open); ``cut()`` closes every connection; ``heal()`` resumes."""

    def __init__(self, target_port: int):
        self.target = target_port
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.delay = self.jitter = 0.0
        self.stalled = self.refusing = False
        self.conns: list[socket.socket] = []
        self.fault_at: float | None = None
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            if self.refusing:
                c.close()
                continue
            s = socket.create_connection(("127.0.0.1", self.target))
            self.conns += [c, s]
            threading.Thread(target=self._pump, args=(c, s, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(s, c, True), daemon=True).start()

    def _pump(self, src, dst, downstream):
        try:
            while True:
                if self.stalled:  # data waits in the kernel buffers, as on a dead link
                    time.sleep(0.05)  # (a select() here would return at once: a busy loop)
                    continue
                r, _, _ = select.select([src], [], [], 0.05)
                if not r:
                    continue
                data = src.recv(65536)
                if not data:
                    break
                if downstream and (self.delay or self.jitter):
                    time.sleep(max(0.0, self.delay + random.uniform(-self.jitter, self.jitter)))
                dst.sendall(data)
        except (OSError, ValueError):  # closed by cut()
            pass
        for x in (src, dst):
            try:
                x.close()
            except OSError:
                pass

    def stall(self):
        self.fault_at = self.fault_at or time.monotonic()
        self.stalled = True
        self.refusing = True

    def cut(self):
        self.fault_at = self.fault_at or time.monotonic()
        self.refusing = True
        for c in list(self.conns):
            try:
                c.shutdown(socket.SHUT_RDWR)
                c.close()
            except OSError:
                pass
        self.conns.clear()

    def heal(self):
        self.refusing = False

    def close(self):
        self.sock.close()
        self.cut()


@pytest.fixture(scope="module")
def models():
    from app.session.models import load_models
    from app.session.options import SessionOptions

    return load_models(SessionOptions(pair="zh-en", no_tts=True))


@pytest.fixture(scope="module")
def reference(models):
    """The local pipeline's segments on the clip: the speech the fallback must cover, in time."""
    from app.audio.files import load_audio
    from app.session.build import build_pipeline
    from app.session.options import SessionOptions
    from app.session.runner import feed_array

    opts = SessionOptions(pair="zh-en", no_tts=True)
    pipe = build_pipeline(models, opts)
    pipe.start()
    feed_array(pipe, load_audio(str(DATA / CLIP)), realtime=False)
    pipe.finish()
    return pipe.record.segments


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("srvf"))
    yield s
    s.stop()


def run_with_fault(url, cert, models, fault, at_s, auto_return=False):
    from app.audio.files import load_audio
    from app.cloud.client import CloudClient
    from app.session.options import SessionOptions
    from app.session.runner import feed_array

    opts = SessionOptions(pair="zh-en", no_tts=True)
    statuses = []
    c = CloudClient(url, TOKEN, cert, opts=opts, models=models, heartbeat_timeout=HB_TIMEOUT,
                    auto_return=auto_return, on_status=statuses.append)
    c.start()
    timer = threading.Timer(at_s, fault)
    timer.start()
    feed_array(c, load_audio(str(DATA / CLIP)), realtime=True)
    c.finish(120)
    c.abort()
    timer.cancel()
    return c, statuses


def _chars(text: str) -> str:
    return re.sub(r"[\W_]", "", text)


def _chars_in_span(segs, a: float, b: float) -> float:
    """Characters the session recognised in [a, b]: each segment's share by time overlap."""
    n = 0.0
    for s in segs:
        dur = max(1e-3, s["src_end"] - s["src_start"])
        n += len(_chars(s["source"])) * max(0.0, min(b, s["src_end"]) - max(a, s["src_start"])) / dur
    return n


def _uncovered(spans, segs, tol=0.15):
    """Seconds of each span that no segment (widened by ``tol`` for word-time jitter) covers."""
    cover = sorted((s["src_start"] - tol, s["src_end"] + tol) for s in segs)
    out = []
    for a, b in spans:
        left, t = 0.0, a
        for x, y in cover:
            if y <= t or x >= b:
                continue
            left += max(0.0, x - t)
            t = max(t, y)
        out.append(left + max(0.0, b - t))
    return out


def check_nothing_lost_or_repeated(c, reference):
    """Lost: speech the local pipeline finds on the clip that no segment of the session covers.
    Repeated: segments that overlap in time or text that comes twice. Two streaming runs differ
    in wording (2300 / 两千三百, punctuation), so the text is only checked for its content. The
    messages are strings: pytest cuts any other object's repr to a line, and the spans are the
    evidence."""
    segs = c.record.segments  # the finals (second pass) across cloud and local, else the pieces
    assert segs and all(s["target"] is not None for s in segs)
    key = "id" if c.record.final_mode else "seq"
    for a, b in zip(segs, segs[1:]):
        assert round(b["src_start"] - a["src_end"], 3) >= -0.1, f"overlapping segments {a} / {b}"
        assert b[key] > a[key]
    if c.record.final_mode:  # every first-pass piece shown is replaced by exactly one final
        finals = [(s["id"], s["reason"], s["failed"], s["covers"], s["src_start"], s["src_end"]) for s in segs]
        assert [s["id"] for s in segs] == list(range(len(segs))), f"{finals} {c.switches} {c.returns}"
        covered = [x for s in segs for x in s["covers"]]
        assert sorted(covered) == sorted(p["seq"] for p in c.record.pieces), f"{covered} {c.record.pieces}"
    gaps = _uncovered([(r["src_start"], r["src_end"]) for r in reference], segs)
    spans = [(round(s["src_start"], 2), round(s["src_end"], 2), s["source"]) for s in segs]
    assert max(gaps) <= 0.4 and sum(gaps) <= 0.8, f"{gaps} {spans}"
    text = _chars("".join(s["source"] for s in segs))
    ref = _chars("".join(r["source"] for r in reference))
    twice = {text[i:i + 4] for i in range(len(text) - 3) if text.count(text[i:i + 4]) > 1}
    assert not {g for g in twice if ref.count(g) < 2}, f"{sorted(twice)} {spans}"
    assert difflib.SequenceMatcher(None, text, ref).ratio() > 0.7, f"{text} / {ref}"
    # every clause of the reference, before, at and after the faults (4, 6, 7 s), has about as
    # many characters in the session where it was spoken; which characters, the recogniser under
    # load gets differently from run to run (增长 / 增强, 控制成本 / 空置长半: same sounds)
    for r in reference:
        want = len(_chars(r["source"]))
        got = _chars_in_span(segs, r["src_start"] - 0.15, r["src_end"] + 0.15)
        assert got >= 0.6 * want, f"{r['source']} {round(got, 1)} {spans}"


def switch_delay(c, fault_at: float) -> float:
    sw = c.switches[0]
    abs_switch = time.monotonic() - c.clock.now() + sw["at_s"]
    return abs_switch - fault_at


def recovered_latency(c, after_s: float) -> tuple[float, list]:
    """Worst subtitle latency of segments committed 2 s after the switch (back to normal), and
    every segment's (src_start, src_end, latency) for the failure message."""
    shown = [s for s in c.record.segments if s["emitted_at"] is not None]
    lat = [(round(s["src_start"], 2), round(s["src_end"], 2),
            round(s["emitted_at"] - c.arrival.played_at(s["src_end"]), 2)) for s in shown]
    late = [x[2] for x, s in zip(lat, shown) if s["emitted_at"] > after_s + 2.0]
    return (max(late) if late else 0.0), lat


@pytest.mark.parametrize("kind", ["stall", "cut"])
def test_a_stalled_or_cut_link_falls_back_to_local_in_time(server, models, reference, kind):
    proxy = FaultProxy(server.port)
    try:
        fault = proxy.stall if kind == "stall" else proxy.cut
        c, statuses = run_with_fault(f"wss://127.0.0.1:{proxy.port}", server.cert, models, fault, 6.0,
                                     auto_return=kind == "cut")
        if kind == "cut":
            proxy.heal()
    finally:
        proxy.close()
    assert c.switches, statuses
    d = switch_delay(c, proxy.fault_at)
    assert 0 <= d <= BOUND_S + 0.05, f"on local {d * 1000:.0f} ms after the fault"
    assert statuses[:3] == ["cloud", "cloud-lost", "local"]
    check_nothing_lost_or_repeated(c, reference)
    worst, lat = recovered_latency(c, c.switches[0]["at_s"])
    assert worst < 4.0, f"{c.switches} {lat}"
    assert server.alive()


def test_jitter_keeps_the_session_on_the_cloud_and_in_order(server, models, reference):
    proxy = FaultProxy(server.port)
    proxy.delay, proxy.jitter = 0.03, 0.02
    try:
        c, statuses = run_with_fault(f"wss://127.0.0.1:{proxy.port}", server.cert, models, lambda: None, 0.0)
    finally:
        proxy.close()
    assert not c.switches and c.status == "cloud", c.switches
    assert c.metrics()["rtt_ms"]["p50"] >= 10  # the added delay shows in the round trip
    check_nothing_lost_or_repeated(c, reference)


def test_server_killed_mid_sentence(tmp_path, models, reference):
    srv = Server(tmp_path)
    killed = {}

    def kill():
        killed["at"] = time.monotonic()
        srv.proc.send_signal(signal.SIGKILL)

    try:
        c, statuses = run_with_fault(srv.url, srv.cert, models, kill, 7.0)
    finally:
        srv.stop()
    assert c.switches and "cloud-lost" in statuses
    assert 0 <= switch_delay(c, killed["at"]) <= BOUND_S + 0.05
    check_nothing_lost_or_repeated(c, reference)
    worst, lat = recovered_latency(c, c.switches[0]["at_s"])
    assert worst < 4.0, f"{c.switches} {lat}"


def test_a_healed_link_brings_the_session_back_to_the_cloud(server, models, reference):
    """Cut at 4 s, healed at 6 s: with auto_return the client goes back to the server at a
    segment boundary before the clip ends, and nothing is lost or repeated across both switches."""
    proxy = FaultProxy(server.port)
    healer = threading.Timer(6.0, proxy.heal)
    healer.start()
    try:
        c, statuses = run_with_fault(f"wss://127.0.0.1:{proxy.port}", server.cert, models, proxy.cut, 4.0,
                                     auto_return=True)
    finally:
        healer.cancel()
        proxy.close()
    assert c.switches, statuses
    # the server is seen again; the switch itself waits for a segment boundary with the local
    # pipeline near live, which a loaded 2-core machine may not reach before the clip ends
    assert "cloud-available" in statuses or c.returns, statuses
    if c.returns:
        assert c.status == "cloud" and c.returns[0]["at_s"] > c.switches[0]["at_s"]
    check_nothing_lost_or_repeated(c, reference)
