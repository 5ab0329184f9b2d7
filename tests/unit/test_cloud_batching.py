"""The shared translation batcher: batching across sessions, quotas per direction, isolation."""

import threading
import time

import pytest

from app.cloud.batching import MicroBatcher, SessionTranslator


class FakeTranslator:
    """Records every batch; each call takes ``cost_s`` (the worker is busy meanwhile)."""

    def __init__(self, name: str, cost_s: float = 0.0):
        self.name, self.cost_s = name, cost_s
        self.batches: list[list] = []
        self.lock = threading.Lock()

    def __call__(self, items):
        with self.lock:
            self.batches.append(list(items))
        time.sleep(self.cost_s)
        return [f"{self.name}:{it[1]}|{it[0]}" for it in items]


def run_sessions(batcher, direction, n, calls, out, prefix="s"):
    def one(i):
        tr = SessionTranslator(batcher, direction, None)
        for k in range(calls):
            t = time.monotonic()
            r = tr.translate(f"{prefix}{i}-{k}", target_prefix=f"p{i}", beam_size=4)
            out.append((direction, i, k, r, time.monotonic() - t))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    return threads


def test_requests_of_concurrent_sessions_share_a_batch_and_results_go_back_to_their_caller():
    b = MicroBatcher(workers=1, window_s=0.05, max_batch=8)
    fake = FakeTranslator("zh-en", cost_s=0.02)
    b.add_direction("zh-en", fake)
    for _ in range(4):
        b.open_session("zh-en")
    out = []
    for t in run_sessions(b, "zh-en", 4, 5, out):
        t.join(10)
    b.close()
    assert len(out) == 20
    for _, i, k, r, _ in out:  # every caller gets its own translation, never another session's
        assert r == f"zh-en:p{i}|s{i}-{k}"
    assert max(len(x) for x in fake.batches) > 1
    assert len(fake.batches) < 20
    assert b.stats["zh-en"].requests == 20


def test_batching_off_translates_one_request_at_a_time():
    b = MicroBatcher(workers=1, window_s=0.05, batching=False)
    fake = FakeTranslator("zh-en", cost_s=0.005)
    b.add_direction("zh-en", fake)
    for _ in range(3):
        b.open_session("zh-en")
    out = []
    for t in run_sessions(b, "zh-en", 3, 4, out):
        t.join(10)
    b.close()
    assert len(out) == 12 and all(len(x) == 1 for x in fake.batches)


def test_a_lone_session_does_not_wait_for_the_batching_window():
    b = MicroBatcher(workers=2, window_s=0.5)
    b.add_direction("en-en", FakeTranslator("en-en"))
    b.open_session("en-en")
    t = time.monotonic()
    assert SessionTranslator(b, "en-en", None).translate("hi") == "en-en:|hi"
    assert time.monotonic() - t < 0.2  # nobody else could join its batch
    b.close()


def test_a_busy_direction_cannot_starve_a_rare_one():
    b = MicroBatcher(workers=2, window_s=0.005, max_batch=2)
    busy = FakeTranslator("zh-en", cost_s=0.1)
    rare = FakeTranslator("en-en", cost_s=0.001)
    b.add_direction("zh-en", busy)
    b.add_direction("en-en", rare)
    for _ in range(8):
        b.open_session("zh-en")
    b.open_session("en-en")
    assert b.limit("zh-en") == 1 and b.limit("en-en") == 1
    out = []
    threads = run_sessions(b, "zh-en", 8, 4, out)
    time.sleep(0.15)  # the busy direction has a deep backlog now
    rare_out = []
    threads += run_sessions(b, "en-en", 1, 3, rare_out, prefix="r")
    for t in threads:
        t.join(30)
    b.close()
    assert b.stats["zh-en"].max_in_flight == 1  # never took the worker reserved for en-en
    waits = [x[4] for x in rare_out]
    # the rare direction waits for at most one busy batch (0.1 s), never behind the backlog
    # of 8 sessions x 4 calls / 2 per batch x 0.1 s
    assert len(rare_out) == 3 and max(waits) < 0.35, waits


def test_without_competition_a_direction_uses_every_worker():
    b = MicroBatcher(workers=2, window_s=0.001, max_batch=1)
    fake = FakeTranslator("zh-en", cost_s=0.05)
    b.add_direction("zh-en", fake)
    for _ in range(4):
        b.open_session("zh-en")
    out = []
    for t in run_sessions(b, "zh-en", 4, 2, out):
        t.join(10)
    b.close()
    assert b.stats["zh-en"].max_in_flight == 2


def test_a_failing_batch_fails_only_its_callers():
    b = MicroBatcher(workers=1)

    def broken(items):
        raise RuntimeError("model exploded")

    b.add_direction("bad", broken)
    b.add_direction("ok", FakeTranslator("ok"))
    with pytest.raises(RuntimeError, match="exploded"):
        SessionTranslator(b, "bad", None).translate("x")
    assert SessionTranslator(b, "ok", None).translate("x") == "ok:|x"
    with pytest.raises(KeyError):
        SessionTranslator(b, "nope", None).translate("x")
    b.close()
