"""The degradation policy: rule table, hysteresis, actions, and a slowed pipeline."""

import threading
import time

from app.pipeline.engine import EventBus, PipelineConfig, StreamingPipeline
from app.pipeline.policy import (
    PipelineActuator,
    PolicyConfig,
    PolicyEngine,
    PolicyRunner,
    PolicyTransition,
    Rule,
    default_rules,
    memory_probe,
)
from app.pipeline.queues import ControlChannel, FakeClock
from app.pipeline.segmenter import SegmenterConfig
from app.pipeline.speculation import SpeculationConfig, SpeculationController
from app.pipeline.mt_stage import MTAdjust, MTConfig
from tests.unit.fakes import FakeASR, FakeMT, speech


def latency_engine(**kw):
    return PolicyEngine(default_rules(**kw))


def test_latency_steps_down_twice_and_back_up_only_after_hold():
    eng = latency_engine()
    eng.signal("subtitle_p99_s", 2.5)
    [t] = eng.tick(0.0)
    assert (t.rule, t.from_level, t.to_level, t.level) == ("latency", 0, 1, 1)
    assert set(t.actions) == {"speculation:off", "beam:3"} and "2.5 > 2" in t.reason
    assert eng.tick(4.9) == []  # the first step gets time to work
    [t] = eng.tick(5.0)
    assert t.to_level == 2 and t.actions == ("beam:1",)
    assert eng.tick(20.0) == []  # no third step for a Chinese source
    eng.signal("subtitle_p99_s", 1.0)
    assert eng.tick(21.0) == []
    assert eng.tick(35.9) == []  # clear for 14.9 s < hold 15 s
    [t] = eng.tick(36.0)
    assert (t.from_level, t.to_level) == (2, 1) and "clear for 15 s" in t.reason
    eng.signal("subtitle_p99_s", 2.1)  # bad again: the hold restarts
    assert eng.tick(40.0) == []  # only 4 s since the last change: no second step down yet
    eng.signal("subtitle_p99_s", 1.0)
    assert eng.tick(41.0) == [] and eng.tick(55.0) == []
    [t] = eng.tick(56.0)
    assert t.to_level == 0 and eng.level == 0
    s = eng.summary(60.0)
    assert s["seconds_at_level"] == {"0": 4.0, "1": 5.0 + 20.0, "2": 31.0}
    assert len(s["transitions"]) == 4 and s["max_level"] == 2


def test_english_source_has_a_recogniser_step():
    eng = latency_engine(english_source=True)
    eng.signal("subtitle_p99_s", 3.0)
    levels = [t.to_level for now in (0, 5, 10, 15) for t in eng.tick(now)]
    assert levels == [1, 2, 3]
    assert "asr:tiny.en" in eng.active_actions()


def test_memory_pressure_halves_micro_batch_and_switches_to_int8():
    class Stage:
        def __init__(self, mt):
            self.mt, self.beam_size, self.micro_batch, self.control = mt, 4, 8, ControlChannel()

    class PrecisionMT(FakeMT):
        compute_type = "float32"

        def set_compute_type(self, ct):
            self.compute_type = ct
            return "changed"

    stage = Stage(PrecisionMT())
    act = PipelineActuator(stage, None)
    eng = PolicyEngine(default_rules())
    eng.signal("memory_frac", 0.95)
    [t] = eng.tick(0.0)
    fx = act.apply(list(t.active), t.reason)
    [msg] = stage.control.drain()
    assert isinstance(msg, MTAdjust) and msg.micro_batch == 4 and msg.compute_type == "int8"
    assert any("micro-batch 8 → 4" in f and "no effect here" in f for f in fx)
    eng.signal("memory_frac", 0.5)
    eng.tick(1.0)
    [t] = eng.tick(31.0)
    act.apply(list(t.active), t.reason)
    [msg] = stage.control.drain()
    assert msg.micro_batch == 8 and msg.compute_type == "float32"  # stepping up restores


def test_an_action_without_effect_says_so():
    class Int8MT(FakeMT):
        compute_type = "int8_float32"

        def set_compute_type(self, ct):
            raise AssertionError("must not reload")

    class Stage:
        mt, beam_size, micro_batch, control = Int8MT(), 1, 1, ControlChannel()

    fx = PipelineActuator(Stage(), None).apply(["micro_batch:half", "compute:int8", "local_models"], "memory")
    assert "no effect: MT already int8_float32" in fx
    assert "no effect: not a cloud session" in fx
    assert Stage.control.drain() == []  # nothing to change: micro-batch 1 stays 1, beam stays 1


def test_cloud_link_signal_switches_to_local_models_and_back():
    clock = FakeClock()
    bus = EventBus()
    seen = []
    bus.subscribe(seen.append)
    act = PipelineActuator(None, None)
    calls = []
    act.cloud_hooks.append(calls.append)
    rules = default_rules()
    runner = PolicyRunner(PolicyEngine(rules), act, PolicyConfig(rules=rules), clock, bus.publish, lambda t: 0.0)
    bus.subscribe(runner)
    runner.signal("cloud_link", False)
    assert calls == [True]
    runner.signal("cloud_link", True)
    clock.advance(9.0)
    runner.tick()
    assert calls == [True]
    clock.advance(1.5)
    runner.tick()
    assert calls == [True, False]
    trs = [e for e in seen if isinstance(e, PolicyTransition)]
    assert [t.to_level for t in trs] == [1, 0] and trs[0].effects == ("local models",)


def test_memory_probe_reads_rss_against_budget():
    frac = memory_probe("numpy", budget_mb=1e6)()
    assert 0 < frac < 0.01
    assert memory_probe("numpy", budget_mb=1.0)() > 1.0


class BeamSlowMT(FakeMT):
    """Slow at beam ≥ 3, fast at beam 1: what the policy's beam step is meant to fix."""

    def __init__(self, slow_s, fast_s):
        super().__init__()
        self.slow_s, self.fast_s = slow_s, fast_s

    def translate(self, source, target_prefix="", beam_size=None):
        self.delay = self.slow_s if (beam_size or 1) >= 3 else self.fast_s
        return super().translate(source, target_prefix, beam_size)


def test_slowed_backend_steps_down_recovers_and_steps_back_up():
    rules = (Rule("latency", "subtitle_p99_s", 1.6, (("speculation:off", "beam:1"),), hold_s=1.5,
                  step_after_s=1.0),)
    pcfg = PolicyConfig(rules=rules, latency_window_s=1.5)
    mt = BeamSlowMT(slow_s=1.2, fast_s=0.0)
    cfg = PipelineConfig(mt=MTConfig(beam_size=4, previews=False),
                         segmenter=SegmenterConfig(lang="en", max_units=2, eager_units=2))
    pipe = StreamingPipeline(FakeASR(), mt, None, None, cfg)
    spec = SpeculationController(SpeculationConfig("auto"), pipe.clock, pipe.bus.publish)
    pipe.mt_stage.speculation = spec
    runner = PolicyRunner(PolicyEngine(rules, pipe.clock.now()), PipelineActuator(pipe.mt_stage, spec), pcfg,
                          pipe.clock, pipe.bus.publish, pipe.arrival.played_at)
    pipe.bus.subscribe(runner)
    lock = threading.Lock()
    beams = []  # (time, beam) of each committed translation
    pipe.bus.subscribe(lambda ev: type(ev).__name__ == "Translation" and beams.append(pipe.mt_stage.beam_size))
    pipe.start()
    audio = speech(14.0)
    t0 = time.monotonic()
    for i in range(0, len(audio), 1600):  # real time, so latency is what a listener sees
        pipe.clock.sleep_until(pipe.started_at + (i + 1600) / 16000)
        pipe.push_audio(audio[i:i + 1600])
    pipe.finish(timeout=60)
    with lock:
        trs = list(runner.engine.transitions)
    downs = [t for t in trs if t.to_level > t.from_level]
    ups = [t for t in trs if t.to_level < t.from_level]
    assert downs and ups and downs[0].at < ups[0].at
    assert any("MT beam 4 → 1" in f for f in downs[0].effects)
    assert "undo beam:1" in ups[0].actions
    assert 1 in beams and 4 in beams
    # latency recovered while degraded: the step back up came from a clear window
    assert "clear for 1.5 s" in ups[0].reason
    segs = pipe.record.segments
    assert len(segs) >= 10 and all(s["target"] is not None for s in segs)  # nothing lost
    assert time.monotonic() - t0 < 40
    s = runner.summary()
    assert set(s["seconds_at_level"]) >= {"0", "1"}


# -- two passes: the policy acts on first-display and final latency, never on a no-op step ----

class _FinalStage:
    asr_beam = 5


def _two_pass_actuator(beam=1):
    class Stage:
        mt, beam_size, micro_batch, control = FakeMT(), beam, 1, ControlChannel()

    asr = ControlChannel()
    return PipelineActuator(Stage(), None, asr_control=asr, final_stage=_FinalStage()), asr


def test_steps_that_change_nothing_here_are_pruned_from_the_rules():
    act, _ = _two_pass_actuator(beam=1)  # greedy MT, no speculation, int8 MT
    rules = {r.name: r for r in act.prune(default_rules(two_pass=True))}
    # beam:3 / beam:1 cannot lower a beam of 1, speculation is not there: nothing is left
    assert "latency" not in rules
    assert rules["final"].steps == (("first_pass:thin",), ("final_beam:2",))
    assert "memory" not in rules  # micro-batch 1, no compute type to change: nothing to do
    assert rules["cloud"].steps == (("local_models",),)  # the cloud client hooks in later
    # with a beam to lower, the beam steps stay
    act4, _ = _two_pass_actuator(beam=4)
    assert act4.prune(default_rules(two_pass=True))[0].steps == (("speculation:off", "beam:3"), ("beam:1",))


def test_the_policy_never_sits_on_a_step_without_effect():
    act, _ = _two_pass_actuator(beam=1)
    rules = act.prune(default_rules(two_pass=True))
    eng = PolicyEngine(rules)
    eng.signal("subtitle_p99_s", 5.0)
    eng.signal("final_lag_p95_s", 5.0)
    for t in range(0, 60, 1):
        for tr in eng.tick(float(t)):
            fx = act.apply(list(tr.active), tr.reason)
            assert fx and not all(f.startswith("no effect") for f in fx), tr


def test_late_finals_thin_the_first_pass_then_lower_the_second_pass_beam_and_undo_it():
    clock = FakeClock()
    bus = EventBus()
    act, asr = _two_pass_actuator()
    rules = act.prune(default_rules(two_pass=True))
    runner = PolicyRunner(PolicyEngine(rules), act, PolicyConfig(rules=rules), clock, bus.publish, lambda t: t)
    bus.subscribe(runner)
    from app.pipeline.messages import Control, FinalSentence

    def final(i, end, lag):
        clock.t = end + lag
        bus.publish(FinalSentence(i, (), "s", "t", end - 2, end, clock.t, None, (), "", "", "pause", False, end))

    for i in range(4):
        final(i, 10.0 + 3 * i, 4.0)  # four finals 4 s after their sentence ended
    msgs = asr.drain()
    assert [(m.kind, m.by) for m in msgs] == [(Control.THIN, "policy")]
    assert _FinalStage.asr_beam == 5
    final(5, 40.0, 4.0)  # still late 10 s on: the second pass searches less
    assert act.final_stage.asr_beam == 2
    # on time for long enough: both undone, one step each hold time
    for i in range(6, 40):
        final(i, 45.0 + 3 * i, 0.6)
    assert act.final_stage.asr_beam == 5
    assert [m.kind for m in asr.drain()] == [Control.UNTHIN]
    act.final_stage.asr_beam = 5


def test_late_finals_first_take_the_llm_off_the_finals_and_give_it_back_when_on_time():
    """The issue's rule: an LLM that makes the finals late hands them to the pair's translator
    (the first step, before any thinning), and gets them back once finals are on time again."""
    class LLMFinalStage:
        asr_beam = 5
        llm = object()  # an LLM makes the finals
        llm_paused = False

    clock = FakeClock()
    bus = EventBus()

    class Stage:
        mt, beam_size, micro_batch, control = FakeMT(), 1, 1, ControlChannel()

    asr = ControlChannel()
    act = PipelineActuator(Stage(), None, asr_control=asr, final_stage=LLMFinalStage())
    rules = act.prune(default_rules(two_pass=True))
    assert {r.name: r for r in rules}["final"].steps == (("final_mt:pair",), ("first_pass:thin",), ("final_beam:2",))
    runner = PolicyRunner(PolicyEngine(rules), act, PolicyConfig(rules=rules), clock, bus.publish, lambda t: t)
    bus.subscribe(runner)
    from app.pipeline.messages import FinalSentence

    def final(i, end, lag):
        clock.t = end + lag
        bus.publish(FinalSentence(i, (), "s", "t", end - 2, end, clock.t, None, (), "", "", "pause", False, end))

    for i in range(4):
        final(i, 10.0 + 3 * i, 4.0)
    assert act.final_stage.llm_paused and not asr.drain()  # the LLM goes first, the first pass is untouched
    for i in range(6, 40):
        final(i, 45.0 + 3 * i, 0.6)
    assert not act.final_stage.llm_paused


def test_a_session_that_is_not_real_time_has_no_latency_rules():
    """A file read as fast as it goes is "late" by the arrival clock from its first second; the
    policy must not lower its beams for that (it took a --fast run's second-pass beam to 2)."""
    names = [r.name for r in default_rules(two_pass=True, realtime=False)]
    assert names == ["memory", "cloud"]
    assert [r.name for r in default_rules(two_pass=True)] == ["latency", "final", "memory", "cloud"]
