"""Issue 24's `xx-en` targets on the zh dev files: Whisper's own translation (`--pair xx-en`)
repeats no sentence more than once and its output length stays within ±25 % of the reference.

    python bench/xx_en.py [--runs 2] [--out bench/out/xx_en.json]

Runs `relay run --input F --pair xx-en --fast --no-tts --json` on the 16 clips of
../shared/data/zh (each its own session, as a user would run them) and on long/zh_meeting.wav
(one 76 s session), and scores the final text of each session: English words out against the
reference's, the most copies of any one sentence (case and punctuation ignored), words glued
together ("andthe", "needto", ...), "%%", and chrF (bench/textmetrics.py) against the reference
translations. Medians over the runs; every run is kept in the JSON.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from textmetrics import chrf  # noqa: E402

ZH = ROOT.parent / "shared" / "data" / "zh"
GLUED = ("andthe", "timesthe", "needto", "ofthe", "tothe", "inthe", "thetotal", "thethird", "let'stake")


def norm(s: str) -> str:
    return re.sub(r"[^a-z0-9 ]", "", s.lower()).strip()


def session(path: Path) -> tuple[str, dict]:
    cmd = [sys.executable, "-m", "app", "run", "--input", str(path), "--pair", "xx-en", "--fast", "--no-tts",
           "--json", "--profanity", "raw"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800,
                       env=dict(os.environ, HF_HUB_OFFLINE="1"))
    if p.returncode != 0:
        raise SystemExit(f"{path.name}: relay run exited {p.returncode}: {p.stderr[-400:]}")
    s = json.loads(p.stdout.strip().splitlines()[-1])
    return " ".join(" ".join((x["target"] or "") for x in s["segments"]).split()), s


def score(hyp: str, refs: list[str]) -> dict:
    sentences = [norm(x) for x in re.split(r"(?<=[.!?])\s+", hyp) if norm(x)]
    counts = collections.Counter(sentences)
    ref_words = sum(len(r.split()) for r in refs)
    low = hyp.lower().replace("-", "")
    return {
        "words": len(hyp.split()), "ref_words": ref_words,
        "length_ratio": round(len(hyp.split()) / ref_words, 3),
        "max_copies": max(counts.values()) if counts else 0,
        "repeated": [s for s, c in counts.items() if c > 1],
        "glued": [g for g in GLUED if g in low] + (["%%"] if "%%" in hyp else []),
        "chrf": round(chrf([hyp], [" ".join(refs)]), 2),
    }


def one_run() -> dict:
    manifest = [json.loads(line) for line in (ZH / "manifest.jsonl").read_text().splitlines() if line.strip()]
    clips = []
    t0 = time.monotonic()
    for m in manifest:
        hyp, _ = session(ZH / m["audio"])
        clips.append({"id": m["id"], "hyp": hyp, **score(hyp, [m["translations"]["en"]])})
    all_hyp = " ".join(c["hyp"] for c in clips)
    clips_total = score(all_hyp, [m["translations"]["en"] for m in manifest])
    clips_total["max_copies_in_a_clip"] = max(c["max_copies"] for c in clips)
    meta = json.loads((ZH / "long" / "zh_meeting.json").read_text())
    hyp, s = session(ZH / "long" / "zh_meeting.wav")
    meeting = {"hyp": hyp, **score(hyp, [x["en"] for x in meta["segments"]]), "rtf": s.get("rtf")}
    return {"clips": clips, "clips_total": clips_total, "meeting": meeting,
            "wall_s": round(time.monotonic() - t0, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "xx_en.json"))
    args = ap.parse_args()
    runs = []
    for i in range(args.runs):
        r = one_run()
        runs.append(r)
        print(json.dumps({"run": i, "clips": {k: v for k, v in r["clips_total"].items() if k != "repeated"},
                          "meeting": {k: v for k, v in r["meeting"].items() if k != "hyp"}}), flush=True)
    med = {}
    for part in ("clips_total", "meeting"):
        med[part] = {k: statistics.median(r[part][k] for r in runs)
                     for k in ("words", "ref_words", "length_ratio", "max_copies", "chrf")}
        med[part]["worst_max_copies"] = max(r[part]["max_copies"] for r in runs)
        med[part]["length_ratio_range"] = [min(r[part]["length_ratio"] for r in runs),
                                           max(r[part]["length_ratio"] for r in runs)]
        med[part]["glued"] = sorted({g for r in runs for g in r[part]["glued"]})
    targets = {
        "no sentence repeated more than once": all(m["worst_max_copies"] <= 1 for m in med.values()),
        "length within ±25 %": all(0.75 <= lo and hi <= 1.25 for m in med.values()
                                   for lo, hi in [m["length_ratio_range"]]),
    }
    result = {"medians": med, "targets_met": targets, "runs": runs,
              "conditions": {"options": "--pair xx-en --fast --no-tts", "cpus": os.cpu_count(),
                             "date": time.strftime("%Y-%m-%d %H:%M")}}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1, ensure_ascii=False))
    print(json.dumps({"medians": med, "targets_met": targets}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
