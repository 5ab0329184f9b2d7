"""The dub catches up instead of drifting ever later."""

from app.pipeline.engine import EventBus
from app.pipeline.messages import DubChunk, Translation
from app.pipeline.queues import BoundedQueue, ControlChannel, FakeClock, FullPolicy
from app.pipeline.stages import TTSConfig, TTSStage, clauses

from .fakes import FakeTTS


def run_stage(translations, played_at, now):
    clock = FakeClock(now)
    bus = EventBus()
    chunks = []
    bus.subscribe(lambda e: chunks.append(e) if isinstance(e, DubChunk) else None)
    q = BoundedQueue(16, FullPolicy.BLOCK)
    tts = FakeTTS()
    stage = TTSStage(tts, q, ControlChannel(), TTSConfig(catch_up_after_s=2.0, skip_after_s=6.0), bus, clock,
                     played_at)
    for t in translations:
        q.put(t)
    q.close()
    stage.run()
    return chunks, tts


def tr(seq, src_end, text="one two three four"):
    return Translation(seq, "src", text, src_end - 1, src_end, 0.0)


def test_on_time_dub_is_normal_speed():
    chunks, tts = run_stage([tr(0, 1.0)], played_at=lambda t: t, now=1.5)
    assert chunks[0].speed == 1.0 and not chunks[0].skipped
    assert chunks[0].first_of_segment and chunks[0].start_at >= chunks[0].ready_at


def test_lagging_dub_speeds_up():
    chunks, tts = run_stage([tr(0, 1.0)], played_at=lambda t: t, now=5.0)  # 4 s behind
    assert 1.0 < chunks[0].speed <= 1.6
    assert tts.texts[0][1] == chunks[0].speed


def test_far_behind_dub_skips_the_segment():
    chunks, _ = run_stage([tr(0, 1.0)], played_at=lambda t: t, now=10.0)
    assert chunks[0].skipped and len(chunks[0].audio) == 0


def test_dub_never_overlaps_itself():
    chunks, _ = run_stage([tr(0, 1.0), tr(1, 1.2)], played_at=lambda t: t, now=1.5)
    spans = [(c.start_at, c.start_at + len(c.audio) / c.sample_rate) for c in chunks]
    for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
        assert b0 >= a1 - 1e-9


def test_clauses_split_and_glue_short_ones():
    assert clauses("Hello, everyone. Let's start now.") == ["Hello, everyone. Let's start now."]
    assert clauses("In order to control costs, we suggest a budget.") == [
        "In order to control costs,", "we suggest a budget."]
