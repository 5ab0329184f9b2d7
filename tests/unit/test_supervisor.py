"""Stage supervision with fake backends: a stage that raises or stalls gets a fresh worker and
the session's output is exactly what a fault-free run gives (nothing lost, nothing twice)."""

import threading
import time

import pytest

from app.obs.faults import FaultyBackend, parse
from app.pipeline.engine import PipelineConfig, PipelineError, StreamingPipeline
from app.pipeline.messages import DubChunk, Translation
from app.pipeline.segmenter import SegmenterConfig
from app.pipeline.mt_stage import MTConfig
from app.pipeline.recognizer import ASRConfig
from app.pipeline.supervisor import StageRestarted, SupervisorConfig

from .fakes import FakeASR, FakeMT, FakeTTS, FakeVAD, speech


def cfg(stall_s=0.0, max_restarts=3, seg_queue=16):
    return PipelineConfig(asr=ASRConfig(catch_up=False), mt=MTConfig(previews=False),
                          segmenter=SegmenterConfig(lang="en", eager_units=0), seg_queue=seg_queue,
                          supervision=SupervisorConfig(stall_s=stall_s, max_restarts=max_restarts, poll_s=0.02))


def faulty(backend, target, spec):
    return FaultyBackend(backend, target, [f for f in parse(spec) if f.target == target])


def run(spec="", audio=None, timeout=30, **kw):
    asr, mt, tts, vad = FakeASR(), FakeMT(), FakeTTS(), FakeVAD()
    pipe = StreamingPipeline(faulty(asr, "asr", spec), faulty(mt, "mt", spec), faulty(tts, "tts", spec),
                             faulty(vad, "vad", spec), cfg(**kw))
    events = []
    pipe.bus.subscribe(events.append)
    pipe.start()
    audio = speech(6.0, 1.0, repeats=2) if audio is None else audio
    for off in range(0, len(audio), 1600):
        pipe.push_audio(audio[off:off + 1600], wait_if_full=True)
    t0 = time.monotonic()
    pipe.finish(timeout=timeout)
    return pipe, events, tts, time.monotonic() - t0


def output(pipe, events, tts):
    translations = [(e.seq, e.target) for e in events if isinstance(e, Translation) and not e.preview]
    dubbed = [(e.seq, e.text) for e in events if isinstance(e, DubChunk) and not e.skipped]
    return [(s["seq"], s["source"], s["target"]) for s in pipe.record.segments], translations, dubbed


@pytest.fixture(scope="module")
def reference():
    pipe, events, tts, _ = run()
    segs, translations, dubbed = output(pipe, events, tts)
    assert len(segs) >= 4 and len(dubbed) >= len(segs)
    return segs, translations, dubbed


@pytest.mark.parametrize("spec", ["asr:raise@3", "vad:raise@4", "mt:raise@2", "tts:raise@2",
                                  "asr:raise@2,mt:raise@3,tts:raise@4"])
def test_a_stage_that_raises_is_restarted_and_nothing_is_lost_or_repeated(spec, reference):
    pipe, events, tts, _ = run(spec)
    assert output(pipe, events, tts) == reference
    restarted = [e for e in events if isinstance(e, StageRestarted)]
    stages = {"vad": "asr"}
    assert sorted(e.stage for e in restarted) == sorted(stages.get(f.target, f.target) for f in parse(spec))
    assert all(e.reason == "error" and "InjectedFault" in e.error for e in restarted)
    stats = pipe.stage_stats()
    assert stats["supervisor"]["restarts"] == len(restarted)
    assert sum(stats[s]["restarts"] for s in ("asr", "mt", "tts")) == len(restarted)
    assert not any(s.is_alive() for s in pipe.stages)


def test_mt_restart_retakes_the_segment_in_flight(reference):
    pipe, events, tts, _ = run("mt:raise@1")
    ev = next(e for e in events if isinstance(e, StageRestarted))
    assert ev.resumed_from == "segment 0 again"
    assert output(pipe, events, tts) == reference


def test_tts_restart_respeaks_the_clause_that_failed(reference):
    pipe, events, tts, _ = run("tts:raise@3")
    ev = next(e for e in events if isinstance(e, StageRestarted))
    assert ev.resumed_from.startswith("clause ")
    assert output(pipe, events, tts)[2] == reference[2]


def test_a_stalled_backend_is_replaced_and_its_late_answer_is_dropped(reference):
    # the 2nd translation blocks 2 s; the deadline is 0.3 s
    pipe, events, tts, took = run("mt:stall@2:2s", stall_s=0.3)
    restarted = [e for e in events if isinstance(e, StageRestarted)]
    assert [(e.stage, e.reason) for e in restarted] == [("mt", "stall")]
    assert took < 1.8, "the session must not wait for the stalled call"
    assert output(pipe, events, tts) == reference
    n = len(events)
    time.sleep(2.2)  # the abandoned worker wakes up: it must leave without publishing anything
    assert len(events) == n
    assert [t.name for t in threading.enumerate() if t.name == "mt"] == []


def test_a_stalled_worker_releases_the_priority_gate():
    pipe, events, _, took = run("tts:stall@1:3s", stall_s=0.3)
    assert pipe.gate._busy == 0
    assert took < 2.5  # recognition went on while the abandoned call slept
    assert [e.reason for e in events if isinstance(e, StageRestarted)] == ["stall"]


def test_restart_budget_spent_fails_the_session_cleanly():
    spec = ",".join(f"mt:raise@{i}" for i in range(1, 8))
    t0 = time.monotonic()
    with pytest.raises(PipelineError, match="mt stage failed: injected mt failure at call 4"):
        run(spec)
    assert time.monotonic() - t0 < 10


def test_stall_with_budget_spent_fails_without_hanging():
    t0 = time.monotonic()
    with pytest.raises(PipelineError, match="mt stage failed: no progress"):
        run("mt:stall@1:30s", stall_s=0.2, max_restarts=0)
    assert time.monotonic() - t0 < 5


def test_budget_is_per_window():
    from app.pipeline.engine import EventBus
    from app.pipeline.queues import FakeClock
    from app.pipeline.supervisor import Supervisor

    now = [0.0]
    sup = Supervisor([], EventBus(), FakeClock(), SupervisorConfig(max_restarts=2, window_s=60), now=lambda: now[0])
    assert sup._allow() == 1 and sup._allow() == 2 and sup._allow() is None
    now[0] = 61.0
    assert sup._allow() is not None


def test_a_full_queue_blocks_and_loses_nothing(reference):
    """One-slot segment queue and a slow translator: recognition waits, every segment arrives once."""
    asr, mt, tts = FakeASR(), FakeMT(delay=0.05), FakeTTS()
    pipe = StreamingPipeline(asr, mt, tts, FakeVAD(), cfg(seg_queue=1))
    events = []
    pipe.bus.subscribe(events.append)
    pipe.start()
    audio = speech(6.0, 1.0, repeats=2)
    for off in range(0, len(audio), 1600):
        pipe.push_audio(audio[off:off + 1600], wait_if_full=True)
    pipe.finish(timeout=30)
    assert pipe.seg_q.max_depth == 1
    assert output(pipe, events, tts) == reference


def test_wall_clock_steps_do_not_touch_latency(monkeypatch):
    """The pipeline's clock is monotonic: the wall clock jumping an hour either way mid-session
    changes no latency figure."""
    real = time.time
    jumps = iter([3600.0, -7200.0, 86400.0] * 1000)
    offset = [0.0]

    def stepped():
        offset[0] += next(jumps, 0.0)
        return real() + offset[0]

    monkeypatch.setattr(time, "time", stepped)
    asr, mt, tts = FakeASR(), FakeMT(), FakeTTS()
    pipe = StreamingPipeline(asr, mt, tts, FakeVAD(), PipelineConfig(
        asr=ASRConfig(catch_up=True), mt=MTConfig(previews=False), segmenter=SegmenterConfig(lang="en")))
    pipe.start()
    audio = speech(3.0, 1.0)
    t0 = time.monotonic()
    for i, off in enumerate(range(0, len(audio), 1600)):
        time.sleep(max(0.0, t0 + (i + 1) * 0.1 - time.monotonic()))  # real-time pace
        pipe.push_audio(audio[off:off + 1600])
        time.time()  # steps the wall clock
    pipe.finish(timeout=30)
    lat = pipe.tracker.summary()
    for name in ("asr_first_token", "e2e_subtitle", "e2e_dub"):
        assert lat[name]["n"] > 0
        assert 0 <= lat[name]["p99"] < 3000, (name, lat[name])
    assert offset[0] != 0.0


class _Worker:
    """A stage whose worker makes model calls of given lengths, one after another."""

    def __init__(self, calls, name):
        from app.pipeline.engine import EventBus
        from app.pipeline.queues import FakeClock
        from app.pipeline.stage import Stage

        calls = list(calls)

        class S(Stage):
            def loop(self):
                while calls:
                    self.watched(time.sleep, calls.pop(0))

        self.stage = S(name, EventBus(), FakeClock())


def test_a_slow_machine_is_not_a_stall_but_a_stuck_call_still_is():
    """Calls that took 0.2 s make a 0.5 s call normal (limit: 5 x 0.2 s), where a stage whose
    calls took milliseconds is stalled at the base limit (0.3 s). The soak under a CPU hog
    restarted stages whose slow decodes were progressing, and each restart added a second decode
    beside the first until the budget was spent and the session failed."""
    from app.pipeline.supervisor import Supervisor

    slow = _Worker([0.2, 0.2, 0.5], "final").stage
    quick = _Worker([0.01, 0.01, 0.5], "asr").stage
    sup = Supervisor([slow, quick], slow.bus, slow.clock, SupervisorConfig(stall_s=0.3, stall_factor=5, poll_s=0.02))
    for s in (slow, quick):
        s.start()
    sup.start()
    for s in (slow, quick):
        s.join(5)
    sup.stop()
    assert [r.stage for r in sup.restarts] == ["asr"] and sup.restarts[0].error.startswith("StageStalled")
    assert quick.restarts == 1 and slow.restarts == 0
    assert slow.stall_limit(0.3, 5) == pytest.approx(2.5, abs=0.3)  # the 0.5 s call counts now
    assert quick.stall_limit(0.3, 5) == pytest.approx(0.3)  # its stalled call never completed as its own


def test_waiting_for_a_backend_another_stage_is_using_is_not_a_stall():
    """The first and the second pass share the recogniser, which serialises its calls: a
    first-pass step that waits out a long second-pass decode is waiting, not stalled. The wait
    is outside the watchdog's clock (at most stage.LOCK_WAIT_S); only the call itself is timed."""
    from app.pipeline.engine import EventBus
    from app.pipeline.queues import FakeClock
    from app.pipeline.stage import Stage
    from app.pipeline.supervisor import Supervisor

    class Shared:
        def __init__(self):
            self.call_lock = threading.RLock()

        def decode(self, seconds):
            with self.call_lock:
                time.sleep(seconds)

    backend = Shared()
    started = threading.Event()

    class Long(Stage):
        def loop(self):
            started.set()
            self.watched(backend.decode, 0.7)  # the second pass: a long decode, under the 1 s limit

    class Short(Stage):
        def loop(self):
            started.wait(2)
            time.sleep(0.02)
            self.watched(backend.decode, 0.6)  # waits ~0.68 s for the lock, then decodes 0.6 s

    bus, clock = EventBus(), FakeClock()
    long_, short = Long("final", bus, clock), Short("asr", bus, clock)
    sup = Supervisor([long_, short], bus, clock, SupervisorConfig(stall_s=1.0, stall_factor=1, poll_s=0.01))
    # timed from before the wait, the short stage's call ran 1.28 s, past the 1 s limit
    long_.start()
    short.start()
    sup.start()
    long_.join(5)
    short.join(5)
    sup.stop()
    assert sup.restarts == []
