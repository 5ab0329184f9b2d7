"""Machine translation with a CTranslate2 translator and its SentencePiece model (OPUS-MT/Argos)."""

from __future__ import annotations

import collections
import threading

import ctranslate2
import sentencepiece as spm


class CT2Translator:
    def __init__(self, model_dir: str, sp_source: str, sp_target: str | None = None, *, name: str,
                 source_lang: str, target_lang: str, compute_type: str = "int8", threads: int = 1,
                 beam_size: int = 4):
        self.name = name
        self.source_lang = source_lang
        self.target_lang = target_lang
        self.beam_size = beam_size
        self._tr = ctranslate2.Translator(model_dir, device="cpu", compute_type=compute_type,
                                          inter_threads=1, intra_threads=threads)
        self._sp_src = spm.SentencePieceProcessor(model_file=sp_source)
        self._sp_tgt = spm.SentencePieceProcessor(model_file=sp_target) if sp_target else self._sp_src
        self._lock = threading.Lock()
        # target tokens of recent outputs: a committed translation is forced back as the decoder
        # prefix token for token (re-encoding English with a source-side SentencePiece model
        # would give different pieces than the model produced)
        self._recent: collections.OrderedDict[str, list[str]] = collections.OrderedDict()

    def _prefix_tokens(self, prefix: str) -> list[str]:
        prefix = prefix.strip()
        for text, toks in reversed(self._recent.items()):
            if not text.startswith(prefix):
                continue
            for k in range(len(toks), 0, -1):
                if self._detok(toks[:k]) == prefix:
                    return toks[:k]
        return self._sp_tgt.encode(prefix, out_type=str)

    def _remember(self, text: str, toks: list[str]) -> None:
        self._recent[text] = toks
        while len(self._recent) > 32:
            self._recent.popitem(last=False)

    def _detok(self, tokens: list[str]) -> str:
        return "".join(tokens).replace("▁", " ").strip()

    def translate(self, source: str, target_prefix: str = "", beam_size: int | None = None) -> str:
        source = source.strip()
        if not source:
            return target_prefix
        src = self._sp_src.encode(source, out_type=str)
        with self._lock:
            prefix = self._prefix_tokens(target_prefix) if target_prefix.strip() else None
            res = self._tr.translate_batch(
                [src],
                target_prefix=[prefix] if prefix else None,
                beam_size=beam_size or self.beam_size,
                max_decoding_length=256,
                repetition_penalty=1.1,
            )
            toks = res[0].hypotheses[0]
            out = self._detok(toks)
            self._remember(out, toks)
        if target_prefix and out.startswith(self._detok(prefix or [])):
            # keep the exact committed prefix string the user already saw
            out = target_prefix.strip() + out[len(self._detok(prefix or [])):]
        return out


class IdentityMT:
    """For pairs where recognition already yields the target language (en-en, Whisper translate)."""

    def __init__(self, lang: str):
        self.name = "none"
        self.source_lang = lang

    def translate(self, source: str, target_prefix: str = "", beam_size: int | None = None) -> str:
        if target_prefix and not source.startswith(target_prefix):
            return target_prefix + " " + source
        return source
