"""The session runner with fake backends: one loop for every source and running session."""

import threading
from types import SimpleNamespace

import numpy as np
import pytest

from app.pipeline.engine import EventBus, PipelineConfig, SessionRecord, StreamingPipeline
from app.pipeline.latency import ArrivalClock, LatencyTracker
from app.pipeline.messages import DubChunk, Segment, Translation
from app.pipeline.protocols import Word
from app.pipeline.queues import MonotonicClock
from app.pipeline.ringbuffer import AudioRing
from app.pipeline.segmenter import SegmenterConfig
from app.session.models import LoadedModels
from app.session.options import SessionOptions
from app.session.outputs import Outputs
from app.session.runner import FileSource, run_session

from .fakes import FakeASR, FakeMT, FakeTTS, FakeVAD, speech

OPTS = SessionOptions(pair="en-en", realtime=False)


def fake_models() -> LoadedModels:
    plan = SimpleNamespace(pair="en-en", models={"asr": "fake-asr", "mt": "fake-mt", "tts": "fake-tts"})
    return LoadedModels(plan, FakeASR(), FakeMT(), FakeTTS(), FakeVAD(), "numpy", 0.0, 0.0)


def pipeline(models, fail_mt_at: int | None = None) -> StreamingPipeline:
    cfg = PipelineConfig()
    cfg.asr.catch_up = False
    cfg.mt.previews = False
    cfg.segmenter = SegmenterConfig(lang="en", eager_units=0)
    cfg.supervision.max_restarts = 0
    mt = models.mt
    if fail_mt_at is not None:
        real = mt.translate

        def translate(source, target_prefix="", beam_size=None):
            if len(mt.calls) + 1 >= fail_mt_at:
                raise RuntimeError("injected")
            return real(source, target_prefix, beam_size)

        mt = SimpleNamespace(name="fake-mt", source_lang="en", calls=mt.calls, translate=translate)
    return StreamingPipeline(models.asr, mt, models.tts, models.vad, cfg)


def test_a_file_session_runs_to_its_summary_and_leaves_no_thread_behind():
    before = threading.active_count()
    models = fake_models()
    seen = []
    summary = run_session(pipeline(models), models, OPTS, FileSource(speech(6.0, 1.0), "six.wav", realtime=False),
                          sinks=[seen.append])
    words = " ".join(s["source"] for s in summary["segments"]).replace(".", "").split()
    assert words == [f"w{i}z" for i in range(12)]
    assert summary["mode"] == "pipeline/fast" and summary["input"] == "six.wav" and summary["audio_s"] == 7.0
    assert any(isinstance(ev, Translation) for ev in seen)
    assert "error" not in summary
    deadline = threading.Event()
    for _ in range(50):  # worker threads end when the session is released
        if threading.active_count() <= before:
            break
        deadline.wait(0.05)
    assert threading.active_count() <= before


def test_the_dub_audio_is_kept_only_when_a_dub_file_is_asked_for(tmp_path):
    models = fake_models()
    pipe = pipeline(models)
    run_session(pipe, models, OPTS, FileSource(speech(4.0, 1.0), "a.wav", realtime=False))
    assert pipe.record.keep_dub_audio is False and pipe.record.dub == []
    pipe = pipeline(models)
    dub = tmp_path / "dub.wav"
    run_session(pipe, models, OPTS, FileSource(speech(4.0, 1.0), "a.wav", realtime=False),
                outputs=Outputs(dub_out=str(dub)))
    assert pipe.record.dub and dub.stat().st_size > 44


def test_a_failed_session_reports_its_error_and_keeps_what_was_processed(tmp_path):
    models = fake_models()
    srt = tmp_path / "out.srt"
    summary = run_session(pipeline(models, fail_mt_at=3), models, OPTS,
                          FileSource(speech(8.0, 1.0), "a.wav", realtime=False), outputs=Outputs(srt=str(srt)))
    assert "mt stage failed" in summary["error"]
    assert srt.read_text().count("-->") == sum(1 for s in summary["segments"] if s["target"]) >= 1


class ScriptedSession:
    """A RunningSession that is not the engine (as the cloud client is not): the runner drives it
    through the protocol alone."""

    kind = "cloud"

    def __init__(self):
        self.clock = MonotonicClock()
        self.bus, self.arrival = EventBus(), ArrivalClock()
        self.tracker, self.record = LatencyTracker(self.arrival), SessionRecord()
        self.bus.subscribe(self.tracker)
        self.bus.subscribe(self.record)
        self.ring = AudioRing(16000 * 30)
        self.started_at = self.finished_at = 0.0
        self.first_audio_at = None
        self.calls = []

    def start(self):
        self.calls.append("start")
        self.started_at = self.clock.now()

    def push_audio(self, samples, wait_if_full=False, at=None):
        if self.first_audio_at is None:
            self.first_audio_at = self.clock.now()
        self.ring.write(samples)
        self.arrival.record(self.ring.written, self.clock.now())

    def failed(self):
        return False

    def finish(self, timeout=600.0):
        self.calls.append("finish")
        now = self.clock.now()
        seg = Segment(0, (Word(" hello", 0.0, 0.5), Word(" there", 0.5, 1.0)), "pause", True, now, "en")
        self.bus.publish(seg)
        self.bus.publish(Translation(0, seg.text, "HELLO THERE", 0.0, 1.0, now, segment=seg))
        self.bus.publish(DubChunk(0, np.zeros(800, np.float32), 8000, "HELLO THERE", now, now, True, 1.0))
        self.finished_at = now

    def abort(self):
        self.calls.append("abort")

    def stage_stats(self):
        return {"cloud": {"status": "cloud"}}


class RecordingObs:
    def __init__(self):
        self.calls = []

    def attach(self, session, capture=None):
        self.calls.append("attach")

    def write_report(self, summary, session):
        self.calls.append("report")

    def close(self):
        self.calls.append("close")


def test_any_running_session_gets_observability_and_is_released():
    """`relay run --cloud --input` built no observability (--metrics-port, --log-level, --report
    were ignored) and kept all dub audio: the runner gives every session the same treatment."""
    s, obs = ScriptedSession(), RecordingObs()
    summary = run_session(s, None, OPTS, FileSource(speech(1.0), "a.wav", realtime=False), obs=obs)
    assert s.calls == ["start", "finish", "abort"]
    assert obs.calls == ["attach", "report", "close"]
    assert summary["mode"] == "cloud/file" and summary["segments"][0]["target"] == "HELLO THERE"
    assert summary["models"] == {} and s.record.dub == []


def test_a_second_interrupt_while_finishing_still_releases_the_session(tmp_path):
    s = ScriptedSession()

    def interrupted(timeout=600.0):
        raise KeyboardInterrupt

    s.finish = interrupted
    with pytest.raises(KeyboardInterrupt):
        run_session(s, None, OPTS, FileSource(speech(1.0), "a.wav", realtime=False),
                    outputs=Outputs(srt=str(tmp_path / "x.srt")))
    assert s.calls[-1] == "abort" and (tmp_path / "x.srt").exists()
