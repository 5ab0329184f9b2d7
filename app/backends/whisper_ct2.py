"""Whisper through CTranslate2, fed with our own incremental log-mel features."""

from __future__ import annotations

import os
import threading
import time
import unicodedata
import zlib
from typing import Sequence

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import ctranslate2
import numpy as np
import tokenizers
from faster_whisper import WhisperModel
from faster_whisper.tokenizer import Tokenizer

from app.accel.logmel import IncrementalLogMel, log_mel_reference
from app.core.audio import HOP, SR
from app.core.text import norm, unspaced
from app.pipeline.protocols import Word
from app.pipeline.repeats import loop_cut, restart_cut

try:
    import zhconv
except ImportError:  # optional: without it the source line keeps Whisper's script
    zhconv = None

N_FRAMES = 3000  # Whisper's encoder sees exactly 30 s
FRAMES_PER_SECOND = SR // HOP
PAD_FRAMES = 100
TOKENS_PER_SECOND = 7
CONTEXT_WORDS = 60  # words (characters in Chinese) of earlier text a loop is looked for in

# faster-whisper's defaults (its transcribe(): compression_ratio_threshold, log_prob_threshold,
# no_speech_threshold). A decode whose text compresses better than COMPRESSION_RATIO is a loop:
# it is decoded once more by sampling (temperature RETRY_TEMPERATURE, without the previous text as
# prompt, which is what primes most loops) and the retry kept if it passes; what loops either way
# is cut (``cut_repetition``, ``app.pipeline.repeats``). A decode whose no-speech probability is
# above NO_SPEECH_PROB and whose average token log-probability is below LOG_PROB is silence, music
# or noise: its new words are dropped, as faster-whisper skips such a segment. Only a failing
# decode costs a second one (on 2 cores the first pass cannot afford two on every window).
COMPRESSION_RATIO = 2.4
LOG_PROB = -1.0
NO_SPEECH_PROB = 0.6
RETRY_TEMPERATURE = 0.4
# words the alignment piles up at the very end of the audio: text with no audio left to hold it
CRAMMED_TAIL_S = 0.15
CRAMMED_MIN_WORDS = 3


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


def compression_ratio(text: str) -> float:
    """How much zlib shrinks the text (faster-whisper's measure): a loop compresses well."""
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


def avg_logprob(score: float, n_tokens: int) -> float:
    """The average log-probability per token from CTranslate2's length-normalised score, as
    faster-whisper recovers it (the end-of-text token counts too)."""
    return score * n_tokens / (n_tokens + 1)


def reads_out_prompt(text: str, prompt: str, min_chars: int) -> bool:
    """Whether ``text`` (comparison form) opens with a piece of ``prompt`` of ``min_chars`` or
    more that is at least half of it: Whisper reading out its prompt."""
    k = 0
    while k < len(text) and text[:k + 1] in prompt:
        k += 1
    return k >= min_chars and 2 * k >= len(text)


def is_silence(no_speech_prob: float, logprob: float) -> bool:
    """Whisper's own test for a segment with nothing said in it."""
    return no_speech_prob > NO_SPEECH_PROB and logprob < LOG_PROB


# spoken languages written without spaces: translating from them, Whisper sometimes writes English
# the same way ("Thetotal income of thethird level", "Let'stake a look")
UNSPACED_SOURCES = frozenset({"zh", "ja", "yue", "th", "lo", "my"})
# words after which a token without its leading space still starts a new word when it is a whole
# word of its own (" total", " take"): "the"+"total" is no English word; "in"+"box" is, and is
# split too, as " in box" (rare, and harmless next to the glue)
_GLUE_HEADS = frozenset("""the an and or but to of in on at for with by from is are was were be been
we you he she it they this that these those our your my his her their its will would can could
not so as if do does did has have had there here what which who""".split())
# and short words glued after a whole word ("needto", "timesthe")
_GLUE_TAILS = frozenset("the to and of for with that is are we you it in on".split())
_CONTRACTIONS = ("'s", "'re", "'ll", "'ve", "'d", "'m", "n't", "’s", "’re", "’ll", "’ve", "’d", "’m", "n’t")


class _SpacedWordsTokenizer(Tokenizer):
    """Whisper's translate task writes English whatever language it hears, but faster-whisper
    splits words by the *spoken* language: for zh/ja/th... at every token, so an English token
    without its leading space ("s", "ed") became a word of its own. Words are split on spaces,
    and (from an unspaced spoken language) a word glued to a function word before it is split
    off with its space put back."""

    def split_to_word_tokens(self, tokens):
        words, word_tokens = self.split_tokens_on_spaces(tokens)
        if self.language_code not in UNSPACED_SOURCES:
            return words, word_tokens
        out_w, out_t = [], []
        for w, toks in zip(words, word_tokens):
            for piece, piece_toks in self._unglue(w, toks):
                out_w.append(piece)
                out_t.append(piece_toks)
        return out_w, out_t

    def _unglue(self, word: str, toks: list[int]) -> list[tuple[str, list[int]]]:
        if len(toks) < 2 or toks[0] >= self.eot:
            return [(word, toks)]
        for j in range(1, len(toks)):
            if not self.decode([toks[j]])[:1].isalpha():
                continue
            head = self.decode(toks[:j]).strip()
            rest = self.decode(toks[j:])
            core = rest.rstrip(".,!?;:%\"'”’)")
            low = head.lower()
            glued_to_head = low in _GLUE_HEADS or (low.endswith(_CONTRACTIONS) and len(low) > 2)
            glued_tail = core.lower() in _GLUE_TAILS and self._whole_word(head)
            if not ((glued_to_head and self._whole_word(core)) or glued_tail):
                continue
            if self._whole_word(head + core):  # "therefore", "into", "inbox": one word after all
                continue
            lead = word[: len(word) - len(word.lstrip())]
            return [(lead + head, toks[:j])] + self._unglue(" " + rest, toks[j:])
        return [(word, toks)]

    def _whole_word(self, text: str) -> bool:
        """Whether ``text`` is a word of the vocabulary, written with its leading space."""
        return (len(text) >= 2 and text.isascii() and text.isalpha()
                and any(self.tokenizer.token_to_id("\u0120" + t) is not None for t in (text, text.lower())))


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
        # re-entrant: a pipeline stage takes it before its watched call (app.pipeline.stage), so
        # the time spent waiting while another stage decodes is not counted as a stall
        self._lock = threading.RLock()
        self.call_lock = self._lock
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
        # the hallucination guard's counts (decodes whose new text it dropped as non-speech,
        # retried for a loop or for reading out the prompt, and decodes it cut repeats from)
        self.guard = {"silence": 0, "retries": 0, "retry_kept": 0, "echo_retries": 0, "cut_words": 0}
        self.frontend = frontend
        self.accel = accel
        self._mel = IncrementalLogMel(self.n_mels, backend=accel)

    def _set_language(self, language: str) -> None:
        cls = _SpacedWordsTokenizer if self.task == "translate" else Tokenizer
        self.tokenizer = cls(self._hf_tokenizer, self._multilingual, task=self.task,
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

    def _generate(self, enc, seq: list[int], max_len: int, beam_size: int, suppress_blank: bool,
                  temperature: float = 0.0):
        kw = ({"beam_size": beam_size} if temperature <= 0 else
              {"beam_size": 1, "sampling_temperature": temperature, "sampling_topk": 0})
        return self._model.model.generate(
            enc,
            [seq],
            max_length=max_len,
            suppress_blank=suppress_blank,
            suppress_tokens=self._suppress,
            return_scores=True,
            return_no_speech_prob=True,
            repetition_penalty=1.05,
            no_repeat_ngram_size=0,
            **kw,
        )[0]

    def _new_tokens(self, res, prefix_toks: list[int]) -> tuple[list[int], float]:
        """The tokens a decode added after the forced prefix, and their average log-probability."""
        # CTranslate2 returns the forced prefix as part of the sequence.
        text_tokens = [t for t in res.sequences_ids[0] if t < self.tokenizer.eot]
        if text_tokens[: len(prefix_toks)] == prefix_toks:
            text_tokens = text_tokens[len(prefix_toks):]
        n = len(res.sequences_ids[0])
        return text_tokens, (avg_logprob(res.scores[0], n) if res.scores else 0.0)

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
        task = list(self.tokenizer.sot_sequence) + [self.tokenizer.no_timestamps]
        prefix_toks = self.tokenizer.encode((" " if not self._zh else "") + prefix_text.strip()) if prefix_text.strip() else []
        seq += task + prefix_toks
        # speech carries at most a few tokens a second: a longer output is a hallucination loop
        window_s = n_content / FRAMES_PER_SECOND
        # CTranslate2 counts the whole prompt (context, task tokens, prefix) in max_length
        new_max = int(TOKENS_PER_SECOND * window_s) + 8
        max_len = min(448, len(seq) + new_max)
        beam = beam_size or self.beam_size
        res = self._generate(enc, seq, max_len, beam, not prefix_toks)
        new, logprob = self._new_tokens(res, prefix_toks)
        retried = False
        if new and is_silence(res.no_speech_prob, logprob):
            new = []  # silence, music or noise: nothing was said here
            self.guard["silence"] += 1
        elif new and compression_ratio(self.tokenizer.decode(new).strip()) > COMPRESSION_RATIO:
            # a loop: one more decode, sampled, without the earlier text that usually primes it
            retried = True
            self.guard["retries"] += 1
            ctranslate2.set_random_seed(len(new))  # the same input gives the same text
            bare = task + prefix_toks
            res2 = self._generate(enc, bare, min(448, len(bare) + new_max), 1, not prefix_toks, RETRY_TEMPERATURE)
            new2, logprob2 = self._new_tokens(res2, prefix_toks)
            if new2 and is_silence(res2.no_speech_prob, logprob2):
                new = []
                self.guard["silence"] += 1
            elif compression_ratio(self.tokenizer.decode(new2).strip()) <= COMPRESSION_RATIO:
                new = new2
                self.guard["retry_kept"] += 1
        if not retried and ptoks and new and self._echoes(new, prompt):
            # the text only reads out part of the prompt (the previous sentence, over a short
            # clause whose own words it missed): decoded once more without the prompt
            retried = True
            self.guard["echo_retries"] += 1
            bare = task + prefix_toks
            res2 = self._generate(enc, bare, min(448, len(bare) + new_max), beam, not prefix_toks)
            new, logprob2 = self._new_tokens(res2, prefix_toks)
            if new and is_silence(res2.no_speech_prob, logprob2):
                new = []
                self.guard["silence"] += 1
        t2 = time.perf_counter()
        cut = cut_repetition(new)
        cut = self._cut_repeated_words(cut, prompt + " " + prefix_text)
        self.guard["cut_words"] += len(new) > len(cut)
        if cut and not prefix_toks and not norm(self.tokenizer.decode(cut)):
            # marks alone (" ." over music, "..." over noise): nothing was said. (After a forced
            # prefix a lone mark is news: the sentence the prefix holds has ended.)
            cut = []
        text_tokens = prefix_toks + cut
        if self._zh and _echoes_prompt(self.tokenizer.decode(cut)):
            # on a near-silent window Whisper may read out its own style prompt
            text_tokens = prefix_toks
        if not text_tokens:
            return [], []
        align = self._model.find_alignment(self.tokenizer, [text_tokens], enc, n_content)[0]
        self.last_timings = {"encode_ms": (t1 - t0) * 1e3, "decode_ms": (t2 - t1) * 1e3,
                             "align_ms": (time.perf_counter() - t2) * 1e3, "frames": n_input,
                             "new_tokens": len(text_tokens) - len(prefix_toks), "prefix_tokens": len(prefix_toks),
                             "retried": int(retried)}
        audio_s = n_content / FRAMES_PER_SECOND
        words = [
            Word(w["word"], float(w["start"]), min(float(w["end"]), audio_s), float(w["probability"]))
            for w in align
            if w["word"].strip() and float(w["start"]) < audio_s - 0.05  # nothing past the audio's end
        ]
        words = drop_crammed_tail(_merge_punctuation(words), audio_s)
        if self.task == "translate":
            # a translation drifting into transcribing ("Let's take a look at大家在替完"): the
            # English target has no use for words in the spoken language's script
            words = [w for w in words if not any(_foreign(c) for c in w.text)]
        if (words and not self._unspaced_output() and not words[0].text[:1].isspace()
                and not _trails(words[0].text)):
            # Translating from Chinese, Whisper writes its first English word as it would a Chinese
            # one, with no space before it; a window that starts after a pause or a trim (no forced
            # prefix) then glued it to the word before ("timesthe", "andthe", "needto"). A forced
            # prefix always starts with a space, so a word it straddles is not touched.
            w = words[0]
            words[0] = Word(" " + w.text, w.start, w.end, w.probability)
        return text_tokens, words

    def _echoes(self, new: list[int], prompt: str) -> bool:
        """Whether the new text opens by reading out a piece of the prompt that makes half of it
        or more, long enough not to be a chance repeat (12+ letters of spaced text, 5+ characters
        of Chinese/Japanese)."""
        return reads_out_prompt(norm(self.tokenizer.decode(new)), norm(prompt),
                           5 if self._unspaced_output() else 12)

    def _unspaced_output(self) -> bool:
        return unspaced(self.output_language or self.language or "")

    def _cut_repeated_words(self, new: list[int], context: str) -> list[int]:
        """Cut a loop that token ids miss: copies that differ in case, spacing or punctuation
        (" like" / " Like", "you." / "you..."), and copies of the text before the window (the
        prompt and the forced prefix: the loop runs on across windows). Words in spaced output,
        characters in Chinese/Japanese, where only a loop continuing the earlier text is cut
        here (one inside the window is ``cut_repetition``'s, on tokens)."""
        if not new:
            return new
        spaced = not self._unspaced_output()
        if spaced:
            pieces, piece_tokens = self.tokenizer.split_tokens_on_spaces(new)
            keys, starts = [], []
            at = 0
            for text, toks in zip(pieces, piece_tokens):
                k = norm(text)
                if k:
                    keys.append(k)
                    starts.append(at)
                at += len(toks)
            old = [k for k in (norm(w) for w in context.split()[-CONTEXT_WORDS:]) if k]
        else:
            pieces, piece_tokens = self.tokenizer.split_tokens_on_unicode(new)
            keys, starts = [], []
            at = 0
            for text, toks in zip(pieces, piece_tokens):
                for c in norm(text):
                    keys.append(c)
                    starts.append(at)
                at += len(toks)
            old = list(norm(context))[-CONTEXT_WORDS:]
        if not keys:
            return new
        keep = loop_cut(old + keys, len(old), min_period=1 if spaced else 4, within=spaced) - len(old)
        if spaced and keep > 0:
            keep = restart_cut(keys[:keep])
        return new if keep >= len(keys) else new[:starts[keep]]

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

    def transcribe_continued(self, audio: np.ndarray, prefix: str, prompt: str = "",
                             beam_size: int | None = None) -> list[Word]:
        """A sentence decoded after the end of the one before it (the second pass): ``audio``
        opens with that earlier speech, whose final text ``prefix`` is forced, so the model hears
        and reads what led up to the sentence as a whole-file decode does. Returns all words,
        the prefix's included, times relative to the audio start; at most 30 s of audio."""
        if len(audio) > N_FRAMES * HOP:
            raise ValueError("transcribe_continued takes at most 30 s of audio")
        with self._lock:
            feats = log_mel_reference(audio, self.n_mels, backend=self.accel)
            _, words = self._decode(feats, prompt, prefix, beam_size)
        return _to_script(words) if self._zh else words

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
# marks that open what follows ("(", "$5", "#1", "“"): they stay with the next word
_OPENING = set("([{“‘«¿¡$£€¥#@&*+<=~^`\\/|-–—_「『【《〈（")


def _trails(text: str) -> bool:
    """A word that is only marks or symbols closing what precedes it: "%", "...", "°", ")"."""
    t = text.strip()
    if not t:
        return False
    if all(c in _PUNCT for c in t):
        return True
    # split on spaces, "78%" comes as " 78" and "%": without a leading space such a piece belongs
    # to the word before it (left apart, "%" is a word of its own whose comparison form is empty,
    # and the streaming prefix match wrote it twice: "78%%")
    return (text == t and t[0] not in _OPENING
            and all(unicodedata.category(c)[0] in "PS" for c in t))


def drop_crammed_tail(words: list[Word], audio_s: float) -> list[Word]:
    """Without the words that start in the audio's last ``CRAMMED_TAIL_S`` seconds when there are
    ``CRAMMED_MIN_WORDS`` or more of them. No one says three words in 0.15 s: the alignment put
    there text the model wrote past the speech. It is most often a loop: "…is to be ill-disposed.
    I must be rather cold-hearted and rather selfish, is to be ill-disposed." had its 14 repeated
    words all at the 5 s sentence's last 60 ms (music at 0 dB, tiny.en). A sentence's audio runs
    on past its last word (the second pass keeps 0.25 s of it), and a streaming window that cuts
    a real word will hear it whole in its next step."""
    crammed = [w for w in words if w.start >= audio_s - CRAMMED_TAIL_S]
    if len(crammed) < CRAMMED_MIN_WORDS:
        return words
    return [w for w in words if w.start < audio_s - CRAMMED_TAIL_S]


def _merge_punctuation(words: list[Word]) -> list[Word]:
    out: list[Word] = []
    for w in words:
        if out and _trails(w.text):
            p = out[-1]
            out[-1] = Word(p.text + w.text.strip(), p.start, max(p.end, w.end), p.probability)
        else:
            out.append(w)
    return out


def _foreign(ch: str) -> bool:
    """A character of a CJK script (ideographs, kana, hangul, CJK punctuation): never English."""
    o = ord(ch)
    return (0x3000 <= o <= 0x9FFF or 0xAC00 <= o <= 0xD7AF or 0xF900 <= o <= 0xFAFF
            or 0xFF00 <= o <= 0xFF60 or 0x20000 <= o <= 0x2FFFF)


def _to_script(words: list[Word]) -> list[Word]:
    if zhconv is None:
        return words
    return [Word(zhconv.convert(w.text, "zh-cn"), w.start, w.end, w.probability) for w in words]
