"""Subtitle latency under CPU load, with the degradation policy on and off.

    python bench/policy_load.py                     # zh_meeting.wav, 1 competing busy process
    python bench/policy_load.py --hogs 2 --input tests/data/zh_demo_20s.wav

Each row is one `relay run --json --realtime --no-tts` process while ``--hogs`` processes spin on
the CPU (a competing workload on the same cores). Prints subtitle p50/p95/p99, the policy's
transitions and the time spent at each degradation level.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from latency import run_relay  # noqa: E402

SHARED = Path(os.environ.get("RELAY_SHARED", ROOT.parent / "shared"))
DEFAULT_WAV = SHARED / "data" / "zh" / "long" / "zh_meeting.wav"


def _spin(stop) -> None:
    x = 0
    while not stop.is_set():
        for i in range(100_000):
            x += i * i


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--input", default=str(DEFAULT_WAV))
    ap.add_argument("--hogs", type=int, default=1, help="competing busy processes")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    rows = []
    for _ in range(args.runs):
        for policy in ("off", "on"):
            stop = mp.Event()
            hogs = [mp.Process(target=_spin, args=(stop,), daemon=True) for _ in range(args.hogs)]
            for h in hogs:
                h.start()
            try:
                t = time.monotonic()
                s = run_relay(Path(args.input), "zh-en", ["--no-tts", "--beam", str(args.beam), "--policy", policy])
            finally:
                stop.set()
                for h in hogs:
                    h.join()
            lat = s["latency_ms"]["e2e_subtitle"]
            dg = s["degradation"]
            rows.append({"policy": policy, "hogs": args.hogs, "beam": args.beam,
                         "subtitle_p50": lat["p50"], "p95": lat["p95"], "p99": lat["p99"], "n": lat["n"],
                         "segments": len(s["segments"]),
                         "translated": sum(1 for x in s["segments"] if x["target"] is not None),
                         "seconds_at_level": dg["seconds_at_level"],
                         "transitions": [(t_["at"], t_["rule"], t_["to"], t_["reason"], t_["effects"])
                                         for t_ in dg["transitions"]],
                         "speculation": {k: s["speculation"].get(k) for k in
                                         ("drafts", "accepted_tokens", "rejected_tokens", "fallbacks")},
                         "wall_s": round(time.monotonic() - t, 1)})
            print(json.dumps(rows[-1], ensure_ascii=False), flush=True)
    on = [r["p99"] for r in rows if r["policy"] == "on" and r["p99"]]
    off = [r["p99"] for r in rows if r["policy"] == "off" and r["p99"]]
    if on and off:
        print(f"subtitle p99 policy off / on: {sum(off) / len(off):.0f} / {sum(on) / len(on):.0f} ms")


if __name__ == "__main__":
    main()
