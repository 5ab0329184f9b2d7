import threading
import time

import pytest

from app.pipeline.queues import BoundedQueue, Closed, ControlChannel, FakeClock, FullPolicy


def test_block_policy_never_loses_items_and_times_out_when_full():
    q = BoundedQueue(2, FullPolicy.BLOCK)
    assert q.put(1) and q.put(2)
    assert q.put(3, timeout=0.05) is False  # full: the producer waited, nothing was dropped
    assert [q.get(0), q.get(0)] == [1, 2]


def test_block_policy_producer_resumes_when_consumer_takes():
    q = BoundedQueue(1, FullPolicy.BLOCK)
    q.put("a")
    done = []
    t = threading.Thread(target=lambda: done.append(q.put("b", timeout=5)))
    t.start()
    time.sleep(0.05)
    assert q.get(0) == "a"
    t.join(2)
    assert done == [True] and q.get(0) == "b"


def test_drop_oldest_policy():
    q = BoundedQueue(2, FullPolicy.DROP_OLDEST)
    for i in range(5):
        q.put(i)
    assert q.dropped == 3
    assert [q.get(0), q.get(0)] == [3, 4]


def test_coalesce_policy_replaces_same_key_in_place():
    q = BoundedQueue(4, FullPolicy.COALESCE, key=lambda x: x[0])
    q.put(("tentative", 1))
    q.put(("seg", 1))
    q.put(("tentative", 2))
    assert q.coalesced == 1 and len(q) == 2
    assert q.get(0) == ("tentative", 2)


def test_close_drains_then_raises():
    q = BoundedQueue(3, FullPolicy.BLOCK)
    q.put(1)
    q.close()
    assert q.get(0) == 1
    with pytest.raises(Closed):
        q.get(0)
    with pytest.raises(Closed):
        q.put(2)


def test_get_times_out_with_none():
    assert BoundedQueue(1, FullPolicy.BLOCK).get(timeout=0.01) is None


def test_control_channel_bypasses_data():
    c = ControlChannel()
    c.send("stop")
    c.send("flush")
    assert c.wait(0) is True
    assert c.drain() == ["stop", "flush"]
    assert c.drain() == []


def test_fake_clock():
    c = FakeClock()
    c.advance(1.5)
    c.sleep_until(3.0)
    assert c.now() == 3.0
