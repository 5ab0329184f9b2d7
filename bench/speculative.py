"""Speculative MT decoding against plain decoding on the streaming re-translation workload.

    python bench/speculative.py                 # zh test set, greedy, source growing 2 characters a step
    python bench/speculative.py --step 1 --beam 4

Workload: each sentence of the zh test set (``shared/data/zh/manifest.jsonl``) is re-translated
every time its source grows by ``--step`` characters, as a segment's source grows while it is
recognised; the previous output is the draft of the next call. Prints decode time of both ways
(each call three ways back to back), their ratio, how many outputs are identical, and acceptance statistics.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHARED = Path(os.environ.get("RELAY_SHARED", ROOT.parent / "shared"))
MANIFEST = SHARED / "data" / "zh" / "manifest.jsonl"


def growing_sources(sentences: list[str], step: int) -> list[list[str]]:
    """Per sentence, its source after each growth step (the last one is the whole sentence)."""
    out = []
    for s in sentences:
        cuts = list(range(step, len(s), step)) + [len(s)]
        out.append([s[:k] for k in cuts])
    return out


def run_interleaved(mt, workload, beam: int, controller) -> dict:
    """Each call three ways back to back (order rotating), so load from other processes on a
    shared machine falls on all of them alike: plain, speculative always on, speculative auto."""
    t = {"plain": 0.0, "on": 0.0, "auto": 0.0}
    same = {"on": 0, "auto": 0}
    outcomes = []
    k = 0
    for sources in workload:
        draft_on = draft_auto = ""
        for src in sources:
            order = ["plain", "on", "auto"]
            order = order[k % 3:] + order[:k % 3]
            k += 1
            res = {}
            for way in order:
                t0 = time.perf_counter()
                if way == "plain":
                    res[way] = mt.translate(src, beam_size=beam)
                elif way == "on":
                    if draft_on:
                        res[way], oc = mt.translate_with_draft(src, draft_on, beam_size=beam)
                        outcomes.append(oc)
                    else:
                        res[way] = mt.translate(src, beam_size=beam)
                else:
                    if draft_auto and controller.should_draft():
                        res[way], oc = mt.translate_with_draft(src, draft_auto, beam_size=beam)
                        controller.record(oc)
                    else:
                        res[way] = mt.translate(src, beam_size=beam)
                t[way] += time.perf_counter() - t0
            draft_on, draft_auto = res["on"], res["auto"]
            same["on"] += res["on"] == res["plain"]
            same["auto"] += res["auto"] == res["plain"]
    return {"times": t, "identical": same, "outcomes": outcomes}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--step", type=int, default=2, help="characters the source grows per call")
    ap.add_argument("--beam", type=int, default=1)
    ap.add_argument("--accept-prob", type=float, default=0.55)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from app.models.loader import load_mt, plan_pair
    from app.pipeline.queues import MonotonicClock
    from app.pipeline.speculation import SpeculationConfig, SpeculationController

    sentences = [json.loads(line)["text"] for line in MANIFEST.read_text(encoding="utf-8").splitlines()]
    workload = growing_sources(sentences, args.step)
    mt = load_mt(plan_pair("zh-en", no_tts=True), threads=1, beam_size=args.beam)
    mt.accept_logprob = math.log(args.accept_prob)
    mt.translate("你好", beam_size=1)
    ctl = SpeculationController(SpeculationConfig("auto"), MonotonicClock())
    r = run_interleaved(mt, workload, args.beam, ctl)
    t, outcomes = r["times"], r["outcomes"]
    drafted = sum(o.drafted for o in outcomes)
    accepted = sum(o.accepted for o in outcomes)
    calls = sum(len(s) for s in workload)
    res = {
        "calls": calls, "sentences": len(sentences), "step_chars": args.step, "beam": args.beam,
        "accept_prob": args.accept_prob, "compute_type": mt.compute_type,
        "plain_s": round(t["plain"], 3), "speculative_on_s": round(t["on"], 3),
        "speculative_auto_s": round(t["auto"], 3),
        "speedup_on": round(t["plain"] / t["on"], 3), "speedup_auto": round(t["plain"] / t["auto"], 3),
        "identical_on": r["identical"]["on"], "identical_auto": r["identical"]["auto"],
        "drafts": len(outcomes), "drafted_tokens": drafted, "accepted_tokens": accepted,
        "acceptance": round(accepted / drafted, 3) if drafted else None,
        "full_accepts": sum(1 for o in outcomes if not o.rejected),
        "auto": {k: v for k, v in ctl.summary().items() if k != "events"},
    }
    print(json.dumps(res, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
