"""Speculative decoding on the real zh→en model: identical to plain greedy decoding."""

import pytest

from app.pipeline.queues import FakeClock
from app.pipeline.speculation import SpeculationConfig, SpeculationController

from .conftest import DATA

pytestmark = pytest.mark.models

CLIPS = ("zh_03.wav", "zh_05.wav", "zh_07.wav", "zh_demo_20s.wav")


@pytest.fixture(scope="module")
def mt():
    from app.models.loader import load_mt, plan_pair

    return load_mt(plan_pair("zh-en", no_tts=True), threads=1, beam_size=1)


@pytest.fixture(scope="module")
def clip_texts():
    """What whisper-base recognises in each test clip (the source text a session translates)."""
    from app.audio.files import load_audio
    from app.models.loader import load_asr, plan_pair

    asr = load_asr(plan_pair("zh-en", no_tts=True), threads=2)
    texts = []
    for name in CLIPS:
        words = asr.transcribe_utterance(load_audio(DATA / name))
        texts.append("".join(w.text for w in words).strip())
    assert all(texts)
    return texts


def growing(text, step):
    return [text[:k] for k in list(range(step, len(text), step)) + [len(text)]]


@pytest.mark.parametrize("step", [1, 3])
def test_speculative_output_equals_plain_greedy_on_retranslation(mt, clip_texts, step):
    outcomes = []
    for text in clip_texts:
        draft = ""
        for src in growing(text, step):
            plain = mt.translate(src, beam_size=1)
            if draft:
                out, oc = mt.translate_with_draft(src, draft, beam_size=1)
                assert out == plain, (src, draft)
                assert 0 <= oc.accepted <= oc.drafted
                outcomes.append(oc)
            draft = plain
    assert outcomes
    accepted = sum(o.accepted for o in outcomes)
    drafted = sum(o.drafted for o in outcomes)
    assert accepted < drafted  # a draft of a shorter source is never accepted whole every time
    if step == 1:  # one more character rarely changes the start of the translation
        assert accepted > 0
    for o in outcomes:
        assert o.saved_steps == 0 or o.accepted == o.drafted  # only a fully verified draft skips decoding


def test_speculation_with_a_committed_prefix_equals_plain(mt, clip_texts):
    for text in clip_texts:
        half = text[: len(text) // 2]
        committed = mt.translate(half, beam_size=1).rstrip(".!?")
        draft = mt.translate(text[: 3 * len(text) // 4], target_prefix=committed, beam_size=1)
        plain = mt.translate(text, target_prefix=committed, beam_size=1)
        out, oc = mt.translate_with_draft(text, draft, target_prefix=committed, beam_size=1)
        assert out == plain
        assert out.startswith(committed)


def test_acceptance_stops_at_the_first_token_below_the_bound(mt, clip_texts):
    import math

    for text in clip_texts:
        plain = mt.translate(text, beam_size=1)
        out, oc = mt.translate_with_draft(text, plain, beam_size=1)
        assert out == plain
        src = mt._sp_src.encode(text, out_type=str)
        toks = mt._prefix_tokens(plain)
        logp = mt._tr.score_batch([src], [toks])[0].log_probs
        probs = [math.exp(x) for x in logp[: len(toks)]]
        assert all(p >= 0.55 for p in probs[: oc.accepted])
        if oc.accepted < len(toks):
            nxt = toks[oc.accepted]
            assert probs[oc.accepted] < 0.55 or nxt in toks[: oc.accepted]  # uncertain, or a repeat


def test_adversarial_drafts_trigger_the_rollback(mt, clip_texts):
    events = []
    clock = FakeClock()
    ctl = SpeculationController(SpeculationConfig("auto", reject_limit=3, cooldown_s=30), clock, events.append)
    calls = 0
    for text in clip_texts * 2:
        if not ctl.should_draft():
            continue
        calls += 1
        out, oc = mt.translate_with_draft(text, "Bananas bananas purple elephants sing loudly.", beam_size=1)
        assert out == mt.translate(text, beam_size=1)
        ctl.record(oc)
        clock.advance(1.0)
    assert calls == 3 and ctl.fallbacks == 1 and [e.kind for e in events] == ["fallback"]
    assert ctl.accepted_tokens == 0 and ctl.rejected_tokens > 0


def test_switching_to_int8_reloads_the_weights(clip_texts):
    from app.backends.opus_ct2 import CT2Translator
    from app.models import store

    d = store.get("opus-mt-zh-en").path
    tr = CT2Translator(str(d / "model"), str(d / "sentencepiece.model"), name="x", source_lang="zh",
                       target_lang="en", compute_type="float32", beam_size=1)
    assert tr.compute_type == "float32"
    before = tr.translate(clip_texts[0])
    note = tr.set_compute_type("int8")
    assert tr.compute_type.startswith("int8") and "float32 → int8" in note
    assert tr.translate(clip_texts[0]).split()[:2] == before.split()[:2]
    assert tr.set_compute_type("int8").startswith("no effect")
    tr.micro_batch = 2
    outs = tr.translate_many(clip_texts[:3] + [""])
    assert outs[3] == "" and outs[:3] == [tr.translate(t) for t in clip_texts[:3]]
