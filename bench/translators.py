"""Translators for the final text (issue 25, step 1): OPUS-MT against a small instruction LLM, zh→en.

    python bench/llm_fetch.py                       # once: the GGUF models and the llama.cpp runtime
    python bench/translators.py                     # the table; --json bench/out/translators.json
    python bench/translators.py --models 0.5b --inputs ref     # a subset
    python bench/translators.py --no-wait           # skip the load-average wait (numbers noted as such)
    python bench/translators.py --numerics          # how much llama.cpp's greedy depends on batching

The 16 sentences of the zh dev set (``shared/data/zh/manifest.jsonl``), two inputs:

- ``ref``: the reference Chinese (``text``);
- ``asr``: what the app's Whisper pack makes of the clip: the ``whisper-base`` pack loaded as the app
  loads it (``app.models.loader.load_asr``, 2 threads) and its second-pass call
  ``transcribe_utterance`` (beam 5, language zh, no earlier-sentence prompt, zh-cn script). Cached in
  ``bench/out/translators_asr.json`` (keyed by clip id, pack and the clip's sha256).

Variants, each scored against ``translations.en`` (sacrebleu corpus chrF and BLEU over the 16
segments, default settings; also chrF of the 16 joined into one segment)
and timed per sentence (wall clock, median over the 16; 2 threads everywhere; one untimed warm-up call
per variant first):

- ``opus b1`` / ``opus b4``: the app's ``CT2Translator`` (``opus-mt-zh-en`` pack, int8, repetition
  penalty 1.1 as in the app), beam 1 and beam 4;
- ``qwen X greedy``: Qwen2.5-Coder-X-Instruct Q4_K_M through llama.cpp (``llm_fetch.runtime()``), the
  model's chat template (llama.cpp's ``llama_chat_apply_template`` on the GGUF's template, i.e.
  ChatML) with the system prompt ``SYSTEM`` and the Chinese as the user turn; greedy = argmax of the
  raw logits (temperature 0, no penalties), at most ``MAX_TOKENS`` tokens, stop at end-of-generation.
  The KV cache of the prompt's common prefix (the system turn) is kept between calls, as an app would;
- ``qwen X +draft``: the same greedy decoding with the OPUS-MT beam-4 translation as a draft. The
  prompt's uncached tail and the draft's tokens go through the model in one batched ``llama_decode``
  with logits at every draft position; the longest prefix of the draft that matches the model's
  argmax at each position is kept, the model's own token at the first disagreement (or after the whole
  draft) comes free from the same pass, the draft's rejected positions are removed from the KV cache,
  and greedy decoding continues from there. The result must equal plain greedy token for token: it is
  checked per sentence (``--no-assert`` reports mismatches instead of stopping). Reported: acceptance
  (draft tokens accepted / draft tokens), fully accepted drafts, and the speed-up over plain greedy
  (sum of the 16 times, and the median of per-sentence ratios). The time excludes making the draft
  (that is the ``opus b4`` row's time; in the app the final pass has it already).

Output cleaning, the same for every Qwen variant: first non-empty line, a leading
``Translation:``/``English:`` label and enclosing quotes removed.

Before each timed block the 1-min load average must be ≤ ``--max-load`` (default 1.5); the bench
waits in 10 s steps (up to ``--wait`` s) and records the load at the start and end of each block. The
bench's own 2 threads keep the load near 2 while it runs, so the value at a block's start is what
is left of the block before it decaying plus whatever else runs.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import importlib.util
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import llm_fetch

SHARED = Path(os.environ.get("RELAY_SHARED", ROOT.parent / "shared"))
MANIFEST = SHARED / "data" / "zh" / "manifest.jsonl"
ASR_CACHE = ROOT / "bench" / "out" / "translators_asr.json"
SYSTEM = "Translate the user's Chinese into English. Output only the translation."
MAX_TOKENS = 128
THREADS = 2


# --- data -------------------------------------------------------------------------------------

def load_set() -> list[dict]:
    out = []
    for line in MANIFEST.read_text(encoding="utf-8").splitlines():
        if line.strip():
            e = json.loads(line)
            out.append({"id": e["id"], "zh": e["text"], "en": e["translations"]["en"],
                        "wav": MANIFEST.parent / e["audio"]})
    return out


def asr_transcripts(items: list[dict], pack: str = "whisper-base") -> dict[str, str]:
    """Whisper's transcript of each clip (cached): the app's ASR backend, second-pass call, beam 5."""
    cache = json.loads(ASR_CACHE.read_text(encoding="utf-8")) if ASR_CACHE.is_file() else {}
    keys = {it["id"]: f"{it['id']}|{pack}|{hashlib.sha256(it['wav'].read_bytes()).hexdigest()[:16]}"
            for it in items}
    if all(k in cache for k in keys.values()):
        return {i: cache[k] for i, k in keys.items()}
    import soundfile as sf

    from app.models.loader import load_asr, plan_pair

    plan = plan_pair("zh-en", no_tts=True, asr_override=pack)
    asr = load_asr(plan, threads=THREADS, beam_size=5)
    for it in items:
        if keys[it["id"]] in cache:
            continue
        audio, sr = sf.read(str(it["wav"]), dtype="float32")
        assert sr == 16000, sr
        words = asr.transcribe_utterance(audio, prompt="", beam_size=5)
        cache[keys[it["id"]]] = "".join(w.text for w in words).strip()
        print(f"  asr {it['id']}: {cache[keys[it['id']]]}", file=sys.stderr)
    ASR_CACHE.parent.mkdir(parents=True, exist_ok=True)
    ASR_CACHE.write_text(json.dumps(cache, ensure_ascii=False, indent=1), encoding="utf-8")
    return {i: cache[k] for i, k in keys.items()}


# --- llama.cpp --------------------------------------------------------------------------------

_RT = None


def _runtime():
    """(ffi, lib) of llama.cpp's CPU CFFI module, loaded by path (see llm_fetch.runtime)."""
    global _RT
    if _RT is None:
        mod, shim = llm_fetch.runtime()
        if shim is not None:
            ctypes.CDLL(str(shim), mode=ctypes.RTLD_GLOBAL)
        spec = importlib.util.spec_from_file_location("_llama_cpp_cpu", mod)
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        ffi, lib = m.ffi, m.lib

        @ffi.def_extern(name="llama_cpp_cffi_ggml_log_callback")
        def _quiet(level, text, user_data):  # llama.cpp's log lines: dropped
            pass

        lib.llama_log_set(lib.llama_cpp_cffi_ggml_log_callback, ffi.NULL)
        lib.llama_backend_init()
        _RT = (ffi, lib)
    return _RT


class LlamaMT:
    """Greedy zh→en with a chat model in llama.cpp, plain or verifying a draft (see the docstring)."""

    def __init__(self, gguf: Path, threads: int = THREADS, n_ctx: int = 1024, n_batch: int = 512,
                 max_tokens: int = MAX_TOKENS, system: str = SYSTEM):
        self.ffi, self.lib = ffi, lib = _runtime()
        mp = lib.llama_model_default_params()
        mp.n_gpu_layers = 0
        self.model = lib.llama_model_load_from_file(str(gguf).encode(), mp)
        if self.model == ffi.NULL:
            raise RuntimeError(f"cannot load {gguf}")
        cp = lib.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch = n_ctx, n_batch, n_batch
        cp.n_threads = cp.n_threads_batch = threads
        cp.no_perf = True
        self.ctx = lib.llama_init_from_model(self.model, cp)
        if self.ctx == ffi.NULL:
            raise RuntimeError("cannot create a llama.cpp context")
        self.vocab = lib.llama_model_get_vocab(self.model)
        self.n_vocab = lib.llama_vocab_n_tokens(self.vocab)
        self.n_batch, self.n_ctx = n_batch, n_ctx
        self.batch = lib.llama_batch_init(n_batch, 0, 1)
        self.max_tokens, self.system = max_tokens, system
        self.cached: list[int] = []  # tokens whose K/V sit in the cache at positions 0..n-1
        self.template = ffi.string(lib.llama_model_chat_template(self.model, ffi.NULL)).decode()

    def close(self) -> None:
        lib = self.lib
        lib.llama_batch_free(self.batch)
        lib.llama_free(self.ctx)
        lib.llama_model_free(self.model)

    def meta(self, key: str) -> str:
        buf = self.ffi.new("char[256]")
        n = self.lib.llama_model_meta_val_str(self.model, key.encode(), buf, 256)
        return self.ffi.string(buf).decode() if n >= 0 else ""

    # tokens and text
    def prompt(self, source: str) -> str:
        ffi = self.ffi
        roles = [ffi.new("char[]", b"system"), ffi.new("char[]", b"user")]
        texts = [ffi.new("char[]", self.system.encode()), ffi.new("char[]", source.encode())]
        msgs = ffi.new("struct llama_chat_message[2]")
        for i in range(2):
            msgs[i].role, msgs[i].content = roles[i], texts[i]
        size = 4096
        buf = ffi.new(f"char[{size}]")
        n = self.lib.llama_chat_apply_template(ffi.new("char[]", self.template.encode()), msgs, 2, True, buf, size)
        if n < 0 or n > size:
            raise RuntimeError("chat template failed")
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

    # the model
    def _decode(self, tokens: list[int], pos0: int, logits_from: int) -> list[tuple[int, float]]:
        """Run ``tokens`` at positions pos0…; (argmax, top-1 minus top-2 logit) after each token
        from index ``logits_from`` on (one batched pass per ``n_batch`` tokens)."""
        lib, b, ffi = self.lib, self.batch, self.ffi
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

    def _prompt(self, source: str) -> int:
        """Run the prompt (its uncached tail, one batch); the argmax after it."""
        toks = self.tokenize(self.prompt(source), True)
        k = self._reuse(toks)
        ((nxt, _),) = self._decode(toks[k:], k, len(toks) - k - 1)
        self.cached = list(toks)
        return nxt

    def _continue(self, out: list[int], nxt: int) -> list[int]:
        """Greedy from ``nxt`` (the argmax after ``self.cached``), appending to ``out``."""
        eog = self.lib.llama_vocab_is_eog
        while len(out) < self.max_tokens and not eog(self.vocab, nxt):
            out.append(nxt)
            ((nxt, _),) = self._decode([nxt], len(self.cached), 0)
            self.cached.append(out[-1])
        return out

    def greedy(self, source: str) -> list[int]:
        return self._continue([], self._prompt(source))

    def with_draft(self, source: str, draft: str, tau: float = 1.0) -> tuple[list[int], int, int, int]:
        """Greedy output verified against ``draft``: (tokens, draft tokens, accepted, argmax agreements).

        The prompt runs exactly as in ``greedy`` (same batch), so its argmax decides d[0] exactly.
        If d[0] matches, the whole draft runs in one batched pass; d[j+1] is accepted while the
        argmax after d[j] is d[j+1] with a top-1/top-2 logit margin of at least ``tau`` (a batched
        pass differs numerically from one-token decoding, see BENCHMARKS; ``tau`` = 0: argmax alone).
        The model's token after the accepted prefix comes from the same pass when its margin is
        ``tau`` or more; otherwise the last accepted token is run again alone for it."""
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


def numerics(llm: LlamaMT, items: list[dict], n_logits: int = 8) -> dict:
    """How far llama.cpp's greedy output depends on how the tokens were batched: greedy over the
    set twice with the same cache history (identical?), with a cold cache (the whole prompt in one
    batch instead of the system prefix cached), and the largest logit difference between a batched
    pass over the greedy output and one-token decoding of it (first ``n_logits`` sentences)."""
    def logits(i):
        return np.frombuffer(llm.ffi.buffer(llm.lib.llama_get_logits_ith(llm.ctx, i), llm.n_vocab * 4),
                             dtype=np.float32).copy()

    def clear():
        llm.lib.llama_kv_self_seq_rm(llm.ctx, 0, 0, -1)
        llm.cached = []

    llm.greedy(items[0]["zh"])
    a = [llm.greedy(it["zh"]) for it in items]
    llm.greedy(items[0]["zh"])
    b = [llm.greedy(it["zh"]) for it in items]
    cold = []
    for it in items:
        clear()
        cold.append(llm.greedy(it["zh"]))
    diffs, margins = [], []
    for it, g in zip(items[:n_logits], a):
        toks = llm.tokenize(llm.prompt(it["zh"]), True)
        clear()
        llm._decode(toks, 0, len(toks) - 1)
        one = []
        for j, t in enumerate(g):
            llm._decode([t], len(toks) + j, 0)
            one.append(logits(0))
        llm.lib.llama_kv_self_seq_rm(llm.ctx, 0, len(toks), -1)
        llm._decode(g, len(toks), 0)
        diffs.append(max(float(np.abs(x - logits(j)).max()) for j, x in enumerate(one)))
        margins.append(min(float(np.diff(np.partition(x, -2)[-2:])[0]) for x in one))
    clear()
    return {"repeat_identical": sum(x == y for x, y in zip(a, b)),
            "cold_cache_identical": sum(x == y for x, y in zip(a, cold)), "n": len(items),
            "max_logit_diff_batched_vs_one_token": round(max(diffs), 3),
            "per_sentence_max_diff": [round(x, 3) for x in diffs],
            "per_sentence_min_greedy_margin": [round(x, 3) for x in margins]}


def clean(text: str) -> str:
    """The first non-empty line, without a leading label or enclosing quotes."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    t = lines[0] if lines else ""
    t = re.sub(r"^(translation|english|english translation)\s*[:：]\s*", "", t, flags=re.IGNORECASE)
    pairs = {'"': '"', "“": "”", "'": "'", "「": "」"}
    if len(t) >= 2 and t[0] in pairs and t[-1] == pairs[t[0]]:
        t = t[1:-1].strip()
    return t


# --- the bench --------------------------------------------------------------------------------

def wait_load(max_load: float, wait_s: float, enabled: bool) -> float:
    la = os.getloadavg()[0]
    t0 = time.monotonic()
    while enabled and la > max_load and time.monotonic() - t0 < wait_s:
        time.sleep(10)
        la = os.getloadavg()[0]
    if enabled and la > max_load:
        print(f"  warning: load {la:.2f} > {max_load} after waiting {wait_s:.0f} s; running anyway",
              file=sys.stderr)
    return round(la, 2)


def scores(hyps: list[str], refs: list[str]) -> dict:
    import sacrebleu

    return {"chrf": round(sacrebleu.corpus_chrf(hyps, [refs]).score, 1),
            "bleu": round(sacrebleu.corpus_bleu(hyps, [refs]).score, 1),
            # the 16 joined into one segment, as BENCHMARKS' earlier zh_meeting figures were scored
            "chrf_joined": round(sacrebleu.corpus_chrf([" ".join(hyps)], [[" ".join(refs)]]).score, 1)}


def run_block(name: str, fn, sources: list[str], args) -> dict:
    load0 = wait_load(args.max_load, args.wait, not args.no_wait)
    fn(sources[0])  # warm-up, untimed
    outs, ms, extra = [], [], []
    for s in sources:
        t = time.perf_counter()
        r = fn(s)
        ms.append((time.perf_counter() - t) * 1000)
        if isinstance(r, tuple):
            outs.append(r[0])
            extra.append(r[1:])
        else:
            outs.append(r)
    load1 = round(os.getloadavg()[0], 2)
    print(f"  {name}: median {statistics.median(ms):.0f} ms (load {load0} → {load1})", file=sys.stderr)
    return {"outputs": outs, "ms": [round(x, 1) for x in ms], "extra": extra, "load_start": load0,
            "load_end": load1}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", metavar="OUT", help="write every output and figure here")
    ap.add_argument("--models", default="0.5b,1.5b", help="Qwen models (comma list of llm_fetch keys)")
    ap.add_argument("--inputs", default="ref,asr", help="ref, asr or both")
    ap.add_argument("--max-load", type=float, default=1.5)
    ap.add_argument("--wait", type=float, default=240, help="seconds to wait for the load at most")
    ap.add_argument("--no-wait", action="store_true")
    ap.add_argument("--taus", default="1,0", type=lambda v: [float(x) for x in v.split(",")],
                    help="margins (logits) for accepting a draft token, one +draft variant each")
    ap.add_argument("--assert-same", action="store_true",
                    help="stop when a +draft output differs from plain greedy (default: count them)")
    ap.add_argument("--numerics", action="store_true",
                    help="only the batching check of each model (see numerics()); prints JSON")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    items = load_set()
    if args.numerics:
        for key in [k.strip() for k in args.models.split(",") if k.strip()]:
            llm = LlamaMT(llm_fetch.fetch(llm_fetch.MODELS[key])[0])
            print(json.dumps({"model": key, **numerics(llm, items)}))
            llm.close()
        return
    refs = [it["en"] for it in items]
    inputs = {}
    if "ref" in args.inputs:
        inputs["ref"] = [it["zh"] for it in items]
    if "asr" in args.inputs:
        tr = asr_transcripts(items)
        inputs["asr"] = [tr[it["id"]] for it in items]

    from app.models.loader import load_mt, plan_pair

    mt = load_mt(plan_pair("zh-en", no_tts=True), threads=THREADS, beam_size=4)
    results: dict = {}
    rows = []
    for inp, sources in inputs.items():
        res = results[inp] = {}
        for beam in (1, 4):
            res[f"opus b{beam}"] = run_block(f"{inp} opus b{beam}", lambda s, b=beam: mt.translate(s, beam_size=b),
                                             sources, args)
    drafts = {inp: results[inp]["opus b4"]["outputs"] for inp in inputs}

    meta = {}
    for key in [k.strip() for k in args.models.split(",") if k.strip()]:
        path, _ = llm_fetch.fetch(llm_fetch.MODELS[key])
        llm = LlamaMT(path)
        meta[key] = {"gguf": path.name, "general.name": llm.meta("general.name"),
                     "prompt_example": llm.prompt(items[0]["zh"])}
        for inp, sources in inputs.items():
            res = results[inp]
            def greedy(s, llm=llm):
                toks = llm.greedy(s)
                return clean(llm.detok(toks)), toks

            g = run_block(f"{inp} qwen {key} greedy", greedy, sources, args)
            g_toks = [e[0] for e in g["extra"]]
            g["out_tokens"] = [len(t) for t in g_toks]
            g["extra"] = []
            res[f"qwen {key} greedy"] = g
            dr = dict(zip(sources, drafts[inp]))
            for tau in args.taus:
                def with_draft(s, tau=tau, llm=llm, dr=dr):
                    toks, nd, na, agree = llm.with_draft(s, dr[s], tau)
                    return clean(llm.detok(toks)), toks, nd, na, agree

                name = f"qwen {key} +draft τ={tau:g}"
                v = run_block(f"{inp} {name}", with_draft, sources, args)
                mism = [i for i, e in enumerate(v["extra"]) if e[0] != g_toks[i]]
                if mism and args.assert_same:
                    raise SystemExit(f"{name}: output differs from greedy for {inp} sentences {mism}")
                nd = sum(e[1] for e in v["extra"])
                v["draft_tokens"], v["accepted_tokens"] = nd, sum(e[2] for e in v["extra"])
                v["argmax_agreements"] = sum(e[3] for e in v["extra"])
                v["acceptance"] = round(v["accepted_tokens"] / nd, 3) if nd else None
                v["argmax_agreement_rate"] = round(v["argmax_agreements"] / nd, 3) if nd else None
                v["full_accepts"] = sum(1 for e in v["extra"] if e[1] and e[1] == e[2])
                v["identical_to_greedy"] = len(sources) - len(mism)
                v["mismatch_sentences"] = mism
                v["speedup_total"] = round(sum(g["ms"]) / sum(v["ms"]), 2)
                v["speedup_median_ratio"] = round(statistics.median(a / b for a, b in zip(g["ms"], v["ms"])), 2)
                v["extra"] = [list(e[1:]) for e in v["extra"]]  # (draft, accepted, agreeing) per sentence
                res[name] = v
        llm.close()

    for inp in inputs:
        for name, blk in results[inp].items():
            sc = scores(blk["outputs"], refs)
            blk.update(sc)
            blk["median_ms"] = round(statistics.median(blk["ms"]), 1)
            row = {"input": inp, "variant": name, **sc, "median_ms": blk["median_ms"],
                   "load": f"{blk['load_start']}→{blk['load_end']}"}
            if "acceptance" in blk:
                row.update(acceptance=blk["acceptance"], agree=blk["argmax_agreement_rate"], full=f"{blk['full_accepts']}/{len(refs)}",
                           speedup=f"{blk['speedup_total']}× (median {blk['speedup_median_ratio']}×)",
                           same=f"{blk['identical_to_greedy']}/{len(refs)}")
            rows.append(row)

    cols = [("input", "input"), ("variant", "variant"), ("chrf", "chrF"), ("bleu", "BLEU"),
            ("chrf_joined", "chrF joined"),
            ("median_ms", "median ms/sent"), ("acceptance", "draft accepted"), ("agree", "argmax agrees"),
            ("full", "full drafts"),
            ("speedup", "speed-up vs greedy"), ("same", "= greedy"), ("load", "load 1-min")]
    print("| " + " | ".join(h for _, h in cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r.get(k, "")) for k, _ in cols) + " |")

    if args.json:
        cpu = next((ln.split(":", 1)[1].strip() for ln in subprocess.run(
            ["lscpu"], capture_output=True, text=True, check=False).stdout.splitlines() if ln.startswith("Model name")), "")
        import ctranslate2
        import sacrebleu
        out = {"rows": rows, "results": results, "inputs": inputs, "references": refs, "models": meta,
               "conditions": {"cpu": cpu, "threads": THREADS, "python": platform.python_version(),
                              "ctranslate2": ctranslate2.__version__, "sacrebleu": sacrebleu.__version__,
                              "llama_cpp": llm_fetch.RUNTIME["llama_cpp"], "runtime_wheel": llm_fetch.RUNTIME["wheel"],
                              "system": SYSTEM, "max_tokens": MAX_TOKENS}}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, ensure_ascii=False, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
