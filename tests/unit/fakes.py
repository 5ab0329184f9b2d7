"""Fake backends for plumbing tests: deterministic, instant (or deliberately slow)."""

import threading
import time

import numpy as np

from app.pipeline.protocols import Word

SR = 16000
WORD_S = 0.5


class FakeASR:
    """A 'word' is every 0.5 s of non-zero audio; its text is its absolute index (w0, w1, ...).
    Every 4th word ends a sentence."""

    name = "fake-asr"
    language = "en"
    output_language = "en"

    def __init__(self, delay=0.0):
        self.delay = delay
        self.calls = 0
        self.window_lengths = []

    def _words(self, audio, start_sample):
        out = []
        n = len(audio) // int(WORD_S * SR)
        for i in range(n):
            seg = audio[int(i * WORD_S * SR): int((i + 1) * WORD_S * SR)]
            if np.abs(seg).max() > 0:
                idx = int(round((start_sample / SR + i * WORD_S) / WORD_S))
                text = f" w{idx}z" + ("." if idx % 4 == 3 else "")
                out.append(Word(text, i * WORD_S, (i + 1) * WORD_S))
        return out

    def transcribe_window(self, audio, window_start_sample, prompt, prefix):
        self.calls += 1
        self.window_lengths.append(len(audio) / SR)
        if self.delay:
            time.sleep(self.delay)
        return self._words(audio, window_start_sample)

    def transcribe_utterance(self, audio, prompt="", beam_size=None):
        return self._words(audio, 0)


class FakeVAD:
    frame_samples = 512

    def reset(self):
        pass

    def process(self, audio):
        n = len(audio) // 512
        return np.array([float(np.abs(audio[i * 512:(i + 1) * 512]).max() > 0) for i in range(n)])


class FakeMT:
    name = "fake-mt"
    source_lang = "en"

    def __init__(self, delay=0.0):
        self.delay = delay
        self.calls = []
        self._lock = threading.Lock()

    def translate(self, source, target_prefix="", beam_size=None):
        with self._lock:
            self.calls.append((source, target_prefix, beam_size))
        if self.delay:
            time.sleep(self.delay)
        return source.upper().replace("W", "T")


class FakeTTS:
    name = "fake-tts"
    sample_rate = 8000

    def __init__(self):
        self.texts = []

    def synthesize(self, text, speed=1.0):
        self.texts.append((text, speed))
        yield np.full(int(0.1 * len(text.split()) * self.sample_rate), 0.1, dtype=np.float32)


def speech(seconds_on, seconds_off=0.0, repeats=1):
    on = np.full(int(seconds_on * SR), 0.3, dtype=np.float32)
    off = np.zeros(int(seconds_off * SR), dtype=np.float32)
    return np.concatenate([np.concatenate([on, off]) for _ in range(repeats)])
