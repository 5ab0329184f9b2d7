"""A three-hour file through `relay run` (issue 24, bad input): a clean run, no words made up out
of the non-speech, memory that does not grow with the file.

The file is built here, deterministically, into a temporary folder (345 MB for 3 h; deleted
afterwards): five-minute cycles of JFK's sentence (tests/data/jfk.wav, 11 s), then room noise at
-55 dBFS, a music bed, applause and digital silence. The same cycles make a short baseline file
in the same run, so memory is compared as a ratio on the same machine at the same hour:

    python bench/long_file.py [--hours 3] [--baseline-min 20] [--pair en-en] [--format wav|m4a]
                              [--out bench/out/long_file.json]

``--format m4a`` encodes both files as AAC in M4A (64 kbit/s, as a meeting platform records),
which relay reads through FFmpeg instead of libsndfile.

Per file it reports: exit code, wall time and real-time factor, peak RSS of the session process
(sampled from /proc every 0.5 s) and RSS over time, words committed inside the speech spans
(WER against JFK's text, one copy per cycle) and outside them (words per minute of non-speech).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path

import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "robust"))
from build import applause, music  # noqa: E402  (bench/robust/build.py)
from textmetrics import edit_distance, en_tokens  # noqa: E402

SR = 16000
CYCLE_S = 300.0
JFK = ("and so my fellow americans ask not what your country can do for you ask what you can do for "
       "your country")


def jfk() -> np.ndarray:
    with wave.open(str(ROOT / "tests" / "data" / "jfk.wav")) as w:
        x = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768
    return x


def cycle(rng, speech: np.ndarray) -> tuple[np.ndarray, tuple[float, float]]:
    """One five-minute cycle and its speech span (seconds from the cycle's start)."""
    pad = np.zeros(SR, np.float32)
    parts = [pad, speech, pad]
    span = (1.0, 1.0 + len(speech) / SR)
    used = sum(len(p) for p in parts)
    rest = int(CYCLE_S * SR) - used
    n_noise, n_music, n_applause = int(0.4 * rest), int(0.25 * rest), int(0.1 * rest)
    parts.append((10 ** (-55 / 20) * rng.standard_normal(n_noise)).astype(np.float32))
    m = music(n_music, rng)
    parts.append((0.3 * m / (np.abs(m).max() + 1e-9)).astype(np.float32))
    a = applause(n_applause, rng)
    parts.append((0.3 * a / (np.abs(a).max() + 1e-9)).astype(np.float32))
    parts.append(np.zeros(rest - n_noise - n_music - n_applause, np.float32))
    return np.concatenate(parts), span


def build(path: Path, seconds: float, seed: int = 11) -> list[tuple[float, float]]:
    rng = np.random.default_rng(seed)
    speech = jfk()
    spans = []
    with sf.SoundFile(str(path), "w", SR, 1, subtype="PCM_16") as f:
        t = 0.0
        while t < seconds - 1:
            x, (a, b) = cycle(rng, speech)
            x = x[: int((seconds - t) * SR)]
            f.write(x)
            if t + b <= seconds:
                spans.append((t + a, t + b))
            t += len(x) / SR
    return spans


def to_m4a(wav: Path, out: Path) -> None:
    """``wav`` encoded as AAC (mono, 16 kHz, 64 kbit/s) in M4A, block by block."""
    import av

    with av.open(str(out), "w") as c, sf.SoundFile(str(wav)) as f:
        st = c.add_stream("aac", rate=SR, layout="mono", bit_rate=64000)
        for block in f.blocks(1024 * 64, dtype="float32"):
            for i in range(0, len(block), 1024):
                fr = av.AudioFrame.from_ndarray(np.ascontiguousarray(block[None, i:i + 1024]), format="fltp",
                                                layout="mono")
                fr.sample_rate = SR
                for pkt in st.encode(fr):
                    c.mux(pkt)
        for pkt in st.encode(None):
            c.mux(pkt)


def run(path: Path, pair: str) -> dict:
    cmd = [sys.executable, "-m", "app", "run", "--input", str(path), "--pair", pair, "--fast", "--no-tts",
           "--json", "--profanity", "raw"]
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rss = []
    import threading

    out: dict = {}

    def reader():
        out["stdout"], out["stderr"] = p.communicate()

    th = threading.Thread(target=reader)
    th.start()
    while th.is_alive():
        try:
            for line in Path(f"/proc/{p.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss.append((round(time.monotonic() - t0, 1), int(line.split()[1]) / 1024))
        except (FileNotFoundError, ProcessLookupError):
            pass
        th.join(0.5)
    wall = time.monotonic() - t0
    summary = None
    for line in reversed(out["stdout"].splitlines()):
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("type") == "summary":
            summary = ev
            break
    return {"rc": p.returncode, "wall_s": round(wall, 1), "rss": rss, "summary": summary,
            "stderr_tail": out["stderr"][-600:]}


def score(res: dict, spans: list[tuple[float, float]], seconds: float) -> dict:
    s = res["summary"] or {}
    segs = s.get("segments", [])
    inside, outside = [], []
    for seg in segs:
        mid = (seg["src_start"] + seg["src_end"]) / 2
        (inside if any(a - 1.0 <= mid <= b + 1.0 for a, b in spans) else outside).append(seg["source"] or "")
    ref = en_tokens(JFK) * len(spans)
    hyp = en_tokens(" ".join(inside))
    per_span = []
    for a, b in spans:
        said = " ".join(seg["source"] or "" for seg in segs
                        if a - 1.0 <= (seg["src_start"] + seg["src_end"]) / 2 <= b + 1.0)
        per_span.append((round(a, 1), round(100 * edit_distance(en_tokens(JFK), en_tokens(said)) / len(en_tokens(JFK)), 1),
                         said))
    nonspeech_min = (seconds - sum(b - a for a, b in spans)) / 60
    peaks = [m for _, m in res["rss"]]
    n = len(peaks)
    return {
        "rc": res["rc"], "error": s.get("error"), "warnings": s.get("warnings"),
        "audio_s": round(seconds, 1), "wall_s": res["wall_s"], "rtf": round(res["wall_s"] / seconds, 4),
        "peak_rss_mb": round(max(peaks), 1) if peaks else None,
        "rss_mb_at_25_50_75_100pct": [round(peaks[min(n - 1, int(q * n))], 1) for q in (0.25, 0.5, 0.75, 0.999)]
        if peaks else None,
        "speech_spans": len(spans), "wer_in_speech": round(100 * edit_distance(ref, hyp) / max(1, len(ref)), 2),
        "words_outside_speech": len(" ".join(outside).split()),
        "words_per_min_outside_speech": round(len(" ".join(outside).split()) / max(nonspeech_min, 1e-9), 3),
        "outside_examples": outside[:5], "coverage": s.get("coverage"),
        "worst_spans": sorted(per_span, key=lambda x: -x[1])[:4],
        "final_stage": (s.get("stages") or {}).get("final"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=3.0)
    ap.add_argument("--baseline-min", type=float, default=20.0)
    ap.add_argument("--pair", default="en-en")
    ap.add_argument("--format", choices=("wav", "m4a"), default="wav")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "long_file.json"))
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="relay-long-") as d:
        for label, seconds in (("baseline", args.baseline_min * 60), ("long", args.hours * 3600)):
            path = Path(d) / f"{label}.wav"
            spans = build(path, seconds)
            if args.format == "m4a":
                wav, path = path, path.with_suffix(".m4a")
                to_m4a(wav, path)
                wav.unlink()
            print(f"{label}: {seconds / 3600:.2f} h, {path.stat().st_size / 1e6:.0f} MB, running…", flush=True)
            res = run(path, args.pair)
            results[label] = score(res, spans, seconds)
            path.unlink()
            print(json.dumps(results[label]), flush=True)
            if res["rc"] != 0:
                print(res["stderr_tail"], file=sys.stderr)
    b, lg = results["baseline"], results["long"]
    if b["peak_rss_mb"] and lg["peak_rss_mb"]:
        results["peak_rss_ratio_long_over_baseline"] = round(lg["peak_rss_mb"] / b["peak_rss_mb"], 3)
    results["conditions"] = {"pair": args.pair, "format": args.format, "options": "--fast --no-tts", "cpus": os.cpu_count(),
                             "date": time.strftime("%Y-%m-%d %H:%M")}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1))
    print(json.dumps({k: v for k, v in results.items() if k not in ("baseline", "long")}))
    return 0 if all(r["rc"] == 0 for r in (b, lg)) else 1


if __name__ == "__main__":
    sys.exit(main())
