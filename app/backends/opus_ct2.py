"""Machine translation with a CTranslate2 translator and its SentencePiece model (OPUS-MT/Argos)."""

from __future__ import annotations

import collections
import math
import threading

import ctranslate2
import sentencepiece as spm

from app.pipeline.speculation import DraftOutcome

MAX_DECODING_LENGTH = 256
REPETITION_PENALTY = 1.1


class CT2Translator:
    """Speculative decoding (``translate_with_draft``): the draft is verified in one
    teacher-forced pass (``score_batch``, each draft token's log-probability). A token is
    accepted only if its probability is at least ``accept_prob`` (≥ 0.5 makes it certainly the
    argmax; the default 0.55 leaves a margin for the numerical difference between the batched
    scoring pass and incremental decoding) and it does not occur earlier in the sequence (the
    repetition penalty lowers a repeated token's score, so the raw argmax is no proof there).
    A draft verified in full, end-of-sentence included, is the greedy output and needs no
    decoding. Otherwise the verified prefix is forced with ``target_prefix`` and the rest decoded;
    CTranslate2 4.x runs a forced prefix one decoder step per token, as costly as decoding it,
    so only a fully verified draft saves decoder steps.

    With ``beam_size > 1`` the full-draft shortcut is never taken (beam search may prefer
    another hypothesis); the verified greedy prefix is forced and the rest decoded with the
    requested beam, which can differ from plain beam search (bench/speculative.py measures how often).
    """

    def __init__(self, model_dir: str, sp_source: str, sp_target: str | None = None, *, name: str,
                 source_lang: str, target_lang: str, compute_type: str = "int8", threads: int = 1,
                 beam_size: int = 4, micro_batch: int = 8, accept_prob: float = 0.55):
        if not 0.5 <= accept_prob <= 1.0:
            raise ValueError("accept_prob below 0.5 would accept tokens that are not the argmax")
        self.name = name
        self.source_lang = source_lang
        self.target_lang = target_lang
        self.beam_size = beam_size
        self.micro_batch = micro_batch  # examples per translate_batch call in translate_many
        self.accept_logprob = math.log(accept_prob)
        self._model_dir, self._threads = model_dir, threads
        self._tr = self._load(compute_type)
        self._sp_src = spm.SentencePieceProcessor(model_file=sp_source)
        self._sp_tgt = spm.SentencePieceProcessor(model_file=sp_target) if sp_target else self._sp_src
        # re-entrant: a pipeline stage takes it before its watched call (app.pipeline.stage), so
        # the time spent waiting while another stage decodes is not counted as a stall
        self._lock = threading.RLock()
        self.call_lock = self._lock
        # target tokens of recent outputs: a committed translation is forced back as the decoder
        # prefix token for token (re-encoding English with a source-side SentencePiece model
        # would give different pieces than the model produced)
        self._recent: collections.OrderedDict[str, list[str]] = collections.OrderedDict()

    def _load(self, compute_type: str):
        return ctranslate2.Translator(self._model_dir, device="cpu", compute_type=compute_type,
                                      inter_threads=1, intra_threads=self._threads)

    @property
    def compute_type(self) -> str:
        return self._tr.compute_type

    def set_compute_type(self, compute_type: str) -> str:
        """Reload the weights in another precision; returns what changed, for the policy's event."""
        before = self._tr.compute_type
        if before.split("_")[0] == compute_type.split("_")[0]:
            return f"no effect: MT already {before}"
        tr = self._load(compute_type)
        with self._lock:
            self._tr = tr
        return f"MT compute type {before} → {tr.compute_type}"

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

    def _decode(self, src: list[str], prefix: list[str] | None, beam: int) -> list[str]:
        res = self._tr.translate_batch(
            [src],
            target_prefix=[prefix] if prefix else None,
            beam_size=beam,
            max_decoding_length=MAX_DECODING_LENGTH,
            repetition_penalty=REPETITION_PENALTY,
        )
        return res[0].hypotheses[0]

    def _finish(self, toks: list[str], target_prefix: str, prefix: list[str] | None) -> str:
        out = self._detok(toks)
        self._remember(out, toks)
        if target_prefix and out.startswith(self._detok(prefix or [])):
            # keep the exact committed prefix string the user already saw
            out = target_prefix.strip() + out[len(self._detok(prefix or [])):]
        return out

    def translate(self, source: str, target_prefix: str = "", beam_size: int | None = None) -> str:
        source = source.strip()
        if not source:
            return target_prefix
        src = self._sp_src.encode(source, out_type=str)
        with self._lock:
            prefix = self._prefix_tokens(target_prefix) if target_prefix.strip() else None
            toks = self._decode(src, prefix, beam_size or self.beam_size)
            return self._finish(toks, target_prefix, prefix)

    def verify(self, src: list[str], draft: list[str], start: int) -> tuple[int, bool]:
        """Draft tokens from ``start`` on that greedy decoding certainly reproduces: the count,
        and whether the end of sentence after the whole draft is certain too."""
        scores = self._tr.score_batch([src], [draft])[0].log_probs  # one per token, then </s>
        n = start
        while (n < len(draft) and scores[n] >= self.accept_logprob
               and (REPETITION_PENALTY == 1.0 or draft[n] not in draft[:n])):
            n += 1
        eos = n == len(draft) and len(scores) > n and scores[n] >= self.accept_logprob
        return n - start, eos

    def translate_with_draft(self, source: str, draft: str, target_prefix: str = "",
                             beam_size: int | None = None) -> tuple[str, DraftOutcome]:
        source = source.strip()
        if not source:
            return target_prefix, DraftOutcome(0, 0, 0)
        beam = beam_size or self.beam_size
        src = self._sp_src.encode(source, out_type=str)
        with self._lock:
            prefix = self._prefix_tokens(target_prefix) if target_prefix.strip() else []
            dtoks = self._prefix_tokens(draft) if draft.strip() else []
            if dtoks[:len(prefix)] != prefix or len(dtoks) >= MAX_DECODING_LENGTH:
                toks = self._decode(src, prefix or None, beam)  # the draft does not extend the prefix
                return self._finish(toks, target_prefix, prefix), DraftOutcome(len(dtoks), 0, 0)
            drafted = len(dtoks) - len(prefix)
            if drafted == 0:
                toks = self._decode(src, prefix or None, beam)
                return self._finish(toks, target_prefix, prefix), DraftOutcome(0, 0, 0)
            accepted, eos = self.verify(src, dtoks, len(prefix))
            if beam == 1 and eos:
                # every step of greedy decoding is certain: the draft is the output
                return self._finish(dtoks, target_prefix, prefix), \
                    DraftOutcome(drafted, accepted, len(dtoks) + 1)
            forced = dtoks[:len(prefix) + accepted]
            toks = self._decode(src, forced or None, beam)
            return self._finish(toks, target_prefix, prefix), DraftOutcome(drafted, accepted, 0)

    def translate_many(self, sources: list[str], beam_size: int | None = None) -> list[str]:
        """Independent sources in micro-batches of ``micro_batch`` (a server's shared batcher)."""
        idx = [i for i, s in enumerate(sources) if s.strip()]
        out = [""] * len(sources)
        if not idx:
            return out
        toks = [self._sp_src.encode(sources[i].strip(), out_type=str) for i in idx]
        with self._lock:
            res = self._tr.translate_batch(toks, max_batch_size=max(1, self.micro_batch),
                                           beam_size=beam_size or self.beam_size,
                                           max_decoding_length=MAX_DECODING_LENGTH,
                                           repetition_penalty=REPETITION_PENALTY)
            for i, r in zip(idx, res):
                hyp = r.hypotheses[0]
                out[i] = self._detok(hyp)
                self._remember(out[i], hyp)
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
