"""Whisper through CTranslate2, fed with our own incremental log-mel features."""

from __future__ import annotations

import os
import threading
import time
from typing import Sequence

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import ctranslate2
import numpy as np
import tokenizers
from faster_whisper import WhisperModel
from faster_whisper.tokenizer import Tokenizer

from app.accel.logmel import IncrementalLogMel, log_mel_reference
from app.core.audio import HOP, SR
from app.core.text import norm
from app.pipeline.protocols import Word

try:
    import zhconv
except ImportError:  # optional: without it the source line keeps Whisper's script
    zhconv = None

N_FRAMES = 3000  # Whisper's encoder sees exactly 30 s
FRAMES_PER_SECOND = SR // HOP
PAD_FRAMES = 100
TOKENS_PER_SECOND = 7


def cut_repetition(tokens: list[int]) -> list[int]:
    """Whisper sometimes loops ("AB AB AB ..."); keep the text up to the end of the first copy of
    a span repeated back to back: twice for spans of 4+ tokens, 3 times for 2-3, 5 times for 1.
    A loop that starts the whole text over is cut too when its copy breaks off at the end, once
    it holds 4+ tokens and half the text ("请谈品经理先介绍请谈品经理先介�" on a 2 s window)."""
    n = len(tokens)
    for m in range(n // 2, 3, -1):
        if 2 * m >= n - m and tokens[n - m:] == tokens[:m]:
            return cut_repetition(tokens[:n - m])
    for start in range(n):
        for period in range(1, (n - start) // 2 + 1):
            repeats = 2 if period >= 4 else (3 if period >= 2 else 5)
            if start + period * repeats > n:
                continue
            span = tokens[start:start + period]
            if all(tokens[start + k * period:start + (k + 1) * period] == span for k in range(1, repeats)):
                return tokens[:start + period]
    return tokens


# Keep the source line in Simplified script (MT was trained on it; Whisper base tends to Traditional).
ZH_PROMPT = "以下是普通话的句子。"


class WhisperCT2:
    """One Whisper model; thread-safe for one streaming session (calls are serialised)."""

    def __init__(
        self,
        model: str | dict[str, bytes],
        *,
        name: str,
        language: str | None,
        task: str = "transcribe",
        compute_type: str = "int8",
        threads: int = 2,
        beam_size: int = 1,
        frontend: str = "incremental",
        full_context: bool = False,
        accel: str = "numpy",
    ):
        self.full_context = full_context
        self.name = name
        self.language = language
        self.task = task
        self.beam_size = beam_size
        self._lock = threading.Lock()
        # a pack folder (CTranslate2 reads model.bin straight into its buffers), or the files in
        # memory (a split pack installed before packs were joined at install time)
        if isinstance(model, dict):
            self._model = WhisperModel("in-memory", device="cpu", compute_type=compute_type, cpu_threads=threads,
                                       files=dict(model))
            tokenizer_json = model["tokenizer.json"]
        else:
            self._model = WhisperModel(str(model), device="cpu", compute_type=compute_type, cpu_threads=threads)
            with open(os.path.join(str(model), "tokenizer.json"), "rb") as f:
                tokenizer_json = f.read()
        self.n_mels = self._model.feature_extractor.mel_filters.shape[0]
        self._multilingual = self._model.model.is_multilingual
        self._hf_tokenizer = tokenizers.Tokenizer.from_buffer(tokenizer_json)
        self.tokenizer = None
        self._zh = False
        self.detected_language: str | None = None
        if language is not None or not self._multilingual:
            self._set_language(language or "en")
        # the language the words come out in (Whisper's translate task writes English)
        self.output_language = "en" if task == "translate" else (language or "")
        self._suppress = [-1]
        self.frontend = frontend
        self.accel = accel
        self._mel = IncrementalLogMel(self.n_mels, backend=accel)

    def _set_language(self, language: str) -> None:
        self.tokenizer = Tokenizer(self._hf_tokenizer, self._multilingual, task=self.task,
                                   language=language if self._multilingual else None)
        self.language = language
        self._zh = language == "zh" and self.task == "transcribe"

    def _detect(self, feats: np.ndarray) -> None:
        """Spoken language, decided once on the first window with enough speech (sticky)."""
        x = np.zeros((1, self.n_mels, N_FRAMES), dtype=np.float32)
        n = min(feats.shape[1], N_FRAMES)
        x[0, :, :n] = feats[:, :n]
        res = self._model.model.detect_language(ctranslate2.StorageView.from_array(x))[0]
        code = res[0][0].strip("<|>")
        self.detected_language = code
        self._set_language(code)

    # -- helpers ---------------------------------------------------------------------------
    def _features(self, audio: np.ndarray, start_sample: int) -> np.ndarray:
        if self.frontend == "incremental":
            return self._mel.features(audio, start_sample)
        if self.frontend == "faster-whisper":
            return self._model.feature_extractor(audio)
        return log_mel_reference(audio, self.n_mels, backend=self.accel)

    def _prompt_tokens(self, prompt: str) -> list[int]:
        text = prompt
        if self._zh:
            text = ZH_PROMPT + prompt[-120:]
        else:
            text = prompt[-200:]
        if not text.strip():
            return []
        toks = self.tokenizer.encode(" " + text.strip())
        return toks[-223:]

    def _decode(self, feats: np.ndarray, prompt: str, prefix_text: str,
                beam_size: int | None = None) -> tuple[list[int], list[Word]]:
        if self.tokenizer is None:
            if feats.shape[1] < 150:  # under 1.5 s: too little to tell the language
                return [], []
            self._detect(feats)
        n_content = min(feats.shape[1], N_FRAMES)
        # The encoder accepts fewer than 3000 frames; its cost grows with the frame count, so a
        # streaming window is padded only by PAD_FRAMES of silence (rounded to whole seconds),
        # which keeps Whisper's sense of where the audio ends at a fraction of the 30 s cost.
        n_input = N_FRAMES if self.full_context else min(N_FRAMES, -(-(n_content + PAD_FRAMES) // 100) * 100)
        x = np.zeros((1, self.n_mels, n_input), dtype=np.float32)
        x[0, :, :n_content] = feats[:, :n_content]
        t0 = time.perf_counter()
        enc = self._model.model.encode(ctranslate2.StorageView.from_array(x), to_cpu=False)
        t1 = time.perf_counter()
        seq: list[int] = []
        ptoks = self._prompt_tokens(prompt)
        if ptoks:
            seq += [self.tokenizer.sot_prev] + ptoks
        seq += list(self.tokenizer.sot_sequence) + [self.tokenizer.no_timestamps]
        prefix_toks = self.tokenizer.encode((" " if not self._zh else "") + prefix_text.strip()) if prefix_text.strip() else []
        seq += prefix_toks
        # speech carries at most a few tokens a second: a longer output is a hallucination loop
        window_s = n_content / FRAMES_PER_SECOND
        # CTranslate2 counts the whole prompt (context, task tokens, prefix) in max_length
        max_len = min(448, len(seq) + int(TOKENS_PER_SECOND * window_s) + 8)
        res = self._model.model.generate(
            enc,
            [seq],
            beam_size=beam_size or self.beam_size,
            max_length=max_len,
            suppress_blank=not prefix_toks,
            suppress_tokens=self._suppress,
            return_scores=True,
            repetition_penalty=1.05,
            no_repeat_ngram_size=0,
        )[0]
        t2 = time.perf_counter()
        # CTranslate2 returns the forced prefix as part of the sequence.
        text_tokens = [t for t in res.sequences_ids[0] if t < self.tokenizer.eot]
        if text_tokens[: len(prefix_toks)] != prefix_toks:
            text_tokens = prefix_toks + text_tokens
        text_tokens = prefix_toks + cut_repetition(text_tokens[len(prefix_toks):])
        if self._zh and _echoes_prompt(self.tokenizer.decode(text_tokens[len(prefix_toks):])):
            # on a near-silent window Whisper may read out its own style prompt
            text_tokens = prefix_toks
        if not text_tokens:
            return [], []
        align = self._model.find_alignment(self.tokenizer, [text_tokens], enc, n_content)[0]
        self.last_timings = {"encode_ms": (t1 - t0) * 1e3, "decode_ms": (t2 - t1) * 1e3,
                             "align_ms": (time.perf_counter() - t2) * 1e3, "frames": n_input,
                             "new_tokens": len(text_tokens) - len(prefix_toks), "prefix_tokens": len(prefix_toks)}
        audio_s = n_content / FRAMES_PER_SECOND
        words = [
            Word(w["word"], float(w["start"]), min(float(w["end"]), audio_s), float(w["probability"]))
            for w in align
            if w["word"].strip() and float(w["start"]) < audio_s - 0.05  # nothing past the audio's end
        ]
        return text_tokens, _merge_punctuation(words)

    # -- ASRBackend --------------------------------------------------------------------------
    def transcribe_window(
        self, audio: np.ndarray, window_start_sample: int, prompt: str, prefix: Sequence[Word]
    ) -> list[Word]:
        with self._lock:
            feats = self._features(audio, window_start_sample)
            prefix_text = "".join(w.text for w in prefix)
            _, words = self._decode(feats, prompt, prefix_text)
        return _to_script(words) if self._zh else words

    def transcribe_utterance(self, audio: np.ndarray, prompt: str = "", beam_size: int | None = None) -> list[Word]:
        """Whole-utterance recognition (serial cascade, second pass): 30 s chunks, no streaming
        state; ``prompt``: earlier final text as context; ``beam_size`` over the backend's."""
        out: list[Word] = []
        step = N_FRAMES * HOP
        with self._lock:
            for off in range(0, max(len(audio), 1), step):
                feats = log_mel_reference(audio[off : off + step], self.n_mels, backend=self.accel)
                _, words = self._decode(feats, prompt, "", beam_size)
                prompt = prompt + "".join(w.text for w in words)
                t = off / SR
                out += [Word(w.text, w.start + t, w.end + t, w.probability) for w in words]
        return _to_script(out) if self._zh else out

    def warm_up(self, audio: np.ndarray) -> None:
        self.transcribe_utterance(audio)
        self._mel.reset()

    def reset_stream(self) -> None:
        """Forget the previous session's streaming state: the feature cache is keyed by sample
        index, so a new session starting at sample 0 must not read the old one's frames."""
        self._mel.reset()


_ZH_PROMPT_NORM = norm(ZH_PROMPT)


def _echoes_prompt(text: str) -> bool:
    t = norm(text)
    return len(t) >= 3 and t in _ZH_PROMPT_NORM


_PUNCT = set("。，、？！；：,.?!;:\"'”’）)")


def _merge_punctuation(words: list[Word]) -> list[Word]:
    out: list[Word] = []
    for w in words:
        if out and all(c in _PUNCT for c in w.text.strip()):
            p = out[-1]
            out[-1] = Word(p.text + w.text.strip(), p.start, max(p.end, w.end), p.probability)
        else:
            out.append(w)
    return out


def _to_script(words: list[Word]) -> list[Word]:
    if zhconv is None:
        return words
    return [Word(zhconv.convert(w.text, "zh-cn"), w.start, w.end, w.probability) for w in words]
