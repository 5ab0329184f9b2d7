"""The cost of real devices: the same clip through PulseAudio (live) and through `--input` (file,
real-time pace), in one go.

    python bench/live_audio.py [--clip tests/data/zh_demo_20s.wav] [--runs 2]

Live: the clip is played into the null sink `meeting` with `paplay --latency-msec=20`; Relay
captures `meeting.monitor` and plays the dub on `dub`. Two measurements per live run:

* Relay's own figures, where a word's arrival is the capture (ADC) time of its last sample and a
  dub chunk's start is the DAC time its first sample left the output device;
* an external clock: a word "left paplay" at (paplay start + the word's time in the clip), the
  subtitle shows when its event reaches this script's stdout reader. That adds the server path
  paplay → sink → monitor and process start-up jitter of paplay, which Relay cannot see.

Prints p50/p95/p99 per mode and the live − file difference at p50 (target ≤ 100 ms).
Needs the sound server (scripts/pulse.sh starts it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def pct(values) -> dict:
    if not values:
        return {"p50": None, "p95": None, "p99": None, "n": 0}
    a = np.asarray(values) * 1000
    return {k: round(float(np.percentile(a, q)), 1) for k, q in (("p50", 50), ("p95", 95), ("p99", 99))} | {"n": len(a)}


def file_run(clip: Path, pair: str) -> dict:
    p = subprocess.run([sys.executable, "-m", "app", "run", "--input", str(clip), "--pair", pair, "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=900)
    if p.returncode != 0:
        raise SystemExit(f"file run failed: {p.stderr[-400:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def live_run(clip: Path, pair: str) -> dict:
    proc = subprocess.Popen([sys.executable, "-m", "app", "run", "--source", "meeting.monitor", "--dub-device",
                             "dub", "--pair", pair, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)
    while True:
        line = proc.stderr.readline()
        if not line:
            raise SystemExit("relay exited before listening")
        if "listening on" in line:
            break
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    seen: list[tuple[float, dict]] = []

    def reader():
        for line in proc.stdout:
            t = time.monotonic()
            try:
                seen.append((t, json.loads(line)))
            except ValueError:
                pass

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    time.sleep(1.5)
    t_play = time.monotonic()
    subprocess.run(["paplay", "--latency-msec=20", "--device=meeting", str(clip)], check=True)
    time.sleep(4.0)
    proc.send_signal(2)
    proc.wait(120)
    th.join(10)
    summary = next(e for _, e in reversed(seen) if e.get("type") == "summary")
    zero = summary["clock_zero_monotonic"]
    # where the clip starts on the session's timeline: paplay's start, on the pipeline clock,
    # minus when the session's first audio was captured (timeline 0)
    clip_offset = (t_play - zero) - summary["first_audio_at"]
    ext_sub = []
    for t, e in seen:
        if e.get("type") == "translation":
            word_left = t_play + (e["src_end"] - clip_offset)
            ext_sub.append(t - word_left)
    summary["external_subtitle"] = pct([x for x in ext_sub if x > -1])
    return summary


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clip", default=str(ROOT / "tests" / "data" / "zh_demo_20s.wav"))
    ap.add_argument("--pair", default="zh-en")
    ap.add_argument("--runs", type=int, default=2)
    a = ap.parse_args()
    subprocess.run(["bash", str(ROOT / "scripts" / "pulse.sh")], check=True, capture_output=True)
    clip = Path(a.clip)
    rows = {"file": [], "live": []}
    for _ in range(a.runs):  # alternate, so both modes see the same machine load
        rows["file"].append(file_run(clip, a.pair))
        rows["live"].append(live_run(clip, a.pair))

    def med(mode, key, q="p50"):
        vals = [r["latency_ms"][key][q] for r in rows[mode] if r["latency_ms"][key]["n"]]
        return round(float(np.median(vals)), 1) if vals else None

    print(f"conditions: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, pair {a.pair}, "
          f"clip {clip.name}, {a.runs} run(s) per mode, medians over runs")
    for key in ("e2e_subtitle", "e2e_dub", "asr_first_token", "tts_first_audio"):
        f = [med("file", key, q) for q in ("p50", "p95", "p99")]
        l_ = [med("live", key, q) for q in ("p50", "p95", "p99")]
        diff = None if None in (f[0], l_[0]) else round(l_[0] - f[0], 1)
        print(f"  {key:<16} file p50/p95/p99 {f}  live {l_}  live-file p50 {diff} ms")
    ext = [r["external_subtitle"]["p50"] for r in rows["live"] if r["external_subtitle"]["n"]]
    dev = [r["latency_ms"].get("dub_device_delay", {}).get("p50") for r in rows["live"]]
    print(f"  external subtitle latency (from paplay) p50 {np.median(ext) if ext else None} ms; "
          f"dub queue→DAC p50 {dev} ms")
    print(f"  capture/playback: {[r['devices'] for r in rows['live']]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
