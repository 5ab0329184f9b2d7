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

The file run after each live run gets the same input: the clip behind as much silence as the
live session captured before paplay started (``--lead matched``, the default). Without it the
file run starts speech at 0 s every time, so its recognition steps always fall at the same
places in the speech (identical segments run after run), while each live run falls elsewhere:
different segments and a differently loaded dub timeline, which is chance, not device cost.
``--lead none`` runs the clip as it is.

Prints p50/p95/p99 per mode and the live − file difference at p50 (target ≤ 100 ms).
Needs the sound server (scripts/pulse.sh starts it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
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


def _timeline(report: Path) -> dict:
    """Every single latency of a run (ms), per kind, from its ``--report`` timeline."""
    from app.obs.report import load

    data = load(str(report))
    report.unlink()
    out: dict[str, list[float]] = {}
    for _, kind, v in data["timeline"]:
        out.setdefault(kind, []).append(v)
    return out


def _report_path() -> Path:
    fd, name = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    return Path(name)


def padded(clip: Path, lead_s: float) -> Path:
    """A temporary 16 kHz WAV of ``lead_s`` of silence followed by the clip."""
    import wave

    from app.audio.files import load_audio

    audio = np.concatenate([np.zeros(int(round(lead_s * 16000)), np.float32), load_audio(str(clip))])
    fd, name = tempfile.mkstemp(suffix=".wav")
    os.close(fd)
    with wave.open(name, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes((np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes())
    return Path(name)


def file_run(clip: Path, pair: str, extra: list[str], lead_s: float = 0.0) -> dict:
    report = _report_path()
    src = padded(clip, lead_s) if lead_s > 0 else clip
    try:
        p = subprocess.run([sys.executable, "-m", "app", "run", "--input", str(src), "--pair", pair, "--json",
                            "--report", str(report), *extra], capture_output=True, text=True, cwd=ROOT,
                           timeout=900)
    finally:
        if src != clip:
            src.unlink()
    if p.returncode != 0:
        raise SystemExit(f"file run failed: {p.stderr[-400:]}")
    events = [json.loads(x) for x in p.stdout.strip().splitlines() if x.startswith("{")]
    summary = events[-1]
    summary["events"] = [e for e in events if e.get("type") in ("translation", "dub_chunk")]
    summary["each_ms"] = _timeline(report)
    return summary


def live_run(clip: Path, pair: str, extra: list[str]) -> dict:
    report = _report_path()
    proc = subprocess.Popen([sys.executable, "-m", "app", "run", "--source", "meeting.monitor", "--dub-device",
                             "dub", "--pair", pair, "--json", "--report", str(report), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            # the session is stopped with SIGINT (Ctrl-C); a bench started as a
                            # background job has it ignored, and children inherit that
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
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
    summary["clip_offset_s"] = clip_offset
    summary["external_subtitle"] = pct([x for x in ext_sub if x > -1])
    summary["events"] = [e for _, e in seen if e.get("type") in ("translation", "dub_chunk")]
    summary["each_ms"] = _timeline(report)
    return summary


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clip", default=str(ROOT / "tests" / "data" / "zh_demo_20s.wav"))
    ap.add_argument("--pair", default="zh-en")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--extra", default="", help="extra relay run flags for both modes")
    ap.add_argument("--lead", choices=("matched", "none"), default="matched",
                    help="file runs: the clip behind the silence the live run before captured (default), or as is")
    ap.add_argument("--dump", help="write every run's summary and dub/translation events to this JSON file")
    a = ap.parse_args()
    subprocess.run(["bash", str(ROOT / "scripts" / "pulse.sh")], check=True, capture_output=True)
    clip = Path(a.clip)
    rows = {"file": [], "live": []}
    for _ in range(a.runs):  # alternate, so both modes see the same machine load
        live = live_run(clip, a.pair, a.extra.split())
        lead = max(0.0, live["clip_offset_s"]) if a.lead == "matched" else 0.0
        rows["live"].append(live)
        rows["file"].append(file_run(clip, a.pair, a.extra.split(), lead))
        rows["file"][-1]["lead_s"] = lead

    def med(mode, key, q="p50"):
        vals = [r["latency_ms"][key][q] for r in rows[mode] if r["latency_ms"][key]["n"]]
        return round(float(np.median(vals)), 1) if vals else None

    print(f"conditions: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, pair {a.pair}, "
          f"clip {clip.name}, {a.runs} run(s) per mode, medians over runs; file runs' lead silence "
          f"{[round(r['lead_s'], 2) for r in rows['file']]} s")
    for key in ("e2e_subtitle", "e2e_dub", "asr_first_token", "asr_commit", "mt_compute", "tts_first_audio"):
        f = [med("file", key, q) for q in ("p50", "p95", "p99")]
        l_ = [med("live", key, q) for q in ("p50", "p95", "p99")]
        diff = None if None in (f[0], l_[0]) else round(l_[0] - f[0], 1)
        print(f"  {key:<16} file p50/p95/p99 {f}  live {l_}  live-file p50 {diff} ms")
    # the dub p50 of one 20 s run rests on ~14 chunks, and whether a chunk waits behind the one
    # before it moves it by up to a second: every run's single latencies, pooled, steady it
    for key in ("e2e_subtitle", "e2e_dub"):
        f, l_ = ([x for r in rows[m] for x in r["each_ms"].get(key, [])] for m in ("file", "live"))
        if f and l_:
            print(f"  {key:<16} pooled: file p50 {np.median(f):.1f} (n={len(f)})  live p50 {np.median(l_):.1f} "
                  f"(n={len(l_)})  live-file p50 {np.median(l_) - np.median(f):.1f} ms")
    # where the dub's time goes, from the events: synthesis and waiting behind the previous chunk
    # on the dub timeline (the output device's share is the summary's dub_device_delay, below)
    for m in ("file", "live"):
        tts, wait = [], []
        for r in rows[m]:
            tr = {e["seq"]: e for e in r["events"] if e["type"] == "translation"}
            first: dict = {}
            for e in r["events"]:
                if e["type"] == "dub_chunk" and not e["skipped"]:
                    first.setdefault(e["seq"], e)
            for seq, c in first.items():
                if seq in tr:
                    tts.append(c["ready_at"] - tr[seq]["at"])
                    wait.append(c["start_at"] - c["ready_at"])
        if tts:
            print(f"  dub {m:<4} synthesis p50 {np.median(tts) * 1000:.0f} ms; wait behind the previous chunk: "
                  f"{sum(w > 0.01 for w in wait)}/{len(wait)} chunks, mean {np.mean(wait) * 1000:.0f} ms")
    ext = [r["external_subtitle"]["p50"] for r in rows["live"] if r["external_subtitle"]["n"]]
    dev = [r["latency_ms"].get("dub_device_delay", {}).get("p50") for r in rows["live"]]
    print(f"  external subtitle latency (from paplay) p50 {np.median(ext) if ext else None} ms; "
          f"dub queue→DAC p50 {dev} ms")
    cap = [r["devices"]["capture"].get("delay_ms", {}).get("p50") for r in rows["live"]]
    print(f"  capture path (ADC -> pipeline) p50 {cap} ms")
    print(f"  capture/playback: {[r['devices'] for r in rows['live']]}")
    if a.dump:
        Path(a.dump).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
