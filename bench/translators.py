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
import hashlib
import json
import os
import platform
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

from app.backends.llama_mt import LlamaTranslator, clean  # noqa: E402

SHARED = Path(os.environ.get("RELAY_SHARED", ROOT.parent / "shared"))
MANIFEST = SHARED / "data" / "zh" / "manifest.jsonl"
CORPUS = ROOT / "bench" / "corpus" / "out" / "manifest.jsonl"
ASR_CACHE = ROOT / "bench" / "out" / "translators_asr.json"
SYSTEM = "Translate the user's Chinese into English. Output only the translation."
MAX_TOKENS = 128
THREADS = 2


# --- data -------------------------------------------------------------------------------------

def load_set(name: str = "dev") -> list[dict]:
    """``dev``: the 16 clips of the shared zh dev set. ``corpus``: every distinct sentence of the
    Relay corpus (``bench/corpus``, 205: short meeting and long technical ones), its audio the
    sentence's span (0.2 s before, 0.25 s after, as the second pass cuts it) in the first clean set
    file that holds it; voices alternate over the sentences as the set files do."""
    if name == "dev":
        out = []
        for line in MANIFEST.read_text(encoding="utf-8").splitlines():
            if line.strip():
                e = json.loads(line)
                out.append({"id": e["id"], "zh": e["text"], "en": e["translations"]["en"],
                            "wav": MANIFEST.parent / e["audio"]})
        return out
    if not CORPUS.is_file():
        raise SystemExit(f"no corpus at {CORPUS}: build it with `python bench/corpus/build.py`")
    seen: dict[str, dict] = {}
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        e = json.loads(line)
        if e["noise"] != "clean" or e["kind"] not in ("short", "long"):
            continue
        for s in e["sentences"]:
            seen.setdefault(s["id"], {"id": s["id"], "zh": s["zh"], "en": s["en"], "kind": s["kind"],
                                      "voice": e["voice"], "wav": CORPUS.parent / e["wav"],
                                      "span": (max(0.0, s["start"] - 0.2), s["end"] + 0.25)})
    return [seen[k] for k in sorted(seen)]


def _clip(it: dict):
    import soundfile as sf

    info = sf.info(str(it["wav"]))
    assert info.samplerate == 16000, info.samplerate
    if "span" not in it:
        return sf.read(str(it["wav"]), dtype="float32")[0]
    a, b = (int(round(t * 16000)) for t in it["span"])
    return sf.read(str(it["wav"]), start=a, stop=min(b, info.frames), dtype="float32")[0]


def asr_transcripts(items: list[dict], pack: str = "whisper-base") -> dict[str, str]:
    """Whisper's transcript of each clip (cached): the app's ASR backend, second-pass call, beam 5."""
    cache = json.loads(ASR_CACHE.read_text(encoding="utf-8")) if ASR_CACHE.is_file() else {}
    digests: dict[Path, str] = {}

    def digest(p: Path) -> str:
        if p not in digests:
            digests[p] = hashlib.sha256(p.read_bytes()).hexdigest()[:16]
        return digests[p]

    keys = {it["id"]: f"{it['id']}|{pack}|{digest(it['wav'])}" + ("|%.3f-%.3f" % it["span"] if "span" in it else "")
            for it in items}
    if all(k in cache for k in keys.values()):
        return {i: cache[k] for i, k in keys.items()}
    from app.models.loader import load_asr, plan_pair

    plan = plan_pair("zh-en", no_tts=True, asr_override=pack)
    asr = load_asr(plan, threads=THREADS, beam_size=5)
    for it in items:
        if keys[it["id"]] in cache:
            continue
        audio = _clip(it)
        words = asr.transcribe_utterance(audio, prompt="", beam_size=5)
        cache[keys[it["id"]]] = "".join(w.text for w in words).strip()
        print(f"  asr {it['id']}: {cache[keys[it['id']]]}", file=sys.stderr)
    ASR_CACHE.parent.mkdir(parents=True, exist_ok=True)
    ASR_CACHE.write_text(json.dumps(cache, ensure_ascii=False, indent=1), encoding="utf-8")
    return {i: cache[k] for i, k in keys.items()}


# --- llama.cpp --------------------------------------------------------------------------------

class LlamaMT(LlamaTranslator):
    """The app's LLM translator (app.backends.llama_mt) on the bench's fetched model and runtime."""

    def __init__(self, gguf: Path, threads: int = THREADS, n_ctx: int = 1024, n_batch: int = 512,
                 max_tokens: int = MAX_TOKENS, system: str = SYSTEM):
        mod, _shim = llm_fetch.runtime()
        super().__init__(gguf, mod, name=gguf.stem, threads=threads, n_ctx=n_ctx, n_batch=n_batch,
                         max_tokens=max_tokens)
        self.system = system


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
    ap.add_argument("--set", default="dev", choices=("dev", "corpus"),
                    help="dev: the 16 shared dev clips; corpus: the 205 sentences of bench/corpus")
    ap.add_argument("--max-load", type=float, default=1.5)
    ap.add_argument("--wait", type=float, default=240, help="seconds to wait for the load at most")
    ap.add_argument("--no-wait", action="store_true")
    ap.add_argument("--taus", default="1,0", type=lambda v: [float(x) for x in v.split(",") if x.strip()],
                    help="margins (logits) for accepting a draft token, one +draft variant each")
    ap.add_argument("--assert-same", action="store_true",
                    help="stop when a +draft output differs from plain greedy (default: count them)")
    ap.add_argument("--numerics", action="store_true",
                    help="only the batching check of each model (see numerics()); prints JSON")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    items = load_set(args.set)
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
            kinds = sorted({it["kind"] for it in items if "kind" in it})
            if len(kinds) > 1:  # the corpus: short meeting and long technical sentences apart
                blk["by_kind"] = {}
                for k in kinds:
                    idx = [i for i, it in enumerate(items) if it.get("kind") == k]
                    sk = scores([blk["outputs"][i] for i in idx], [refs[i] for i in idx])
                    blk["by_kind"][k] = {**sk, "n": len(idx),
                                         "median_ms": round(statistics.median(blk["ms"][i] for i in idx), 1)}
                    rows.append({"input": inp, "variant": f"{name} [{k}, {len(idx)}]", **sk,
                                 "median_ms": blk["by_kind"][k]["median_ms"]})

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
        out = {"set": args.set, "rows": rows, "results": results, "inputs": inputs, "references": refs, "models": meta,
               "conditions": {"cpu": cpu, "threads": THREADS, "python": platform.python_version(),
                              "ctranslate2": ctranslate2.__version__, "sacrebleu": sacrebleu.__version__,
                              "llama_cpp": llm_fetch.RUNTIME["llama_cpp"], "runtime_wheel": llm_fetch.RUNTIME["wheel"],
                              "system": SYSTEM, "max_tokens": MAX_TOKENS}}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, ensure_ascii=False, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
