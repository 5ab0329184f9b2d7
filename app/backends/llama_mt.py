"""Translation by a small instruction LLM (Qwen2.5 GGUF) in llama.cpp, for the final text.

The runtime is llama.cpp's CPU CFFI extension module (the ``llama-cpp-runtime`` pack: the module
alone, taken from the pinned ``llama-cpp-cffi`` wheel, never installed as a package). It is loaded
by path with lazy symbol binding: the module was built with GCC 14 and names one libstdc++ symbol
(``__cxa_call_terminate``, used only when a ``noexcept`` function throws) that Debian 12's GCC 12
library lacks; bound lazily it is never looked up in normal running.

Decoding is greedy (argmax of the raw logits, no penalties), the prompt the model's own chat
template with a fixed system instruction (and, when given, a glossary of term pairs), the source
sentence as the user turn. The K/V of the prompt's common prefix (the system turn) stays cached
between calls. On the corpus (bench/translators.py, 205 sentences) Qwen2.5-Coder-1.5B scores chrF
58.9 against OPUS-MT beam 4's 55.9 with the reference Chinese in, 47.0 against 40.4 with Whisper's
transcript in (docs/BENCHMARKS.md), at 5-6× the time on 2 cores.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import threading
from pathlib import Path

import numpy as np

SYSTEM = "Translate the user's Chinese into English. Output only the translation."
LANGUAGE_NAMES = {"zh": "Chinese", "ja": "Japanese", "en": "English", "de": "German", "fr": "French",
                  "es": "Spanish", "ko": "Korean", "ru": "Russian"}

_RUNTIMES: dict[str, tuple] = {}
_RT_LOCK = threading.Lock()


def load_runtime(module: Path):
    """(ffi, lib) of llama.cpp's CPU CFFI module at ``module``, loaded once per process."""
    key = str(module)
    with _RT_LOCK:
        if key in _RUNTIMES:
            return _RUNTIMES[key]
        flags = sys.getdlopenflags()
        sys.setdlopenflags(os.RTLD_LAZY | os.RTLD_LOCAL)
        try:
            spec = importlib.util.spec_from_file_location("_llama_cpp_cpu", key)
            if spec is None or spec.loader is None:
                raise RuntimeError(f"{module} is not a loadable module")
            m = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(m)
        finally:
            sys.setdlopenflags(flags)
        ffi, lib = m.ffi, m.lib

        @ffi.def_extern(name="llama_cpp_cffi_ggml_log_callback")
        def _quiet(level, text, user_data):  # llama.cpp's own log lines: dropped
            pass

        lib.llama_log_set(lib.llama_cpp_cffi_ggml_log_callback, ffi.NULL)
        lib.llama_backend_init()
        _RUNTIMES[key] = (ffi, lib)
        return ffi, lib


def system_prompt(source_lang: str = "zh", target_lang: str = "en", glossary=()) -> str:
    """The instruction; ``glossary``: (source term, target term) pairs the translation must use."""
    if (source_lang, target_lang) == ("zh", "en") and not glossary:
        return SYSTEM
    src = LANGUAGE_NAMES.get(source_lang, source_lang)
    tgt = LANGUAGE_NAMES.get(target_lang, target_lang)
    text = f"Translate the user's {src} into {tgt}. Output only the translation."
    pairs = [(a.strip(), b.strip()) for a, b in glossary if a.strip() and b.strip()]
    if pairs:
        text += " Use these translations of terms: " + "; ".join(f"{a} = {b}" for a, b in pairs) + "."
    return text


def clean(text: str) -> str:
    """The translation alone: its first non-empty line, a leading label and enclosing quotes off."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    t = lines[0] if lines else ""
    t = re.sub(r"^(translation|english|english translation)\s*[:：]\s*", "", t, flags=re.IGNORECASE)
    pairs = {'"': '"', "“": "”", "'": "'", "「": "」"}
    if len(t) >= 2 and t[0] in pairs and t[-1] == pairs[t[0]]:
        t = t[1:-1].strip()
    return t


class LlamaTranslator:
    """Greedy translation with a chat model in llama.cpp, plain or verifying a draft.

    Implements ``app.pipeline.protocols.MTBackend``; one call at a time (a lock)."""

    # n_ctx 1024 holds the instruction, a 12 s sentence and its translation; a 128-token batch keeps
    # llama.cpp's compute buffers small (peak RSS with the 1.5B pack: 2.5 GB at 2048/512)
    def __init__(self, gguf: Path, runtime: Path, name: str = "llm", threads: int = 2, n_ctx: int = 1024,
                 n_batch: int = 128, max_tokens: int = 256, source_lang: str = "zh", target_lang: str = "en",
                 glossary=()):
        self.name = name
        self.ffi, self.lib = ffi, lib = load_runtime(runtime)
        mp = lib.llama_model_default_params()
        mp.n_gpu_layers = 0
        # read into memory, not mapped: llama.cpp repacks the weights for the CPU, and a mapped
        # file then stays resident beside the copy (1.5B: peak RSS 1.83 GB mapped, 1.22 GB read)
        mp.use_mmap = False
        self.model = lib.llama_model_load_from_file(str(gguf).encode(), mp)
        if self.model == ffi.NULL:
            raise RuntimeError(f"llama.cpp cannot load {gguf}")
        cp = lib.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch = n_ctx, n_batch, n_batch
        cp.n_threads = cp.n_threads_batch = max(1, threads)
        cp.no_perf = True
        self.ctx = lib.llama_init_from_model(self.model, cp)
        if self.ctx == ffi.NULL:
            lib.llama_model_free(self.model)
            raise RuntimeError("llama.cpp cannot create a context")
        self.vocab = lib.llama_model_get_vocab(self.model)
        self.n_vocab = lib.llama_vocab_n_tokens(self.vocab)
        self.n_batch, self.n_ctx = n_batch, n_ctx
        self.batch = lib.llama_batch_init(n_batch, 0, 1)
        self.max_tokens = max_tokens
        self.source_lang, self.target_lang = source_lang, target_lang
        self.system = system_prompt(source_lang, target_lang, glossary)
        self.cached: list[int] = []  # tokens whose K/V sit in the cache at positions 0..n-1
        tmpl = lib.llama_model_chat_template(self.model, ffi.NULL)
        if tmpl == ffi.NULL:
            raise RuntimeError(f"{gguf} has no chat template")
        self.template = ffi.string(tmpl).decode()
        self._lock = threading.Lock()
        self._sys: tuple[str, int] | None = None
        self.calls = 0
        self._closed = False

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self.lib.llama_batch_free(self.batch)
            self.lib.llama_free(self.ctx)
            self.lib.llama_model_free(self.model)

    def set_glossary(self, pairs) -> None:
        """Term pairs the translation must use (the cached prompt prefix is rebuilt on the next call)."""
        with self._lock:
            self.system = system_prompt(self.source_lang, self.target_lang, pairs)

    @property
    def busy(self) -> bool:
        """A translation is running (another session's, on a server where the pair's sessions
        share this model): a caller with a deadline may prefer not to queue behind it."""
        return self._lock.locked()

    def meta(self, key: str) -> str:
        buf = self.ffi.new("char[256]")
        n = self.lib.llama_model_meta_val_str(self.model, key.encode(), buf, 256)
        return self.ffi.string(buf).decode() if n >= 0 else ""

    # -- MTBackend ---------------------------------------------------------------------------------
    def translate(self, source: str, target_prefix: str = "", beam_size: int | None = None) -> str:
        """Greedy (``beam_size`` is not used: the LLM decodes greedily); ``target_prefix``: the
        translation is made to begin with it."""
        if not source.strip():
            return ""
        with self._lock:
            if self._closed:
                raise RuntimeError("translator closed")
            self.calls += 1
            nxt = self._prompt(source)
            out: list[int] = []
            if target_prefix.strip():
                pre = self.tokenize(target_prefix, False)
                preds = self._decode(pre, len(self.cached), len(pre) - 1)
                self.cached += pre
                out, nxt = list(pre), preds[-1][0]
            toks = self._continue(out, nxt, self._budget(source))
            return clean(self.detok(toks))

    def _budget(self, source: str) -> int:
        """At most this many new tokens: a translation is a few tokens per source character at
        most; beyond that the model is looping."""
        return min(self.max_tokens, 3 * len(source) + 24, self.n_ctx - len(self.cached) - 1)

    # -- tokens and text ---------------------------------------------------------------------------
    def prompt(self, source: str) -> str:
        ffi = self.ffi
        roles = [ffi.new("char[]", b"system"), ffi.new("char[]", b"user")]
        texts = [ffi.new("char[]", self.system.encode()), ffi.new("char[]", source.encode())]
        msgs = ffi.new("struct llama_chat_message[2]")
        for i in range(2):
            msgs[i].role, msgs[i].content = roles[i], texts[i]
        size = 4 * (len(self.system.encode()) + len(source.encode())) + 1024
        buf = ffi.new(f"char[{size}]")
        n = self.lib.llama_chat_apply_template(ffi.new("char[]", self.template.encode()), msgs, 2, True, buf, size)
        if n < 0 or n > size:
            raise RuntimeError("the chat template failed")
        return ffi.unpack(buf, n).decode()

    def tokenize(self, text: str, special: bool) -> list[int]:
        b = text.encode()
        n_max = len(b) + 16
        toks = self.ffi.new(f"int32_t[{n_max}]")
        n = self.lib.llama_tokenize(self.vocab, b, len(b), toks, n_max, special, special)
        if n < 0:
            raise RuntimeError("tokenize failed")
        return list(toks[0:n])

    def detok(self, tokens: list[int]) -> str:
        out = b""
        buf = self.ffi.new("char[256]")
        for t in tokens:
            n = self.lib.llama_token_to_piece(self.vocab, t, buf, 256, 0, False)
            out += self.ffi.unpack(buf, n)
        return out.decode("utf-8", "replace")

    # -- the model ---------------------------------------------------------------------------------
    def _decode(self, tokens: list[int], pos0: int, logits_from: int) -> list[tuple[int, float]]:
        """Run ``tokens`` at positions pos0…; (argmax, top-1 minus top-2 logit) after each token
        from index ``logits_from`` on (one batched pass per ``n_batch`` tokens)."""
        lib, b, ffi = self.lib, self.batch, self.ffi
        if pos0 + len(tokens) > self.n_ctx:
            raise RuntimeError(f"the text is too long for the LLM's context ({self.n_ctx} tokens)")
        out = []
        for c0 in range(0, len(tokens), self.n_batch):
            chunk = tokens[c0:c0 + self.n_batch]
            b.n_tokens = len(chunk)
            want = []
            for j, t in enumerate(chunk):
                b.token[j], b.pos[j], b.n_seq_id[j], b.seq_id[j][0] = t, pos0 + c0 + j, 1, 0
                b.logits[j] = c0 + j >= logits_from
                if c0 + j >= logits_from:
                    want.append(j)
            if lib.llama_decode(self.ctx, b) != 0:
                raise RuntimeError("llama_decode failed")
            for j in want:
                x = np.frombuffer(ffi.buffer(lib.llama_get_logits_ith(self.ctx, j), self.n_vocab * 4),
                                  dtype=np.float32)
                i = int(x.argmax())
                top2 = np.partition(x, -2)[-2]
                out.append((i, float(x[i] - top2)))
        return out

    def _reuse(self, toks: list[int]) -> int:
        """Keep the cached K/V of the common prefix (at least one token left to run)."""
        k = 0
        for a, c in zip(self.cached, toks[:-1]):
            if a != c:
                break
            k += 1
        self.lib.llama_kv_self_seq_rm(self.ctx, 0, k, -1)
        self.cached = self.cached[:k]
        return k

    def _system_len(self) -> int:
        """Tokens of the prompt before the user's text (the system turn): the part kept cached."""
        if self._sys is None or self._sys[0] != self.system:
            a, b = self.tokenize(self.prompt("甲"), True), self.tokenize(self.prompt("乙"), True)
            n = 0
            while n < min(len(a), len(b)) and a[n] == b[n]:
                n += 1
            self._sys = (self.system, n)
        return self._sys[1]

    def _prompt(self, source: str) -> int:
        """Run the prompt; the argmax after it. The system turn's K/V stay cached between calls
        and the rest always runs as one batch: llama.cpp's logits depend on how tokens were
        batched (docs/BENCHMARKS.md), so the same sentence always gets the same translation."""
        toks = self.tokenize(self.prompt(source), True)
        n_sys = self._system_len()
        if self._reuse(toks[:n_sys] + [-1]) < n_sys:  # (new, or the instruction changed) the system turn alone
            self.lib.llama_kv_self_seq_rm(self.ctx, 0, 0, -1)
            self._decode(toks[:n_sys], 0, n_sys)
            self.cached = toks[:n_sys]
        else:
            self.lib.llama_kv_self_seq_rm(self.ctx, 0, n_sys, -1)
            self.cached = toks[:n_sys]
        ((nxt, _),) = self._decode(toks[n_sys:], n_sys, len(toks) - n_sys - 1)
        self.cached = list(toks)
        return nxt

    def _continue(self, out: list[int], nxt: int, limit: int | None = None) -> list[int]:
        """Greedy from ``nxt`` (the argmax after ``self.cached``), appending to ``out``."""
        eog = self.lib.llama_vocab_is_eog
        limit = self.max_tokens if limit is None else limit
        while len(out) < limit and not eog(self.vocab, nxt):
            out.append(nxt)
            if len(self.cached) + 1 >= self.n_ctx:
                break
            ((nxt, _),) = self._decode([nxt], len(self.cached), 0)
            self.cached.append(out[-1])
        return out

    def greedy(self, source: str) -> list[int]:
        with self._lock:
            return self._continue([], self._prompt(source))

    def with_draft(self, source: str, draft: str, tau: float = 1.0) -> tuple[list[int], int, int, int]:
        """Greedy output verified against ``draft``: (tokens, draft tokens, accepted, argmax agreements).

        The prompt runs exactly as in ``greedy``, so its argmax decides d[0] exactly. If d[0]
        matches, the whole draft runs in one batched pass; d[j+1] is accepted while the argmax
        after d[j] is d[j+1] with a top-1/top-2 logit margin of at least ``tau`` (a batched pass
        differs numerically from one-token decoding, see BENCHMARKS; ``tau`` = 0: argmax alone).
        The model's token after the accepted prefix comes from the same pass when its margin is
        ``tau`` or more; otherwise the last accepted token is run again alone for it."""
        with self._lock:
            nxt = self._prompt(source)
            d = self.tokenize(draft, False)[:self.max_tokens] if draft.strip() else []
            if not d or d[0] != nxt:
                return self._continue([], nxt), len(d), 0, 0
            n0 = len(self.cached)
            if n0 + len(d) + self.max_tokens > self.n_ctx:
                raise RuntimeError("context too small")
            preds = self._decode(d, n0, 0)  # preds[j]: (argmax, margin) after d[j]
            acc = 1
            while acc < len(d) and preds[acc - 1][0] == d[acc] and preds[acc - 1][1] >= tau:
                acc += 1
            agree = 1
            while agree < len(d) and preds[agree - 1][0] == d[agree]:
                agree += 1
            out = d[:acc]
            nxt, margin = preds[acc - 1]
            if margin < tau:  # not certain: the last accepted token again, alone, as greedy runs it
                self.lib.llama_kv_self_seq_rm(self.ctx, 0, n0 + acc - 1, -1)
                ((nxt, _),) = self._decode([d[acc - 1]], n0 + acc - 1, 0)
            else:
                self.lib.llama_kv_self_seq_rm(self.ctx, 0, n0 + acc, -1)  # the rejected draft positions
            self.cached += d[:acc]
            if len(out) >= self.max_tokens:
                return out, len(d), acc, agree
            return self._continue(out, nxt), len(d), acc, agree


__all__ = ["LlamaTranslator", "load_runtime", "system_prompt", "clean", "SYSTEM"]
