"""Speculative MT decoding against plain decoding on the streaming re-translation workload.

    python bench/speculative.py                 # zh test set, greedy, source growing 2 characters a step
    python bench/speculative.py --step 1 --beam 4

Workload: each sentence of the zh test set (``shared/data/zh/manifest.jsonl``) is re-translated
every time its source grows by ``--step`` characters, as a segment's source grows while it is
recognised; the previous output is the draft of the next call. Prints decode time of both ways
(median of ``--repeats``), their ratio, how many outputs are identical, and acceptance statistics.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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


def run_plain(mt, workload, beam: int) -> tuple[float, list[str]]:
    outs = []
    t = time.perf_counter()
    for sources in workload:
        for src in sources:
            outs.append(mt.translate(src, beam_size=beam))
    return time.perf_counter() - t, outs


def run_speculative(mt, workload, beam: int, controller=None) -> tuple[float, list[str], list]:
    """``controller``: a SpeculationController deciding per call (auto mode's rollback)."""
    outs, outcomes = [], []
    t = time.perf_counter()
    for sources in workload:
        draft = ""
        for src in sources:
            if draft and (controller is None or controller.should_draft()):
                out, oc = mt.translate_with_draft(src, draft, beam_size=beam)
                outcomes.append(oc)
                if controller is not None:
                    controller.record(oc)
            else:
                out = mt.translate(src, beam_size=beam)
            outs.append(out)
            draft = out
    return time.perf_counter() - t, outs, outcomes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--step", type=int, default=2, help="characters the source grows per call")
    ap.add_argument("--beam", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--accept-prob", type=float, default=0.55)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from app.models.loader import load_mt, plan_pair
    from app.pipeline.queues import MonotonicClock
    from app.pipeline.speculation import SpeculationConfig, SpeculationController

    sentences = [json.loads(line)["text"] for line in MANIFEST.read_text(encoding="utf-8").splitlines()]
    workload = growing_sources(sentences, args.step)
    mt = load_mt(plan_pair("zh-en", no_tts=True), threads=1, beam_size=args.beam)
    mt.accept_logprob = __import__("math").log(args.accept_prob)
    mt.translate("你好", beam_size=1)
    plain_t, spec_t, auto_t = [], [], []
    for _ in range(args.repeats):
        t, ref = run_plain(mt, workload, args.beam)
        plain_t.append(t)
        t, outs, outcomes = run_speculative(mt, workload, args.beam)
        spec_t.append(t)
        ctl = SpeculationController(SpeculationConfig("auto"), MonotonicClock())
        t, auto_outs, _ = run_speculative(mt, workload, args.beam, ctl)
        auto_t.append(t)
    calls = sum(len(s) for s in workload)
    drafted = sum(o.drafted for o in outcomes)
    accepted = sum(o.accepted for o in outcomes)
    full = sum(1 for o in outcomes if not o.rejected)
    p, s, a = (statistics.median(x) for x in (plain_t, spec_t, auto_t))
    res = {
        "calls": calls, "sentences": len(sentences), "step_chars": args.step, "beam": args.beam,
        "accept_prob": args.accept_prob, "compute_type": mt.compute_type,
        "plain_s": round(p, 3), "speculative_on_s": round(s, 3), "speculative_auto_s": round(a, 3),
        "speedup_on": round(p / s, 3), "speedup_auto": round(p / a, 3),
        "identical_on": sum(x == y for x, y in zip(ref, outs)),
        "identical_auto": sum(x == y for x, y in zip(ref, auto_outs)),
        "drafts": len(outcomes), "drafted_tokens": drafted, "accepted_tokens": accepted,
        "acceptance": round(accepted / drafted, 3) if drafted else None,
        "full_accepts": full, "auto": ctl.summary() | {"events": len(ctl.events)},
    }
    print(json.dumps(res, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
