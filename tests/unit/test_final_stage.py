"""The second pass with fake models: every first-pass piece is covered by exactly one final, in
order, nothing is lost or shown twice; the dub speaks finals only; a failing second pass keeps the
first pass's text, marked; long speech without pauses is finalised at first-pass marks; the first
pass thins out while the second is behind."""

import threading
import time

import numpy as np

from app.core.audio import SR
from app.pipeline.engine import PipelineConfig, StreamingPipeline, erased_chars
from app.pipeline.final_stage import FinalConfig
from app.pipeline.messages import Control, DubChunk, FinalSentence
from app.pipeline.mt_stage import MTConfig
from app.pipeline.protocols import Word
from app.pipeline.queues import ControlChannel, FakeClock
from app.pipeline.recognizer import ASRConfig
from app.pipeline.segmenter import SegmenterConfig
from app.pipeline.supervisor import SupervisorConfig

from .fakes import FakeASR, FakeMT, FakeTTS, FakeVAD, speech


def cfg(**final):
    final.setdefault("first_wait_s", 30.0)  # fed faster than real time: wait for the first pass
    final.setdefault("early_s", 0.0)  # and no early decodes (as app.session.build: real time only)
    # the fake reads every sentence as the same four words: a loop to the repeat guard
    final.setdefault("drop_repeats", False)
    return PipelineConfig(asr=ASRConfig(catch_up=False), mt=MTConfig(previews=False),
                          segmenter=SegmenterConfig(lang="en", eager_units=2), final=FinalConfig(**final),
                          supervision=SupervisorConfig(stall_s=30.0))


def run(pipe, audio, block=1600, pace=0.0):
    events = []
    lock = threading.Lock()

    def keep(ev):
        with lock:
            events.append(ev)

    pipe.bus.subscribe(keep)
    pipe.start()
    for off in range(0, len(audio), block):
        pipe.push_audio(audio[off:off + block], wait_if_full=True)
        if pace:
            time.sleep(pace)
    pipe.finish(timeout=60)
    return events


def finals_of(events):
    return [e for e in events if isinstance(e, FinalSentence)]


def test_every_piece_is_covered_by_exactly_one_final_and_the_dub_speaks_finals_only():
    tts = FakeTTS()
    pipe = StreamingPipeline(FakeASR(), FakeMT(), tts, FakeVAD(), cfg(), final_vad=FakeVAD())
    events = run(pipe, speech(2.0, 1.0, repeats=4))
    finals = finals_of(events)
    pieces = [e.seq for e in events if type(e).__name__ == "Segment"]
    assert len(finals) >= 4, [f.source for f in finals]
    assert [f.id for f in finals] == list(range(len(finals)))
    covered = [s for f in finals for s in f.covers]
    assert sorted(covered) == sorted(pieces) and len(covered) == len(set(covered))
    assert all(not f.failed for f in finals)
    # the second pass read each whole sentence again (the fake numbers words from the start of
    # the audio it is given): as many words as the first pass committed, nothing lost or doubled
    assert [f.source for f in finals] == ["w0z w1z w2z w3z."] * 4
    words = " ".join(f.source for f in finals).split()
    # the final translation is the whole sentence's, with the sentence beam
    assert all(f.target == f.source.upper().replace("W", "T") for f in finals)
    # the dub speaks exactly the finals' text, in order
    spoken = " ".join(t for t, _ in tts.texts)
    assert spoken.split() == " ".join(f.target for f in finals).split()
    dubbed = {e.seq for e in events if isinstance(e, DubChunk)}
    assert dubbed == {f.id for f in finals}
    # what stays (summary segments) are the finals; the pieces are kept apart
    assert [s["source"] for s in pipe.record.segments] == [f.source for f in finals]
    assert len(pipe.record.pieces) == len(pieces)
    lat = pipe.tracker.summary()
    assert lat["e2e_final"]["n"] == len(words) and lat["e2e_first_display"]["n"] == len(words)
    assert lat["e2e_first_display"]["p50"] <= lat["e2e_final"]["p50"]
    assert pipe.record.erasure() is not None
    assert pipe.stage_stats()["final"]["finals"] == len(finals)


def test_without_a_final_pass_the_pieces_stay_and_are_dubbed():
    tts = FakeTTS()
    pipe = StreamingPipeline(FakeASR(), FakeMT(), tts, FakeVAD(), cfg(enabled=False), final_vad=FakeVAD())
    events = run(pipe, speech(2.0, 1.0, repeats=2))
    assert not finals_of(events) and pipe.final_stage is None
    assert pipe.record.segments == pipe.record.pieces and tts.texts


class FailingUtteranceASR(FakeASR):
    def __init__(self, fail_on: set[int]):
        super().__init__()
        self.fail_on, self.n = fail_on, 0

    def transcribe_utterance(self, audio, prompt="", beam_size=None):
        self.n += 1
        if self.n in self.fail_on:
            raise RuntimeError("decoder fell over")
        return super().transcribe_utterance(audio, prompt, beam_size)


def test_a_failing_second_pass_keeps_the_first_pass_text_marked_and_goes_on():
    # the failing call is the second sentence's (warm-up calls are not made here)
    pipe = StreamingPipeline(FailingUtteranceASR({2}), FakeMT(), None, FakeVAD(), cfg(), final_vad=FakeVAD())
    events = run(pipe, speech(2.0, 1.0, repeats=3))
    finals = finals_of(events)
    assert [f.failed for f in finals].count(True) == 1, [(f.failed, f.source) for f in finals]
    bad = next(f for f in finals if f.failed)
    assert bad.source and bad.source == bad.first_source and bad.covers
    covered = [s for f in finals for s in f.covers]
    assert len(covered) == len(set(covered))
    assert not pipe.failed()


def test_long_speech_without_pauses_is_finalised_at_first_pass_marks():
    # 14 s of speech with no pause: the fake ends a sentence every 4th word ("w3z.")
    pipe = StreamingPipeline(FakeASR(), FakeMT(), None, FakeVAD(), cfg(mark_after_s=3.0, min_mark_s=1.0),
                             final_vad=FakeVAD())
    events = run(pipe, speech(14.0, 0.5), pace=0.02)  # 5x real time: the marks come as the audio does
    finals = finals_of(events)
    assert len(finals) >= 3 and any(f.reason == "mark" for f in finals), [(f.reason, f.source) for f in finals]
    assert all(f.src_end - f.src_start <= 12.5 for f in finals)
    covered = [s for f in finals for s in f.covers]
    assert len(covered) == len(set(covered))
    # the fake numbers words from the start of the audio it is given; 0.5 s a word
    assert sum(len(f.words) for f in finals) == 28


def test_a_long_stretch_read_in_one_chunk_is_capped_as_it_is_read():
    # a file fed as fast as it goes: 40 s of speech reach the second pass in one chunk; the hard
    # cap (12 s) applies inside it, not once at its end (finals of 20-40 s before)
    pipe = StreamingPipeline(FakeASR(), FakeMT(), None, FakeVAD(), cfg(), final_vad=FakeVAD())
    audio = speech(40.0, 1.0)
    pipe.final_stage.first.marks.clear()
    events = run(pipe, audio, block=len(audio))
    finals = finals_of(events)
    assert len(finals) >= 4, [(f.reason, f.src_start, f.src_end) for f in finals]
    assert all(f.src_end - f.src_start <= 12.5 for f in finals), [(f.src_start, f.src_end) for f in finals]
    # the fake hears one word per whole 0.5 s it is given: a cut inside a word costs it that word
    assert 80 - (len(finals) - 1) <= sum(len(f.words) for f in finals) <= 80
    covered = [s for f in finals for s in f.covers]
    assert len(covered) == len(set(covered))


class SlowUtteranceASR(FakeASR):
    def transcribe_utterance(self, audio, prompt="", beam_size=None):
        time.sleep(0.4)
        return super().transcribe_utterance(audio, prompt, beam_size)


def test_a_second_pass_behind_thins_the_first_pass_and_drops_nothing():
    pipe = StreamingPipeline(SlowUtteranceASR(), FakeMT(), None, FakeVAD(),
                             cfg(thin_after_s=0.5, unthin_below_s=0.2), final_vad=FakeVAD())
    sent = []
    orig = pipe.asr_stage.control.send
    pipe.asr_stage.control.send = lambda m: (sent.append(m.kind), orig(m))
    audio = speech(1.0, 0.6, repeats=8)
    pipe.start()
    for off in range(0, len(audio), 1600):  # real-time-ish: 10x faster than real time
        pipe.push_audio(audio[off:off + 1600])
        time.sleep(0.01)
    pipe.finish(timeout=60)
    assert Control.THIN in sent
    assert pipe.record.finals and len({f["id"] for f in pipe.record.finals}) == len(pipe.record.finals)
    covered = [s for f in pipe.record.finals for s in f["covers"]]
    assert sorted(covered) == sorted(p["seq"] for p in pipe.record.pieces)


def test_erasure_counts_what_a_revision_takes_off_the_screen():
    assert erased_chars("Can you hear me Talk?", "Can you hear me talk?") == len("Talk?")
    assert erased_chars("abc", "abcdef") == 0
    assert erased_chars("", "x") == 0
    assert erased_chars("xyz", "abc") == 3


def test_audio_overwritten_before_the_second_pass_keeps_the_first_pass():
    c = cfg()
    c.ring_seconds = 3.0
    pipe = StreamingPipeline(SlowUtteranceASR(), FakeMT(), None, FakeVAD(), c, final_vad=FakeVAD())
    audio = speech(1.0, 0.6, repeats=12)
    pipe.start()
    for off in range(0, len(audio), 1600):  # no waiting: the ring may overwrite what is unread
        pipe.push_audio(audio[off:off + 1600])
        time.sleep(0.005)
    pipe.finish(timeout=60)
    covered = [s for f in pipe.record.finals for s in f["covers"]]
    assert len(covered) == len(set(covered))
    assert not pipe.failed()
    assert np.all(np.diff([f["id"] for f in pipe.record.finals]) == 1)


def test_the_first_pass_thins_while_anyone_asks_and_each_undoes_only_its_own():
    from app.pipeline.asr_stage import ASRStage
    from app.pipeline.messages import Control, ControlMessage

    st = ASRStage.__new__(ASRStage)
    st.control = ControlChannel()
    st.clock = FakeClock()
    st.metric = lambda *a, **k: None
    st.step_s, st.thin_factor, st.thinned_s, st._thinned_since, st._thin_by = 0.5, 1.0, 0.0, None, set()
    st.cfg = type("C", (), {"max_step_s": 4.0, "step_s": 0.5})()

    def send(kind, by):
        st.control.send(ControlMessage(kind, "test", by=by))
        st._handle_control()
        return st.effective_step_s

    assert send(Control.THIN, "final") == 1.0
    assert send(Control.THIN, "policy") == 1.0
    assert send(Control.UNTHIN, "final") == 1.0  # the policy still asks
    assert send(Control.UNTHIN, "policy") == 0.5


class StallingFinalMT(FakeMT):
    """The second pass's translation of its second sentence hangs past the stall limit."""

    def __init__(self):
        super().__init__()
        self.finals = 0
        self.woke = threading.Event()

    def translate(self, source, target_prefix="", beam_size=None):
        if threading.current_thread().name == "final":
            self.finals += 1
            if self.finals == 2:
                time.sleep(2.5)
                self.woke.set()
        return super().translate(source, target_prefix, beam_size)


def test_a_stalled_second_pass_is_restarted_and_nothing_is_lost_or_shown_twice():
    c = cfg()
    c.supervision = SupervisorConfig(stall_s=1.0, poll_s=0.05)
    mt = StallingFinalMT()
    pipe = StreamingPipeline(FakeASR(), mt, FakeTTS(), FakeVAD(), c, final_vad=FakeVAD())
    events = run(pipe, speech(2.0, 1.0, repeats=4))
    assert mt.woke.wait(10)  # the abandoned worker's call returns (and the worker ends)
    time.sleep(0.2)
    finals = finals_of(events)
    pieces = [e.seq for e in events if type(e).__name__ == "Segment"]
    assert pipe.stage_stats()["final"]["restarts"] == 1
    # the replaced worker's sentence was made again by its successor: one final per sentence
    assert [f.source for f in finals] == ["w0z w1z w2z w3z."] * 4, [(f.id, f.source, f.covers) for f in finals]
    assert [f.id for f in finals] == list(range(4))
    covered = [s for f in finals for s in f.covers]
    assert sorted(covered) == sorted(pieces) and len(covered) == len(set(covered))
    assert not pipe.failed()


def test_a_final_that_loops_on_the_previous_ones_is_dropped_and_takes_its_pieces_off():
    # the fake reads every sentence as "w0z w1z w2z w3z.": the same sentence four times in a row,
    # as Whisper looping on its prompt does. Twice is speech; the third and fourth are dropped as
    # empty finals, which still cover (replace) the first-pass pieces of their spans
    tts = FakeTTS()
    pipe = StreamingPipeline(FakeASR(), FakeMT(), tts, FakeVAD(), cfg(drop_repeats=True), final_vad=FakeVAD())
    events = run(pipe, speech(2.0, 1.0, repeats=4))
    finals = finals_of(events)
    pieces = [e.seq for e in events if type(e).__name__ == "Segment"]
    assert [f.source for f in finals] == ["w0z w1z w2z w3z."] * 2 + [""] * 2
    assert all(not f.failed and f.covers for f in finals)
    covered = [s for f in finals for s in f.covers]
    assert sorted(covered) == sorted(pieces) and len(covered) == len(set(covered))
    assert len(tts.texts) > 0 and " ".join(t for t, _ in tts.texts).split() == " ".join(
        f.target for f in finals).split()
    assert pipe.final_stage.repeats.dropped == 2


class LeadInASR(FakeASR):
    """Has ``transcribe_continued``: hears the lead-in (everything before the audio's last pause)
    as the forced prefix and numbers the sentence's words n0, n1, ... from the last pause on.
    ``echo``: it writes the prefix and nothing after it (the fallback case). ``spill``: its new
    words lie inside the lead-in (it read on from the forced text) and it stops there. ``early``:
    it gives up after the sentence's first word. ``thin``: it writes one word and stretches it
    over the whole sentence."""

    def __init__(self, echo=False, spill=False, early=False, thin=False):
        super().__init__()
        self.echo, self.spill, self.early, self.thin = echo, spill, early, thin
        self.continued = []  # (audio seconds, prefix)

    def transcribe_continued(self, audio, prefix, prompt="", beam_size=None):
        self.continued.append((len(audio) / SR, prefix))
        on = np.abs(audio) > 0
        # the sentence starts after the last run of silence of 0.5 s or more
        start = 0
        for i in np.flatnonzero(~on[:-1] & on[1:]) + 1:
            gap = i - (np.flatnonzero(on[:i])[-1] + 1 if on[:i].any() else 0)
            if gap >= SR // 2:
                start = i
        words = [Word(" " + t, 0.1 * k, 0.1 * (k + 1)) for k, t in enumerate(prefix.split())]
        if self.echo:
            return words
        if self.spill:
            t = start / SR - 1.0
            return words + [Word(" spilt", t - 0.4, t - 0.2), Word(" words.", t - 0.2, t)]
        n = (len(audio) - start) // int(0.5 * SR)
        if self.thin:
            return words + [Word(" so.", start / SR, len(audio) / SR)]
        if self.early:
            n = 1
        t0 = start / SR
        return words + [Word(f" n{k}z" + ("." if k == n - 1 else ""), t0 + 0.5 * k, t0 + 0.5 * (k + 1))
                        for k in range(n)]


def test_the_second_pass_hears_the_previous_sentence_before_the_next_and_keeps_only_the_new_words():
    asr = LeadInASR()
    pipe = StreamingPipeline(asr, FakeMT(), None, FakeVAD(), cfg(), final_vad=FakeVAD())
    events = run(pipe, speech(2.0, 1.0, repeats=3))
    finals = finals_of(events)
    assert [f.source for f in finals] == ["w0z w1z w2z w3z.", "n0z n1z n2z n3z.", "n0z n1z n2z n3z."]
    # each later sentence was decoded after the previous final's speech, its text forced without
    # the mark it ended on (the pause may have split a sentence: the model must be free to go on)
    assert [p for _, p in asr.continued] == ["w0z w1z w2z w3z", "n0z n1z n2z n3z"]
    assert all(secs >= 2.0 + 1.0 + 2.0 for secs, _ in asr.continued)  # lead-in + pause + sentence
    # the new words keep their own times, in the sentence's span, not the lead-in's
    for f in finals[1:]:
        assert f.src_start - 0.01 <= f.words[0].start and f.words[-1].end <= f.src_end + 0.6, (f.words, f.src_start)
    st = pipe.stage_stats()["final"]
    assert (st["lead_in_used"], st["lead_in_rechecked"]) == (2, 0)
    covered = [s for f in finals for s in f.covers]
    assert len(covered) == len(set(covered))


def test_the_lead_in_keeps_its_closing_mark_when_told_to():
    asr = LeadInASR()
    pipe = StreamingPipeline(asr, FakeMT(), None, FakeVAD(), cfg(open_lead_in=False), final_vad=FakeVAD())
    finals = finals_of(run(pipe, speech(2.0, 1.0, repeats=3)))
    assert [p for _, p in asr.continued] == ["w0z w1z w2z w3z.", "n0z n1z n2z n3z."]
    assert [f.source for f in finals] == ["w0z w1z w2z w3z.", "n0z n1z n2z n3z.", "n0z n1z n2z n3z."]


def test_a_lead_in_that_yields_nothing_new_falls_back_to_the_sentence_alone():
    asr = LeadInASR(echo=True)
    pipe = StreamingPipeline(asr, FakeMT(), None, FakeVAD(), cfg(), final_vad=FakeVAD())
    finals = finals_of(run(pipe, speech(2.0, 1.0, repeats=3)))
    assert [f.source for f in finals] == ["w0z w1z w2z w3z."] * 3 and len(asr.continued) == 2
    st = pipe.stage_stats()["final"]
    assert (st["lead_in_used"], st["lead_in_fallback"]) == (0, 2)


def test_a_lead_in_decode_that_spends_itself_inside_the_lead_in_is_not_used():
    # "been made amiable himself." (words the previous final had missed) came back for 15 s of
    # a new sentence, stamped at its start: the sentence was lost
    asr = LeadInASR(spill=True)
    pipe = StreamingPipeline(asr, FakeMT(), None, FakeVAD(), cfg(), final_vad=FakeVAD())
    finals = finals_of(run(pipe, speech(2.0, 1.0, repeats=3)))
    assert [f.source for f in finals] == ["w0z w1z w2z w3z."] * 3 and len(asr.continued) == 2
    st = pipe.stage_stats()["final"]
    assert (st["lead_in_used"], st["lead_in_fallback"]) == (0, 2)


def test_a_lead_in_decode_that_stops_early_is_checked_against_the_sentence_alone():
    asr = LeadInASR(early=True)
    pipe = StreamingPipeline(asr, FakeMT(), None, FakeVAD(), cfg(), final_vad=FakeVAD())
    finals = finals_of(run(pipe, speech(2.0, 1.0, repeats=3)))
    # the decode alone reaches the sentence's end; the continued one stopped after a word
    assert [f.source for f in finals] == ["w0z w1z w2z w3z."] * 3 and len(asr.continued) == 2
    st = pipe.stage_stats()["final"]
    assert (st["lead_in_used"], st["lead_in_fallback"], st["lead_in_rechecked"]) == (0, 2, 2)


def test_a_lead_in_decode_far_thinner_than_the_first_pass_is_checked_against_the_sentence_alone():
    # the previous final missed its last words; the model read them on from the lead-in, stopped,
    # and stamped them over the whole new sentence: "the connection." for 11 s of speech, the
    # sentence lost (bench/robust quiet_-30db, real time). Its words reach the sentence's end, so
    # only their amount against the first pass's (four words a sentence here) gives it away
    asr = LeadInASR(thin=True)
    pipe = StreamingPipeline(asr, FakeMT(), None, FakeVAD(), cfg(), final_vad=FakeVAD())
    finals = finals_of(run(pipe, speech(2.0, 1.0, repeats=3)))
    assert [f.source for f in finals] == ["w0z w1z w2z w3z."] * 3 and len(asr.continued) == 2
    st = pipe.stage_stats()["final"]
    assert (st["lead_in_used"], st["lead_in_fallback"], st["lead_in_rechecked"]) == (0, 2, 2)
    assert (st["sparse_rechecked"], st["sparse_replaced"]) == (2, 2)


class PromptedSparseASR(FakeASR):
    """Given a prompt, writes one word (the prompt's sentence read on) stretched over the audio;
    unprompted, hears the words."""

    def transcribe_utterance(self, audio, prompt="", beam_size=None):
        if prompt:
            return [Word(" so.", 0.0, len(audio) / SR)]
        return super().transcribe_utterance(audio, prompt, beam_size)


def test_a_decode_far_sparser_than_the_first_pass_is_checked_against_one_with_no_prompt():
    # the prompt ended "... while I attempt to make"; the model wrote "the connection." for the
    # next 9 s of speech and stopped (bench/robust quiet_-30db, real time, no lead-in decode)
    asr = PromptedSparseASR()
    pipe = StreamingPipeline(asr, FakeMT(), None, FakeVAD(), cfg(context_s=0), final_vad=FakeVAD())
    finals = finals_of(run(pipe, speech(2.0, 1.0, repeats=3)))
    assert [f.source for f in finals] == ["w0z w1z w2z w3z."] * 3
    st = pipe.stage_stats()["final"]
    assert (st["sparse_rechecked"], st["sparse_replaced"], st["lead_in_rechecked"]) == (2, 2, 0)
    # a decode as long as the first pass's is not checked again
    pipe = StreamingPipeline(FakeASR(), FakeMT(), None, FakeVAD(), cfg(context_s=0), final_vad=FakeVAD())
    run(pipe, speech(2.0, 1.0, repeats=3))
    assert pipe.stage_stats()["final"]["sparse_rechecked"] == 0


class PromptASR(FakeASR):
    """Records the prompt of each whole-sentence decode (the second pass's)."""

    def __init__(self):
        super().__init__()
        self.prompts = []

    def transcribe_utterance(self, audio, prompt="", beam_size=None):
        if threading.current_thread().name == "final":
            self.prompts.append(prompt)
        return super().transcribe_utterance(audio, prompt, beam_size)


def test_the_previous_finals_prompt_a_sentence_only_after_a_short_pause():
    # a prompt that is the very sentence about to be heard, from minutes before, made Whisper
    # skip or garble it (a 3-hour recording with the same address every five minutes)
    asr = PromptASR()
    pipe = StreamingPipeline(asr, FakeMT(), None, FakeVAD(), cfg(context_s=0, prompt_gap_s=3.0),
                             final_vad=FakeVAD())
    audio = np.concatenate([speech(2.0, 1.0), speech(2.0, 5.0), speech(2.0, 1.0)])
    finals = finals_of(run(pipe, audio))
    assert len(finals) == 3 and len(asr.prompts) == 3
    assert asr.prompts[0] == "" and asr.prompts[1] == "w0z w1z w2z w3z."  # 1 s after the first
    assert asr.prompts[2] == ""  # 5 s of silence before it: past prompt_gap_s


def test_no_lead_in_after_a_long_pause_or_when_switched_off():
    asr = LeadInASR()
    pipe = StreamingPipeline(asr, FakeMT(), None, FakeVAD(), cfg(), final_vad=FakeVAD())
    finals = finals_of(run(pipe, speech(2.0, 5.0, repeats=2)))  # 5 s apart: past context_gap_s
    assert len(finals) == 2 and not asr.continued
    asr = LeadInASR()
    pipe = StreamingPipeline(asr, FakeMT(), None, FakeVAD(), cfg(context_s=0), final_vad=FakeVAD())
    finals = finals_of(run(pipe, speech(2.0, 1.0, repeats=2)))
    assert len(finals) == 2 and not asr.continued


def test_the_final_does_not_wait_for_a_first_pass_that_waits_for_the_room_it_holds():
    # --fast: the file feeder waits for room in the ring, the first pass for the audio after its
    # last piece, and the final (holding the ring) for the first pass: each final sat out
    # first_wait_s (120 s in --fast) and a 3-hour file idled for minutes at a time
    pipe = StreamingPipeline(FakeASR(), FakeMT(), None, FakeVAD(), cfg(first_wait_s=30.0), final_vad=FakeVAD())
    final = pipe.final_stage
    final.first_done = None  # not started: the first pass would count as done
    pipe.feeder_waiting = True
    t0 = time.monotonic()
    final._wait_for_first_pass(until=100.0)
    assert time.monotonic() - t0 < 1.0
    pipe.feeder_waiting = False
    final.cfg.first_wait_s = 0.3
    t0 = time.monotonic()
    final._wait_for_first_pass(until=100.0)
    assert time.monotonic() - t0 >= 0.3  # otherwise it still waits, up to first_wait_s


class _CountingASR(FakeASR):
    def __init__(self):
        super().__init__()
        self.utterances = 0

    def transcribe_utterance(self, audio, prompt="", beam_size=None):
        self.utterances += 1
        return super().transcribe_utterance(audio, prompt, beam_size)


def _early_run(early_s: float, audio):
    asr = _CountingASR()
    pipe = StreamingPipeline(asr, FakeMT(), None, FakeVAD(), cfg(context_s=0, early_s=early_s), final_vad=FakeVAD())
    finals = finals_of(run(pipe, audio))
    return finals, asr.utterances, pipe.final_stage.early, pipe.stage_stats()["final"]


def test_an_early_decode_is_the_final_when_the_pause_holds():
    # --final-early: each sentence is decoded after 0.3 s of silence, and the 0.5 s pause that then
    # completes uses that decode: one decode per sentence, the same words as without it
    audio = speech(2.0, 1.0, repeats=3)
    finals, decodes, early, stats = _early_run(0.3, audio)
    plain, plain_decodes, plain_early, _ = _early_run(0.0, audio)
    assert [f.source for f in finals] == [f.source for f in plain] == ["w0z w1z w2z w3z."] * 3
    assert [(f.src_start, f.src_end) for f in finals] == [(f.src_start, f.src_end) for f in plain]
    assert early == {"used": 3, "wasted": 0} and decodes == plain_decodes == 3
    assert plain_early == {"used": 0, "wasted": 0}
    assert (stats["early_used"], stats["early_wasted"]) == (3, 0)


def test_an_early_decode_is_dropped_when_speech_comes_back_before_the_pause_is_complete():
    # a 0.4 s gap inside a sentence: decoded early after 0.3 s of it, then speech comes back; the
    # final (after the real pause) decodes the whole sentence again, nothing of it lost
    on, gap, off = (np.full(int(s * SR), v, dtype=np.float32) for s, v in ((1.0, 0.3), (0.4, 0.0), (1.0, 0.0)))
    audio = np.concatenate([on, gap, on, off])
    finals, decodes, early, _ = _early_run(0.3, audio)
    plain, plain_decodes, _, _ = _early_run(0.0, audio)
    assert [f.source for f in finals] == [f.source for f in plain] and len(finals) == 1
    assert finals[0].source.split() == plain[0].source.split() and len(finals[0].source.split()) >= 4
    # (the real pause after it was decoded early too, and that decode is the final)
    assert early == {"used": 1, "wasted": 1} and decodes == plain_decodes + 1


class _FailsOnceASR(_CountingASR):
    def transcribe_utterance(self, audio, prompt="", beam_size=None):
        self.utterances += 1
        if self.utterances == 1:
            raise RuntimeError("model error")
        return FakeASR.transcribe_utterance(self, audio, prompt, beam_size)


def test_a_failed_early_decode_is_not_retried_frame_by_frame_and_the_final_decodes_as_usual():
    asr = _FailsOnceASR()
    pipe = StreamingPipeline(asr, FakeMT(), None, FakeVAD(), cfg(context_s=0, early_s=0.3), final_vad=FakeVAD())
    finals = finals_of(run(pipe, speech(2.0, 1.0)))
    assert [f.source for f in finals] == ["w0z w1z w2z w3z."] and not finals[0].failed
    # the early decode that failed, then the final's own
    assert asr.utterances == 2 and pipe.final_stage.early == {"used": 0, "wasted": 1}
