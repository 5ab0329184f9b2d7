"""The recognition policy without threads: a Recognizer driven step by step, over a fake ASR
backend that returns scripted hypotheses."""

import numpy as np

from app.pipeline.protocols import Word
from app.pipeline.queues import FakeClock
from app.pipeline.recognizer import ASRConfig, Recognizer
from app.pipeline.ringbuffer import AudioRing
from app.pipeline.segmenter import Segmenter, SegmenterConfig

from .fakes import FakeASR, FakeVAD, speech

SR = 16000


class ScriptedASR:
    """Returns the next scripted hypothesis on each call (word times relative to the window)."""

    name = "scripted"
    language = output_language = "en"

    def __init__(self, *hypotheses):
        self.hypotheses = list(hypotheses)
        self.calls = []  # (window start sample, window length in samples, prompt, prefix texts)

    def transcribe_window(self, audio, window_start_sample, prompt, prefix):
        self.calls.append((window_start_sample, len(audio), prompt, [w.text for w in prefix]))
        return self.hypotheses.pop(0) if self.hypotheses else []

    def transcribe_utterance(self, audio, prompt="", beam_size=None):
        return []


def W(text, start, end, p=1.0):
    return Word(text, start, end, p)


def recognizer(asr, vad=None, ring=None, **cfg):
    clock = FakeClock()
    seg = Segmenter(SegmenterConfig(lang="en", eager_units=0), clock.now)
    return Recognizer(asr, vad if vad is not None else FakeVAD(), ASRConfig(catch_up=True, **cfg), seg,
                      ring=ring, now=clock.now)


def texts(words):
    return [w.text.strip() for w in words]


def test_two_agreeing_hypotheses_commit_their_common_prefix():
    asr = ScriptedASR([W(" we", 0.0, 0.3), W(" agree", 0.3, 0.6)],
                      [W(" we", 0.0, 0.3), W(" agree", 0.3, 0.6), W(" on", 0.6, 0.9)],
                      [W(" we", 0.0, 0.3), W(" agree", 0.3, 0.6), W(" on", 0.6, 0.9), W(" this.", 0.9, 1.2)])
    rec = recognizer(asr)
    rec.insert_audio(speech(1.0))
    (first,) = rec.process()
    assert first.committed == [] and texts(first.tentative) == ["we", "agree"]
    assert first.window == (0, SR) and rec.processed == SR
    rec.insert_audio(speech(0.5))
    (second,) = rec.process()
    assert texts(second.committed) == ["we", "agree"] and texts(second.tentative) == ["on"]
    assert second.segments == [] and second.pending_text == "we agree"
    rec.insert_audio(speech(0.5))
    (third,) = rec.process()
    # the committed words inside the window are the forced prefix of the next decode
    assert asr.calls[2][3] == [" we", " agree"]
    assert texts(third.committed) == ["on"] and texts(third.tentative) == ["this."]
    assert rec.steps == 3


def test_a_pause_commits_the_tentative_tail_and_ends_the_sentence():
    asr = ScriptedASR([W(" hello", 0.0, 0.4), W(" there", 0.4, 0.8)])
    rec = recognizer(asr)
    rec.insert_audio(speech(1.0, 1.0))
    (step,) = rec.process()
    assert step.pause_after and texts(step.committed) == ["hello", "there"]
    assert [(s.text, s.reason, s.sentence_end) for s in step.segments] == [("hello there", "pause", True)]
    assert step.tentative == [] and step.pending_text == ""
    # the next utterance's window starts after the committed words
    assert rec.window_start >= int(0.8 * SR)


def test_silence_is_not_decoded_and_the_window_slides():
    asr = ScriptedASR()
    rec = recognizer(asr)
    rec.insert_audio(np.zeros(3 * SR, np.float32))
    assert rec.process() == []
    assert asr.calls == [] and rec.window_start >= 2 * SR


def test_finish_commits_what_is_tentative_and_cuts_the_rest():
    asr = ScriptedASR([W(" one", 0.0, 0.4), W(" two", 0.4, 0.8)], [W(" one", 0.0, 0.4), W(" two", 0.4, 0.8)])
    rec = recognizer(asr)
    rec.insert_audio(speech(1.0))
    rec.process()
    steps = rec.finish()
    committed = [w for s in steps for w in s.committed]
    assert texts(committed) == ["one", "two"]
    assert [s.text for st in steps for s in st.segments] == ["one two"]


def test_the_backend_is_read_at_each_step():
    a, b = FakeASR(), FakeASR()
    rec = recognizer(a)
    rec.insert_audio(speech(1.0))
    rec.process()
    rec.asr = b  # a policy swapping the model mid-session
    rec.insert_audio(speech(1.0))
    rec.process()
    assert (a.calls, b.calls) == (1, 1)


def test_model_calls_go_through_the_call_hook():
    calls = []

    def hook(fn, *args, **kwargs):
        calls.append(fn.__name__)
        return fn(*args, **kwargs)

    rec = recognizer(FakeASR())
    rec.call = hook
    rec.insert_audio(speech(1.0))
    rec.process()
    assert calls == ["process", "transcribe_window"]


def test_rollback_replays_a_step_from_its_checkpoint():
    asr = ScriptedASR([W(" a", 0.0, 0.3)], [W(" a", 0.0, 0.3), W(" b", 0.3, 0.6)],
                      [W(" a", 0.0, 0.3), W(" b", 0.3, 0.6)])
    rec = recognizer(asr)
    rec.insert_audio(speech(1.0))
    rec.process()
    rec.insert_audio(speech(0.5))
    (step,) = rec.process()
    assert texts(step.committed) == ["a"]
    rec.rollback()  # the worker that took that step was replaced: the step runs again
    assert rec.policy.committed == [] and rec.processed == SR
    (again,) = rec.process(int(1.5 * SR))
    assert texts(again.committed) == ["a"]


def test_audio_lapped_before_it_was_read_is_an_overrun_and_recognition_goes_on():
    asr = FakeASR()
    ring = AudioRing(4 * SR)
    rec = recognizer(asr, ring=ring)
    rec.insert_audio(speech(1.0))
    rec.process()
    assert rec.cursor.overruns == 0 and rec.cursor.position == SR
    rec.insert_audio(speech(5.0))  # the writer laps the second after what was read
    rec.process()  # reads nothing that was overwritten (ring.read would raise Overrun)
    assert rec.cursor.overruns == 1 and rec.cursor.position == ring.written
    assert rec.window_start >= ring.oldest
    rec.insert_audio(speech(1.0))
    rec.process()
    assert rec.cursor.overruns == 1  # nothing lost since
