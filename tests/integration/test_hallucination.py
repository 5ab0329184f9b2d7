"""The hallucination guard with the real Whisper models: nothing is heard in music or noise, a
loop is cut however its copies are spelled, and Whisper's translation (xx-en) of the meeting
repeats no sentence, glues no words and writes no doubled marks."""

import collections
import re

import numpy as np
import pytest
import soundfile as sf

from app.backends.whisper_ct2 import WhisperCT2
from app.core.text import norm
from app.models.loader import whisper_model
from app.pipeline.repeats import cut_words

from .conftest import DATA, relay, summary_of

pytestmark = pytest.mark.models

SR = 16000


def music(seconds: float, seed: int = 0) -> np.ndarray:
    """Synthetic music: a chord progression of harmonic tones with a beat, no voice."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SR)) / SR
    out = np.zeros_like(t)
    chords = [(220.0, 277.2, 329.6), (196.0, 246.9, 293.7), (174.6, 220.0, 261.6), (164.8, 207.7, 246.9)]
    beat = 0.5
    for i in range(int(seconds / beat)):
        lo, hi = int(i * beat * SR), int((i + 1) * beat * SR)
        env = np.exp(-np.arange(hi - lo) / SR * 4.0)
        for f in chords[(i // 4) % len(chords)]:
            for h, a in ((1, 1.0), (2, 0.5), (3, 0.25), (4, 0.12)):
                out[lo:hi] += a * env * np.sin(2 * np.pi * f * h * t[lo:hi] + rng.uniform(0, 6.28))
        out[lo:lo + 400] += rng.normal(0, 0.5, min(400, hi - lo)) * np.exp(-np.arange(min(400, hi - lo)) / 80)
    return (0.3 * out / np.abs(out).max()).astype(np.float32)


def noise(seconds: float, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (0.05 * rng.normal(size=int(seconds * SR))).astype(np.float32)


@pytest.fixture(scope="module")
def base_translate():
    return WhisperCT2(whisper_model("whisper-base"), name="whisper-base", language=None, task="translate")


@pytest.fixture(scope="module")
def tiny_en():
    return WhisperCT2(whisper_model("whisper-tiny-en"), name="whisper-tiny-en", language="en")


@pytest.mark.parametrize("make", [music, noise])
def test_no_words_out_of_music_or_noise(base_translate, tiny_en, make):
    audio = make(10.0)
    # the language is detected on speech first (as a session does), then the non-speech comes
    zh, _ = sf.read(str(DATA / "zh_03.wav"), dtype="float32")
    base_translate.transcribe_utterance(zh)
    for asr in (base_translate, tiny_en):
        words = asr.transcribe_utterance(audio, beam_size=5)
        assert len(words) <= 3, (asr.name, [w.text for w in words])
        # and as streaming windows, growing over the same audio
        heard = []
        for end in range(SR * 2, len(audio) + 1, SR * 2):
            heard = asr.transcribe_window(audio[:end], 0, "", [])
        assert len(heard) <= 3, (asr.name, [w.text for w in heard])


def test_the_second_pass_over_a_jfk_sentence_keeps_no_loop(tiny_en):
    audio, _ = sf.read(str(DATA / "jfk.wav"), dtype="float32")
    for start, end in ((0.0, 3.0), (3.0, 6.0), (6.5, 9.1), (7.0, 11.0)):
        words = tiny_en.transcribe_utterance(audio[int(start * SR):int(end * SR)],
                                             prompt="And so my fellow Americans,", beam_size=5)
        texts = [w.text for w in words]
        assert cut_words(texts) == len(texts), "".join(texts)


@pytest.fixture(scope="module")
def xx_run():
    p = relay("run", "--input", str(DATA / "zh_demo_20s.wav"), "--pair", "xx-en", "--fast", "--no-tts", "--json")
    assert p.returncode == 0, p.stderr
    return summary_of(p)


def test_whisper_translation_repeats_no_sentence_and_glues_no_words(xx_run):
    target = " ".join(" ".join(x["target"] or "" for x in xx_run["segments"]).split())
    sentences = [norm(s) for s in re.split(r"(?<=[.!?])\s+", target) if norm(s)]
    counts = collections.Counter(sentences)
    assert max(counts.values()) <= 2, counts
    assert "%%" not in target
    low = target.lower()
    for glued in ("andthe", "timesthe", "needto", "ofthe", "tothe", "inthe"):
        assert glued not in low.replace("-", ""), target
    # six sentences, about 60 words in the reference: the length stays near it
    assert 30 <= len(target.split()) <= 100, target


def test_english_glued_to_a_short_word_is_split_when_translating_from_chinese():
    import tokenizers

    from app.backends.whisper_ct2 import _SpacedWordsTokenizer
    from app.models import store

    hf = tokenizers.Tokenizer.from_file(str(store.get("whisper-base").path / "tokenizer.json"))

    def split(parts, language="zh"):
        tok = _SpacedWordsTokenizer(hf, True, task="translate", language=language)
        ids = [i for p in parts for i in tok.encode(p)]
        words, word_tokens = tok.split_to_word_tokens(ids)
        assert [i for t in word_tokens for i in t] == ids
        return "".join(words)

    # as Whisper wrote them translating the zh meeting (tokens without their leading space)
    assert split([" The", "total", " income", " of", " the", "third", " level."]) == " The total income of the third level."
    assert split([" Let", "'s", "take", " a", " look"]) == " Let's take a look"
    assert split([" we", " need", "to", " know", " and", "the", " times", "the"]) == " we need to know and the times the"
    # real words stay whole, however the model spelled them
    assert split([" The", "refore", " in", "to", " in", "box", " we", "ather", " an", "other"]) == \
        " Therefore into inbox weather another"
    # from a spaced language the text is left as written
    assert split([" The", "total"], language="de") == " Thetotal"
