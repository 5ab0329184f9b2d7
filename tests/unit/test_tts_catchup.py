"""The dub catches up instead of drifting ever later, and its clauses carry no long padding."""

import numpy as np

from app.pipeline.engine import EventBus
from app.pipeline.messages import DubChunk, Translation
from app.pipeline.queues import BoundedQueue, ControlChannel, FakeClock, FullPolicy
from app.pipeline.tts_stage import TTSConfig, TTSStage, clauses, speech_bounds, trim_clause

from .fakes import FakeTTS


def run_stage(translations, played_at, now, **cfg):
    clock = FakeClock(now)
    bus = EventBus()
    chunks = []
    bus.subscribe(lambda e: chunks.append(e) if isinstance(e, DubChunk) else None)
    q = BoundedQueue(16, FullPolicy.BLOCK)
    tts = FakeTTS()
    stage = TTSStage(tts, q, ControlChannel(), TTSConfig(catch_up_after_s=2.0, skip_after_s=6.0, **cfg), bus, clock,
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


def test_a_file_read_faster_than_real_time_is_dubbed_on_its_source_timeline():
    """--fast: the whole file has arrived long before its dub could have been heard; the wall
    clock says "minutes behind", the source timeline says on time. Nothing is skipped or rushed."""
    segs = [tr(i, 3.0 * (i + 1)) for i in range(5)]  # 0.4 s of dub every 3 s of source
    chunks, _ = run_stage(segs, played_at=lambda t: 0.0, now=100.0, source_timeline=True)
    assert [c.seq for c in chunks] == [0, 1, 2, 3, 4]
    assert not any(c.skipped for c in chunks) and all(c.speed == 1.0 for c in chunks)
    # the wall-clock rule on the same input (the bug): all skipped
    chunks, _ = run_stage(segs, played_at=lambda t: 0.0, now=100.0)
    assert all(c.skipped for c in chunks)


def test_on_the_source_timeline_a_dub_longer_than_its_source_still_catches_up():
    words = " ".join(["word"] * 30)  # 3 s of dub for every 0.5 s of source
    segs = [tr(i, 1.0 + 0.5 * i, words) for i in range(6)]
    chunks, _ = run_stage(segs, played_at=lambda t: 0.0, now=100.0, source_timeline=True)
    assert chunks[0].speed == 1.0 and not chunks[0].skipped
    assert any(c.speed > 1.0 for c in chunks if not c.skipped)  # past 2 s behind: faster
    assert chunks[-1].skipped  # past 6 s behind: a segment is skipped rather than drift on


def test_dub_never_overlaps_itself():
    chunks, _ = run_stage([tr(0, 1.0), tr(1, 1.2)], played_at=lambda t: t, now=1.5)
    spans = [(c.start_at, c.start_at + len(c.audio) / c.sample_rate) for c in chunks]
    for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
        assert b0 >= a1 - 1e-9


def test_clauses_split_and_glue_short_ones():
    assert clauses("Hello, everyone. Let's start now.") == ["Hello, everyone. Let's start now."]
    assert clauses("In order to control costs, we suggest a budget.") == [
        "In order to control costs,", "we suggest a budget."]


def _padded(lead_s, speech_s, trail_s, rate=8000):
    t = np.arange(int(speech_s * rate)) / rate
    tone = (0.5 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    return np.concatenate([np.zeros(int(lead_s * rate), np.float32), tone,
                           np.full(int(trail_s * rate), 1e-4, np.float32)])


def test_clause_padding_is_trimmed_to_the_margins():
    rate = 8000
    out = list(trim_clause([_padded(0.06, 0.5, 0.2)], rate, 0.01, 0.06))
    assert len(out) == 1
    assert abs(len(out[0]) / rate - (0.01 + 0.5 + 0.06)) < 0.011
    a, b = speech_bounds(out[0], rate)
    assert a <= int(0.011 * rate) and len(out[0]) - b <= int(0.061 * rate)
    # None keeps the padding
    assert len(list(trim_clause([_padded(0.06, 0.5, 0.2)], rate, None, None))[0]) == int(0.76 * rate)


def test_only_the_clause_ends_are_trimmed_and_silent_end_chunks_dropped():
    rate = 8000
    parts = [np.zeros(800, np.float32), _padded(0.05, 0.3, 0.1), _padded(0.05, 0.3, 0.1),
             np.zeros(400, np.float32)]
    out = list(trim_clause(iter(parts), rate, 0.0, 0.0))
    assert len(out) == 2
    assert len(out[1]) == len(parts[2])  # a middle chunk keeps its padding, an end one loses it
    assert speech_bounds(out[0], rate)[0] == 0
    assert list(trim_clause([np.zeros(100, np.float32)], rate, 0.01, 0.06)) == []


def test_the_stage_lays_trimmed_audio_on_the_timeline():
    class PaddedTTS(FakeTTS):
        def synthesize(self, text, speed=1.0):
            self.texts.append((text, speed))
            yield _padded(0.06, 0.4, 0.2, self.sample_rate)

    clock = FakeClock(1.5)
    bus = EventBus()
    chunks = []
    bus.subscribe(lambda e: chunks.append(e) if isinstance(e, DubChunk) else None)
    q = BoundedQueue(16, FullPolicy.BLOCK)
    stage = TTSStage(PaddedTTS(), q, ControlChannel(), TTSConfig(), bus, clock, lambda t: t)
    q.put(tr(0, 1.0))
    q.close()
    stage.run()
    assert abs(len(chunks[0].audio) / 8000 - 0.47) < 0.011
