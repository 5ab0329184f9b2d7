"""A stronger translator for the finals (issue 25): the LLM translates each final sentence, the
pair's translator the first-pass pieces; in real time a final the LLM would finish past its budget
goes to the pair's translator; an LLM that fails leaves the final to the pair's translator; the
packs are optional, pinned and joined, and a missing one names its install command."""

import pytest

from app.core.errors import ModelMissing, UserError
from app.models import catalog
from app.models.loader import PairPlan, final_mt_pack
from app.pipeline.engine import StreamingPipeline
from app.pipeline.final_stage import FinalStage
from app.pipeline.queues import FakeClock

from .fakes import FakeASR, FakeMT, FakeTTS, FakeVAD, speech
from .test_final_stage import cfg, finals_of, run


class FakeLLM:
    name = "fake-llm"

    def __init__(self, fail=False):
        self.fail = fail
        self.calls = []

    def translate(self, source, target_prefix="", beam_size=None):
        self.calls.append(source)
        if self.fail:
            raise RuntimeError("llama_decode failed")
        return "LLM " + source.upper()


def _pipe(llm, budget, **final):
    tts = FakeTTS()
    mt = FakeMT()
    pipe = StreamingPipeline(FakeASR(), mt, tts, FakeVAD(), cfg(**final), final_vad=FakeVAD())
    pipe.final_stage.use_llm(llm, 0.0, budget)
    return pipe, mt, tts


def test_the_llm_translates_every_final_and_the_pair_translator_the_pieces():
    llm = FakeLLM()
    pipe, mt, tts = _pipe(llm, None)
    events = run(pipe, speech(2.0, 1.0, repeats=3))
    finals = finals_of(events)
    assert len(finals) == 3 and llm.calls == [f.source for f in finals]
    assert all(f.target == "LLM " + f.source.upper() and f.mt == "fake-llm" for f in finals)
    # the first-pass pieces were translated by the pair's translator, never by the LLM
    pieces = [e for e in events if type(e).__name__ == "Translation"]
    assert pieces and len(mt.calls) == len(pieces) and not any(p.target.startswith("LLM") for p in pieces)
    assert " ".join(t for t, _ in tts.texts).split() == " ".join(f.target for f in finals).split()
    st = pipe.stage_stats()["final"]
    assert st["final_mt"] == "fake-llm" and st["final_mt_llm"] == 3 and st["final_mt_fallback"] == 0


def test_past_its_budget_a_final_is_translated_by_the_pair_translator():
    llm = FakeLLM()
    # the pause that ends a sentence (0.5 s) is already more than the budget
    pipe, mt, _ = _pipe(llm, 0.2)
    finals = finals_of(run(pipe, speech(2.0, 1.0, repeats=3)))
    assert len(finals) == 3 and not llm.calls
    assert all(f.target == f.source.upper().replace("W", "T") and f.mt == "fake-mt" for f in finals)
    st = pipe.stage_stats()["final"]
    assert st["final_mt_llm"] == 0 and st["final_mt_fallback"] == 3


def test_while_the_policy_pauses_the_llm_the_pair_translator_makes_the_finals():
    llm = FakeLLM()
    pipe, _, _ = _pipe(llm, None)
    pipe.final_stage.llm_paused = True  # PipelineActuator, step "final_mt:pair"
    finals = finals_of(run(pipe, speech(2.0, 1.0, repeats=2)))
    assert len(finals) == 2 and not llm.calls and all(f.mt == "fake-mt" for f in finals)
    st = pipe.stage_stats()["final"]
    assert st["final_mt_paused"] == 2 and st["final_mt_llm"] == 0 and st["final_mt_fallback"] == 0


def test_in_real_time_an_llm_busy_with_another_session_is_not_waited_for():
    llm = FakeLLM()
    llm.busy = True  # a server's sessions share one LLM: another session's call is running
    pipe, _, _ = _pipe(llm, 30.0)
    finals = finals_of(run(pipe, speech(2.0, 1.0, repeats=2)))
    assert len(finals) == 2 and not llm.calls and all(f.mt == "fake-mt" for f in finals)
    assert pipe.stage_stats()["final"]["final_mt_fallback"] == 2
    # without a budget (a file run as fast as it goes) it is waited for
    llm = FakeLLM()
    llm.busy = True
    pipe, _, _ = _pipe(llm, None)
    assert all(f.mt == "fake-llm" for f in finals_of(run(pipe, speech(2.0, 1.0, repeats=2))))


def test_a_failing_llm_leaves_the_final_to_the_pair_translator():
    llm = FakeLLM(fail=True)
    pipe, _, _ = _pipe(llm, None)
    finals = finals_of(run(pipe, speech(2.0, 1.0, repeats=2)))
    assert len(finals) == 2 and all(not f.failed for f in finals)
    assert all(f.target == f.source.upper().replace("W", "T") for f in finals)
    assert pipe.stage_stats()["final"]["final_mt_failed"] == 2


def test_the_budget_counts_the_time_spent_and_the_llms_measured_speed():
    clock = FakeClock()
    st = FinalStage.__new__(FinalStage)  # the chooser alone
    st.clock, st.mt, st.cfg = clock, FakeMT(), cfg().final
    st.use_llm(FakeLLM(), 0.05, 2.0)  # 50 ms per character
    started = clock.now()
    assert st._translator("x" * 20, started)[1] == "llm"  # 0.5 s pause + 1.0 s < 2.0 s
    assert st._translator("x" * 40, started)[1] == "fallback"  # 0.5 + 2.0 s
    clock.advance(1.2)  # the recognition took 1.2 s
    assert st._translator("x" * 20, started)[1] == "fallback"
    st.use_llm(FakeLLM(), 0.05, None)  # not real time: always the LLM
    assert st._translator("x" * 400, started)[1] == "llm"


def test_the_llm_packs_are_optional_pinned_and_joined():
    for pid, parts in (("qwen-0.5b", catalog.QWEN_05B_PARTS), ("qwen-1.5b", catalog.QWEN_15B_PARTS)):
        p = catalog.PACKS[pid]
        assert p.optional and p.role == "llm" and pid not in catalog.default_packs()
        assert len(p.archives) == len(parts) == len(p.members) == len(p.files)
        names, want = p.joined["model.gguf"]
        assert list(names) == sorted(p.files) and len(want) == 64
        assert all(len(a.sha256) == 64 for a in p.archives)
        assert catalog.REQUIRES[pid] == ("llama-cpp-runtime",)
    assert catalog.PACKS["llama-cpp-runtime"].optional
    assert {"whisper-base", "opus-mt-zh-en", "piper-joe-en"} <= set(catalog.default_packs())


def _plan(src="zh", tgt="en", mt="opus-mt-zh-en"):
    return PairPlan(f"{src}-{tgt}", src, tgt, "whisper-base", "transcribe", mt, None)


def test_final_mt_choice(tmp_path, monkeypatch):
    monkeypatch.setenv("RELAY_MODELS", str(tmp_path))
    assert final_mt_pack(_plan(), "auto") is None  # nothing installed: OPUS-MT, no error
    assert final_mt_pack(_plan(), "opus") is None
    assert final_mt_pack(_plan("xx", "en", None), "qwen-1.5b") is None  # no MT in this pair
    with pytest.raises(ModelMissing, match="relay models install qwen-1.5b"):
        final_mt_pack(_plan(), "qwen-1.5b")
    with pytest.raises(UserError, match="zh→en"):
        final_mt_pack(_plan("ja", "en", "some-ja-en"), "qwen-0.5b")
    with pytest.raises(UserError, match="--final-mt"):
        final_mt_pack(_plan(), "gpt")


class CopyingLLM(FakeLLM):
    def translate(self, source, target_prefix="", beam_size=None):
        self.calls.append(source)
        return "Market部下周提交报告。"


def test_an_llm_output_still_in_the_source_script_is_replaced_by_the_pair_translator():
    st = FinalStage.__new__(FinalStage)
    st.clock, st.mt, st.cfg, st.lang = FakeClock(), FakeMT(), cfg().final, "zh"
    st.watched = lambda fn, *a, **k: fn(*a, **k)
    st.use_llm(CopyingLLM(), 0.0, None)
    st.llm_stats = {"llm": 0, "fallback": 0, "failed": 0, "rejected": 0, "llm_s": 0.0}
    assert st._translate_final("市场部下周提交报告。", 0.0) == ("市场部下周提交报告。".upper(), FakeMT.name)
    assert st.llm_stats["rejected"] == 1 and st.llm_stats["llm"] == 0
    st.use_llm(FakeLLM(), 0.0, None)
    assert st._translate_final("你好", 0.0) == ("你好", FakeMT.name)  # FakeLLM keeps the Chinese: also rejected
    assert st.llm_stats["rejected"] == 2


def test_the_glossary_goes_into_the_instruction():
    from app.backends.llama_mt import SYSTEM, system_prompt

    assert system_prompt() == SYSTEM
    p = system_prompt("zh", "en", [("市场部", "Marketing Department"), ("", "x")])
    assert p.startswith("Translate the user's Chinese into English.") and "市场部 = Marketing Department" in p
    assert "= x" not in p
