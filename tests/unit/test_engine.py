"""The local engine as a RunningSession: abort ends every thread it started, overruns of the
audio ring are counted, and the stages hold their backends as plain attributes."""

import gc
import threading
import time
import weakref

import numpy as np
import pytest

from app.pipeline.engine import LocalEngine, PipelineConfig, SerialCascade, StreamingPipeline
from app.pipeline.mt_stage import MTConfig
from app.pipeline.recognizer import ASRConfig
from app.pipeline.segmenter import SegmenterConfig
from app.pipeline.supervisor import SupervisorConfig

from .fakes import FakeASR, FakeMT, FakeTTS, FakeVAD, speech


def cfg(**kw):
    return PipelineConfig(asr=ASRConfig(catch_up=False), mt=MTConfig(previews=False),
                          segmenter=SegmenterConfig(lang="en", eager_units=0), **kw)


def wait_for_threads(baseline: int, timeout: float = 5.0) -> int:
    deadline = time.monotonic() + timeout
    while threading.active_count() > baseline and time.monotonic() < deadline:
        time.sleep(0.01)
    return threading.active_count()


@pytest.mark.parametrize("cls", [StreamingPipeline, SerialCascade])
def test_abort_ends_every_thread_the_session_started(cls):
    baseline = threading.active_count()
    refs = []
    audio = speech(2.0, 0.5)
    for i in range(50):
        # a stall watchdog that polls, slow models with work in flight, queued input
        pipe = cls(FakeASR(delay=0.01), FakeMT(delay=0.01), FakeTTS(), FakeVAD(),
                   cfg(supervision=SupervisorConfig(stall_s=5.0, poll_s=0.01)))
        assert pipe.kind == "local" and isinstance(pipe, LocalEngine)
        pipe.start()
        for off in range(0, len(audio), 3200):
            pipe.push_audio(audio[off:off + 3200])
        if i % 2:
            time.sleep(0.02)
        pipe.abort()
        pipe.abort()  # idempotent
        assert not any(t.is_alive() for t in pipe.threads)
        refs.append(weakref.ref(pipe))
        del pipe
    assert wait_for_threads(baseline) == baseline, [t.name for t in threading.enumerate()]
    gc.collect()
    assert not [r for r in refs if r() is not None], "an aborted session is still referenced"


def test_abort_is_harmless_before_start_and_after_finish():
    pipe = StreamingPipeline(FakeASR(), FakeMT(), FakeTTS(), FakeVAD(), cfg())
    pipe.abort()  # never started
    pipe = StreamingPipeline(FakeASR(), FakeMT(), FakeTTS(), FakeVAD(), cfg())
    pipe.start()
    pipe.push_audio(speech(2.0, 1.0))
    pipe.finish(timeout=30)
    segments = list(pipe.record.segments)
    pipe.abort()
    assert segments and pipe.record.segments == segments and not pipe.failed()


class HeldMT(FakeMT):
    """Blocks in its first call until released: the segment queue fills however slow the box is."""

    def __init__(self):
        super().__init__(delay=0.2)
        self.release = threading.Event()

    def translate(self, source, target_prefix="", beam_size=None):
        self.release.wait(30)
        return super().translate(source, target_prefix, beam_size)


def test_abort_drops_what_is_queued_instead_of_working_through_it():
    mt = HeldMT()
    c = cfg()
    c.segmenter = SegmenterConfig(lang="en", eager_units=1)  # a piece per commit: a long MT queue
    pipe = StreamingPipeline(FakeASR(), mt, None, FakeVAD(), c)
    pipe.start()
    audio = speech(8.0, 1.0)
    for off in range(0, len(audio), 1600):
        pipe.push_audio(audio[off:off + 1600], wait_if_full=True)
    deadline = time.monotonic() + 30
    while len(pipe.seg_q) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(pipe.seg_q) >= 3, "the segment queue never filled behind the held translator"
    mt.release.set()  # the call in flight ends (a model call cannot be cut short); the queue is dropped
    t0 = time.monotonic()
    pipe.abort()
    assert time.monotonic() - t0 < 1.0 and not any(s.is_alive() for s in pipe.stages)
    assert len(mt.calls) < len(pipe.record.segments)


def test_ring_overruns_are_counted_and_the_session_goes_on():
    # a 2 s ring and 5 s of audio pushed before recognition starts: the writer laps audio the
    # recogniser had not read (a live capture far ahead of recognition)
    pipe = StreamingPipeline(FakeASR(), FakeMT(), None, FakeVAD(), cfg(ring_seconds=2.0))
    pipe.push_audio(speech(5.0))
    pipe.start()
    deadline = time.monotonic() + 10
    while pipe.asr_stage.cursor.position < pipe.ring.written and time.monotonic() < deadline:
        time.sleep(0.01)
    pipe.push_audio(np.zeros(16000, np.float32))  # less than the ring holds: nothing unread is lost
    pipe.finish(timeout=30)
    assert pipe.stage_stats()["asr"]["overruns"] == 1
    assert pipe.asr_stage.cursor.overruns == 1
    assert pipe.record.segments  # recognition went on from the audio the ring still held


def test_stages_hold_their_backends_and_a_swapped_recogniser_takes_the_next_step():
    asr, alt, mt, tts = FakeASR(), FakeASR(), FakeMT(), FakeTTS()
    pipe = StreamingPipeline(asr, mt, tts, FakeVAD(), cfg())
    assert pipe.asr_stage.asr is asr and pipe.mt_stage.mt is mt and pipe.tts_stage.tts is tts
    pipe.start()
    audio = speech(6.0, 1.0)
    half = len(audio) // 2
    pipe.push_audio(audio[:half], wait_if_full=True)
    deadline = time.monotonic() + 10
    while asr.calls == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    pipe.asr_stage.asr = alt  # what the degradation policy does (app/session/build.py)
    assert pipe.asr_stage.asr is alt
    pipe.push_audio(audio[half:], wait_if_full=True)
    pipe.finish(timeout=30)
    assert asr.calls > 0 and alt.calls > 0


def test_workers_alive_counts_stage_workers_until_they_end():
    """app.main.entry leaves without finalising while a worker is stuck in a model call (the
    model library's C++ destructors would race it): this is what it asks."""
    import threading

    from app.pipeline.stage import Stage, workers_alive

    release = threading.Event()

    class Stuck(Stage):
        def loop(self):
            release.wait(10)

    base = workers_alive()
    s = Stuck("stuck", bus=None, clock=None)
    s.start()
    assert workers_alive() == base + 1
    release.set()
    s.join(5)
    assert workers_alive() == base
