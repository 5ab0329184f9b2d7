"""Speculation bookkeeping and the MT stage's use of drafts, with fake backends."""

import threading

from app.pipeline.engine import PipelineConfig, StreamingPipeline
from app.pipeline.mt_stage import MTConfig
from app.pipeline.queues import FakeClock
from app.pipeline.segmenter import SegmenterConfig
from app.pipeline.speculation import DraftOutcome, SpeculationConfig, SpeculationController, SpeculationEvent
from tests.unit.fakes import FakeASR, FakeMT, speech

REJECT = DraftOutcome(drafted=5, accepted=0, saved_steps=0)
ACCEPT = DraftOutcome(drafted=5, accepted=5, saved_steps=6)


def test_three_rejections_fall_back_then_resume_after_cooldown():
    clock = FakeClock()
    events = []
    ctl = SpeculationController(SpeculationConfig("auto", reject_limit=3, cooldown_s=10), clock, events.append)
    for _ in range(2):
        assert ctl.should_draft()
        ctl.record(REJECT)
    assert ctl.should_draft() and not events
    ctl.record(REJECT)
    assert [e.kind for e in events] == ["fallback"]
    clock.advance(9.9)
    assert not ctl.should_draft()
    clock.advance(0.2)
    assert ctl.should_draft()
    assert [e.kind for e in events] == ["fallback", "resume"]
    s = ctl.summary()
    assert s["fallbacks"] == 1 and s["drafts"] == 3 and s["rejected_tokens"] == 15 and s["plain_calls"] == 1


def test_an_accepted_draft_resets_the_rejection_count():
    ctl = SpeculationController(SpeculationConfig("auto"), FakeClock())
    for oc in (REJECT, REJECT, ACCEPT, REJECT, REJECT):
        ctl.record(oc)
    assert ctl.fallbacks == 0
    ctl.record(REJECT)
    assert ctl.fallbacks == 1
    assert ctl.summary()["acceptance"] == round(5 / 30, 3)


def test_mode_on_never_rolls_back_and_off_never_drafts():
    on = SpeculationController(SpeculationConfig("on"), FakeClock())
    for _ in range(10):
        on.record(REJECT)
    assert on.should_draft() and on.fallbacks == 0
    off = SpeculationController(SpeculationConfig("off"), FakeClock())
    assert not off.should_draft()
    assert not off.set_policy_enabled(False, "latency")


def test_streams_roll_back_independently():
    ctl = SpeculationController(SpeculationConfig("auto"), FakeClock())
    for _ in range(3):
        ctl.record(REJECT, "preview")
    assert not ctl.should_draft("preview") and ctl.should_draft("mt")


def test_policy_switch_is_an_event_and_blocks_drafts():
    events = []
    ctl = SpeculationController(SpeculationConfig("auto"), FakeClock(), events.append)
    assert ctl.set_policy_enabled(False, "latency p99 2.4 > 2")
    assert not ctl.should_draft()
    assert not ctl.set_policy_enabled(False, "again")  # no change, no event
    assert ctl.set_policy_enabled(True, "clear")
    assert ctl.should_draft()
    assert [e.kind for e in events] == ["disabled", "enabled"]


class DraftingMT(FakeMT):
    """Fake verifier: a draft word is accepted while it equals the plain output's word."""

    def __init__(self, adversarial=False):
        super().__init__()
        self.adversarial = adversarial
        self.drafts = []

    def translate_with_draft(self, source, draft, target_prefix="", beam_size=None):
        if self.adversarial:
            draft = " ".join("X" for _ in draft.split())
        self.drafts.append(draft)
        out = self.translate(source, target_prefix, beam_size)
        d, o = draft.split(), out.split()
        n = 0
        while n < min(len(d), len(o)) and d[n] == o[n]:
            n += 1
        return out, DraftOutcome(len(d), n, len(o) + 1 if n == len(d) == len(o) else 0)


def run_pipeline(mt, mode="auto"):
    # two-word pieces: each sentence's second piece has the first one's translation as its draft
    cfg = PipelineConfig(mt=MTConfig(previews=False, beam_size=1),
                         segmenter=SegmenterConfig(lang="en", max_units=2, eager_units=2))
    pipe = StreamingPipeline(FakeASR(), mt, None, None, cfg)
    events = []
    lock = threading.Lock()

    def keep(ev):
        with lock:
            events.append(ev)
    pipe.bus.subscribe(keep)
    ctl = SpeculationController(SpeculationConfig(mode, cooldown_s=60), pipe.clock, pipe.bus.publish)
    pipe.mt_stage.speculation = ctl
    pipe.start()
    audio = speech(12.0)
    for i in range(0, len(audio), 1600):
        pipe.push_audio(audio[i:i + 1600], wait_if_full=True)
    pipe.finish(timeout=30)
    return pipe, ctl, events


def test_stage_drafts_with_the_sentences_previous_translation():
    mt = DraftingMT()
    pipe, ctl, _ = run_pipeline(mt)
    assert ctl.drafts > 0 and mt.drafts
    # every draft is an earlier full output of the same sentence
    outputs = {call[0].upper().replace("W", "T") for call in mt.calls}
    assert all(d in outputs for d in mt.drafts)
    assert ctl.accepted_tokens > 0


def test_adversarial_drafts_trigger_the_fallback_event_and_no_segment_is_lost():
    mt = DraftingMT(adversarial=True)
    pipe, ctl, events = run_pipeline(mt)
    falls = [e for e in events if isinstance(e, SpeculationEvent) and e.kind == "fallback"]
    assert ctl.fallbacks >= 1 and falls
    assert ctl.accepted_tokens == 0
    assert ctl.plain_calls > 0  # after the fallback, calls decode plainly
    segs = pipe.record.segments
    assert segs and all(s["target"] is not None for s in segs)
