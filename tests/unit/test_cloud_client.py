"""The cloud client's guards against a server that misbehaves: bounded buffers, no silent stall."""

import logging
from types import SimpleNamespace

import pytest

from app.cloud import delivery as D
from app.cloud.client import CloudClient
from app.cloud.link import WS_LOG
from app.session.options import SessionOptions


class ManualClock:
    def __init__(self):
        self.t = 0.0

    def now(self):
        return self.t

    def sleep_until(self, t):
        self.t = max(self.t, t)


class FakeWS:
    def __init__(self):
        self.transport = SimpleNamespace(aborted=False)
        self.transport.abort = lambda: setattr(self.transport, "aborted", True)


@pytest.fixture()
def client():
    clock = ManualClock()
    c = CloudClient("ws://127.0.0.1:9", "a-token-of-sixteen+", opts=SessionOptions(), fallback=False, clock=clock)
    c._ws, c._mode = FakeWS(), "cloud"
    yield c, clock
    c.abort()


def ev(n):
    return ("ev", {"k": "metric", "name": "x", "value": n, "labels": {}}, None)


def test_a_missing_event_number_ends_the_cloud_session_after_the_gap_timeout(client):
    c, clock = client
    c._insert(2, ev(2))  # event 1 never comes
    assert c._mode == "cloud"
    clock.t = D.GAP_TIMEOUT_S + 0.1
    c._insert(3, ev(3))
    assert c._mode == "failed" and "event 1 never came" in c.error


def test_the_reorder_buffer_is_bounded(client):
    c, _ = client
    for n in range(2, D.REORDER_MAX + 3):
        c._insert(n, ev(n))
        if c._mode != "cloud":
            break
    assert c._mode == "failed" and len(c._reorder) <= D.REORDER_MAX + 1


def test_events_in_order_pass_and_a_filled_gap_clears(client):
    c, clock = client
    seen = []
    c.bus.subscribe(seen.append)
    c._insert(2, ev(2))
    c._insert(1, ev(1))
    clock.t = 10.0
    c._insert(3, ev(3))
    assert c._mode == "cloud" and c._gap_since is None and c._next_n == 4
    assert [e.value for e in seen if getattr(e, "name", "") == "x"] == [1.0, 2.0, 3.0]


def test_the_websocket_logger_never_logs_headers_at_debug(caplog):
    """websockets logs every request header (the bearer token too) at DEBUG on this logger."""
    with caplog.at_level(logging.DEBUG):
        WS_LOG.debug("> Authorization: Bearer secret-token")
        WS_LOG.info("connection open")
    assert "secret-token" not in caplog.text and "connection open" in caplog.text


def test_a_failed_return_to_the_cloud_leaves_one_reconnect_loop(monkeypatch):
    # A return whose new cloud session failed to open started a second reconnect loop beside the
    # one still running. After the next return the other loop opened a probe and set the status
    # to "cloud-available" on a session that was back on the cloud (seen once in the full suite:
    # test_a_healed_link_brings_the_session_back_to_the_cloud).
    import asyncio

    from app.cloud import failover

    c = CloudClient("ws://127.0.0.1:9", "a-token-of-sixteen+", opts=SessionOptions(), fallback=False)
    c.auto_return = True
    c._mode, c._local_base = "local", 0
    c._local = SimpleNamespace(push_audio=lambda a: None, abort=lambda: None)
    c._local_answers = SimpleNamespace(poll=lambda: 0, clean=True)
    probes, loops, opened = [], [], []

    async def open_ws(url, token, ctx, timeout):
        ws = SimpleNamespace(state=SimpleNamespace(name="OPEN"))
        probes.append(ws)
        return ws

    async def open_session(point, ws, timeout):
        opened.append(point)
        if len(opened) == 1:
            raise OSError("the welcome did not come")
        c._mode = "cloud"
        c._set_status("cloud")

    monkeypatch.setattr(failover, "open_ws", open_ws)
    c._open_session = open_session
    reconnect = c._reconnect

    def counted():
        loops.append(1)
        return reconnect()

    c._reconnect = counted

    async def main():
        c._loop = asyncio.get_running_loop()
        first = asyncio.ensure_future(c._reconnect())
        for _ in range(100):  # 5 s at most
            await asyncio.sleep(0.05)
            if c.returns and first.done() and all(t.done() for t in c._tasks):
                break
        await asyncio.sleep(0.6)  # long enough for a second loop to open its probe
        for t in [first, *c._tasks]:
            t.cancel()

    try:
        asyncio.run(main())
    finally:
        c._loop = None
    assert len(opened) == 2 and c.returns
    assert len(loops) == 1, "a second reconnect loop was started"
    assert c.status == "cloud" and len(probes) == 2
