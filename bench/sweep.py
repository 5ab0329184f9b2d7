"""Compare `relay run` settings on one clip, runs interleaved (A B A B …) so that the machine's
load falls on all of them alike.

    python bench/sweep.py --runs 2 "" "--eager 4" "--asr-step 0.5 --commit-lookahead 0"
    python bench/sweep.py -- "--fast"                               # a first setting that starts with --
    python bench/sweep.py --tree /path/to/other/checkout "" ...   # also the same flags on another tree

Each setting is one string of extra flags ("" = defaults). Real-time feed, zh-en on
zh_meeting.wav by default. Prints, per setting, the medians over its runs of subtitle p50/p95,
dub p50/p95, ASR commit p50, TTS first audio p50, CER/WER of the committed source, chrF of the
translation and cpu_rtf, and every run's figures to --out as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from latency import ZH_WAV, run_relay, score, zh_references  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("settings", nargs="+", help='extra flags per setting, e.g. "" "--eager 4"')
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--tree", action="append", default=[],
                    help="another checkout to run every setting on as well (its code, this Python)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "sweep.json"))
    args = ap.parse_args()
    ref_src, ref_tgt = zh_references()
    trees = [ROOT] + [Path(t).resolve() for t in args.tree]
    combos = [(t, s) for t in trees for s in args.settings]
    results: dict[str, list[dict]] = {}
    for k in range(args.runs):
        for tree, setting in combos:
            label = (f"{tree.name}: " if len(trees) > 1 else "") + (setting or "(defaults)")
            s = run_relay(ZH_WAV, "zh-en", setting.split(), tree)
            lat = s["latency_ms"]
            r = {"subtitle_p50": lat["e2e_subtitle"]["p50"], "subtitle_p95": lat["e2e_subtitle"]["p95"],
                 "dub_p50": lat["e2e_dub"]["p50"], "dub_p95": lat["e2e_dub"]["p95"],
                 "commit_p50": lat.get("asr_commit", {}).get("p50"),
                 "tts_first_p50": lat["tts_first_audio"]["p50"], "rtf": s["rtf"], "cpu_rtf": s["cpu_rtf"],
                 "segments": len(s["segments"]), **score(s, ref_src, ref_tgt, "zh")}
            results.setdefault(label, []).append(r)
            print(f"run {k + 1} {label}: {r}", file=sys.stderr, flush=True)
    keys = ["subtitle_p50", "subtitle_p95", "dub_p50", "dub_p95", "commit_p50", "tts_first_p50",
            "src_error_pct", "chrF", "rtf", "cpu_rtf", "segments"]
    print("| setting | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for label, rs in results.items():
        med = [statistics.median(r[k] for r in rs) if all(r[k] is not None for r in rs) else None for k in keys]
        print(f"| {label} | " + " | ".join("" if v is None else f"{v:g}" for v in med) + " |")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M"), "clip": str(ZH_WAV),
                               "runs": results}, indent=1))


if __name__ == "__main__":
    main()
