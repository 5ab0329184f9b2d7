"""Run the robustness set (bench/robust/build.py) through relay and score it against the same
model's offline decode of the same file.

    python bench/robust/run.py [--set bench/robust/out] [--realtime] [--only VARIANT ...]
                               [--pair en-en] [--asr-model PACK] [--no-offline] [--shifts 0,0.1,0.2]
                               [--setting LABEL=FLAGS ...] [--out FILE.json]

Per variant: WER of the final text (and of the first pass), WER of faster-whisper's offline decode
(same pack, whole file, beam 5, VAD) and the difference, the summary's ``coverage`` and
``lost_speech_s``, and clauses lost or said twice, found by aligning the committed text to the
reference sentence by sentence (``sentence_checks``). Exit status 1 when a target is missed:
WER within 3 points of offline, coverage ≥ 95 %, no sentence lost or duplicated.

``--shifts``: each variant is also run (by relay and offline alike) with this much digital silence
before it, and judged on the medians over the shifts. A ``--fast`` run gives the same words each
time (checked: two runs, one text), so running it again measures nothing; where the audio starts
relative to the voice detector's 32 ms frames and the recogniser's windows is what moves a tiny
model's words at 0 dB SNR (JFK's sentence under applause, decoded alone by faster-whisper from
0.0 s: "and not what your country", from 0.3 s: "and not, like your country"). Coverage is the
lowest over the shifts, and a sentence lost or repeated in any shift counts.

``--setting LABEL=FLAGS`` (repeatable): each variant is run once per setting, the settings in turn
(interleaved, so a machine that slows down mid-run weighs on all of them alike), and each is judged
on its own. Every row keeps the final text (``text``), so a lost sentence can be read afterwards.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from textmetrics import edit_distance, en_tokens  # noqa: E402

WER_MARGIN = 3.0
COVERAGE_MIN = 0.95


def wer(ref: str, hyp: str) -> float:
    r = en_tokens(ref)
    return 100.0 * edit_distance(r, en_tokens(hyp)) / max(1, len(r))


def align(ref: list[str], hyp: list[str]) -> list[int | None]:
    """For each reference token, the index of the hypothesis token it is aligned to (a match or a
    substitution), or None (deleted): Levenshtein alignment with backtrace."""
    n, m = len(ref), len(hyp)
    d = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        d[i][0] = i
    for j in range(m + 1):
        d[0][j] = j
    for i in range(1, n + 1):
        ri, row, prev = ref[i - 1], d[i], d[i - 1]
        for j in range(1, m + 1):
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (ri != hyp[j - 1]))
    out: list[int | None] = [None] * n
    i, j = n, m
    while i > 0 and j > 0:
        if d[i][j] == d[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1]):
            out[i - 1] = j - 1 if ref[i - 1] == hyp[j - 1] else None
            i, j = i - 1, j - 1
        elif d[i][j] == d[i - 1][j] + 1:
            i -= 1
        else:
            j -= 1
    return out


def ngrams(tokens: list[str], n: int = 3) -> list[tuple[str, ...]]:
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def sentence_checks(sentences: list[str], hyp: str) -> dict:
    """Lost: a reference sentence less than half of whose words the aligned output matches.
    Duplicated: a reference sentence whose 3-word runs the output holds, on the median, more times
    than the reference does (a clause committed twice, an echo after a window trim)."""
    hyp_t = en_tokens(hyp)
    refs = [en_tokens(s) for s in sentences]
    flat = [t for r in refs for t in r]
    a = align(flat, hyp_t)
    lost, dup = [], []
    hyp_counts: dict = {}
    for g in ngrams(hyp_t):
        hyp_counts[g] = hyp_counts.get(g, 0) + 1
    ref_counts: dict = {}
    for g in ngrams(flat):
        ref_counts[g] = ref_counts.get(g, 0) + 1
    k = 0
    for i, r in enumerate(refs):
        matched = sum(1 for x in a[k:k + len(r)] if x is not None)
        k += len(r)
        if len(r) and matched < 0.5 * len(r):
            lost.append(i)
        grams = ngrams(r)
        if grams and statistics.median(hyp_counts.get(g, 0) - ref_counts.get(g, 0) for g in grams) >= 1:
            dup.append(i)
    return {"sentences": len(refs), "lost": lost, "duplicated": dup}


def run_relay(wav: Path, pair: str, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "app", "run", "--input", str(wav), "--pair", pair, "--json", "--no-tts",
           "--profanity", "raw", *extra]  # scored against references: the words as said
    r = subprocess.run(cmd, capture_output=True, text=True, env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"})
    if r.returncode != 0:
        raise RuntimeError(f"relay run failed on {wav.name}: {r.stderr.strip().splitlines()[-1:]}")
    summary = None
    for line in r.stdout.splitlines():
        if line.startswith("{") and '"latency_ms"' in line:
            summary = json.loads(line)
    if summary is None:
        raise RuntimeError(f"no summary from relay on {wav.name}")
    return summary


def shifted(wav: Path, shift: float, tmp: Path) -> Path:
    """``wav`` with ``shift`` seconds of digital silence before it (itself for 0)."""
    if shift <= 0:
        return wav
    import numpy as np
    import soundfile as sf

    x, sr = sf.read(str(wav), dtype="float32")
    out = tmp / f"{wav.stem}_shift{int(round(shift * 1000))}ms.wav"
    sf.write(str(out), np.concatenate([np.zeros(int(round(shift * sr)), np.float32), x]), sr, subtype="PCM_16")
    return out


def run_variant(wav: Path, name: str, shift: float, pair: str, extra: list[str], pack, sentences: list[str],
                ref: str, setting: str = "", offline: dict | None = None) -> dict:
    t = time.monotonic()
    s = run_relay(wav, pair, extra)
    hyp = " ".join(seg["source"] for seg in s["segments"])
    first = " ".join(p.get("source", "") for p in s.get("first_pass") or [])
    final = (s.get("stages") or {}).get("final", {})
    row = {"variant": name, "setting": setting, "shift_s": shift, "wer": round(wer(ref, hyp), 2),
           "first_pass_wer": round(wer(ref, first), 2) if first else None,
           "words_out": len(en_tokens(hyp)), "words_ref": len(en_tokens(ref)),
           "coverage": s.get("coverage"), "lost_speech_s": s.get("lost_speech_s"),
           **{f"sent_{k}": val for k, val in sentence_checks(sentences, hyp).items()},
           "wall_s": round(time.monotonic() - t, 1), "rtf": s.get("rtf"),
           # whether the voice gate took the audio for a telephone line (gate.BandWatch), and
           # how many finals decoded with the previous final's words as lead-in
           "narrow_band": final.get("narrow_band"), "lead_in_used": final.get("lead_in_used"),
           "early_used": final.get("early_used"), "sparse_replaced": final.get("sparse_replaced"),
           # first-pass pieces a sooner final overtook are never shown: first_pass_wer counts
           # their words as missing
           "first_pass_overtaken": final.get("first_pass_overtaken"), "text": hyp}
    if pack is not None:
        from quality import offline_transcript

        cache = offline if offline is not None else {}
        if wav not in cache:
            cache[wav] = offline_transcript(wav, pack, "en")
        off = cache[wav]
        row["offline_wer"] = round(wer(ref, off), 2)
        row["wer_vs_offline"] = round(row["wer"] - row["offline_wer"], 2)
    return row


def median_row(name: str, runs: list[dict]) -> dict:
    """One variant over its shifts: median WERs (and the median of the per-shift differences),
    the lowest coverage, every sentence lost or repeated in any shift."""
    def med(key):
        vals = [r[key] for r in runs if r.get(key) is not None]
        return round(statistics.median(vals), 2) if vals else None

    covs = [r["coverage"] for r in runs]
    row = {"variant": name, "setting": runs[0].get("setting", ""), "shifts": [r["shift_s"] for r in runs],
           "wer": med("wer"),
           "first_pass_wer": med("first_pass_wer"), "coverage": None if None in covs else min(covs),
           "lost_speech_s": max((r["lost_speech_s"] or 0.0) for r in runs),
           "sent_lost": sorted({i for r in runs for i in r["sent_lost"]}),
           "sent_duplicated": sorted({i for r in runs for i in r["sent_duplicated"]}),
           "per_shift": [{k: r.get(k) for k in ("shift_s", "wer", "offline_wer", "wer_vs_offline", "text")}
                         for r in runs]}
    if runs[0].get("offline_wer") is not None:
        row["offline_wer"] = med("offline_wer")
        row["wer_vs_offline"] = med("wer_vs_offline")
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", type=Path, default=ROOT / "bench" / "robust" / "out")
    ap.add_argument("--pair", default="en-en")
    ap.add_argument("--asr-model", default=None)
    ap.add_argument("--realtime", action="store_true", help="feed at real-time pace (default: --fast)")
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--no-offline", action="store_true")
    ap.add_argument("--shifts", default="0", help="seconds of silence put before each file, comma-separated")
    ap.add_argument("--setting", action="append", default=[], metavar="LABEL=FLAGS",
                    help="run every variant once per setting, interleaved (default: one, the defaults)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    shifts = [float(x) for x in args.shifts.split(",") if x.strip()]
    man_path = args.set / "manifest.json"
    if not man_path.is_file():
        print(f"robust: no set at {args.set}: run bench/robust/build.py first", file=sys.stderr)
        return 2
    man = json.loads(man_path.read_text())
    sentences = [s["text"] for s in man["sentences"]]
    ref = " ".join(sentences)
    extra = ["--realtime" if args.realtime else "--fast"]
    if args.asr_model:
        extra += ["--asr-model", args.asr_model]
    pack = None
    if not args.no_offline:
        from quality import asr_pack

        pack = asr_pack(args.pair, extra)
    from quality import parse_setting

    settings = [parse_setting(s) for s in args.setting] or [("", "")]
    rows = []
    tmp = tempfile.TemporaryDirectory(prefix="relay-robust-")
    offline: dict[Path, str] = {}  # the same file's offline decode, once for all the settings
    for name, v in man["variants"].items():
        if args.only and name not in args.only:
            continue
        runs: dict[str, list[dict]] = {label: [] for label, _ in settings}
        for shift in shifts:
            wav = shifted(args.set / v["file"], shift, Path(tmp.name))
            for label, flags in settings:
                runs[label].append(run_variant(wav, name, shift, args.pair, extra + flags.split(), pack, sentences,
                                               ref, label, offline))
                print(json.dumps({k: x for k, x in runs[label][-1].items() if k != "text"}), flush=True)
        for label, _ in settings:
            rows.append(runs[label][0] if len(shifts) == 1 else median_row(name, runs[label]))
    tmp.cleanup()
    def tag(r: dict) -> str:
        return f" [{r['setting']}]" if r.get("setting") else ""

    misses = []
    for r in rows:
        if r.get("wer_vs_offline") is not None and r["wer_vs_offline"] > WER_MARGIN:
            misses.append(f"{r['variant']}{tag(r)}: WER {r['wer']} vs offline {r['offline_wer']}")
        if r["coverage"] is None or r["coverage"] < COVERAGE_MIN:
            misses.append(f"{r['variant']}{tag(r)}: coverage {r['coverage']}")
        if r["sent_lost"] or r["sent_duplicated"]:
            misses.append(f"{r['variant']}{tag(r)}: sentences lost {r['sent_lost']}, duplicated {r['sent_duplicated']}")
    hdr = f"{'variant':24s} {'WER':>6s} {'1st':>6s} {'offline':>7s} {'Δ':>6s} {'cover':>6s} {'lost s':>6s} {'lost':>5s} {'dup':>4s}"
    print(hdr)
    for r in rows:
        print(f"{(r['variant'] + tag(r))[:24]:24s} {r['wer']:6.1f} {r['first_pass_wer'] if r['first_pass_wer'] is not None else float('nan'):6.1f} "
              f"{r.get('offline_wer', float('nan')):7.1f} {r.get('wer_vs_offline', float('nan')):6.1f} "
              f"{r['coverage'] if r['coverage'] is not None else float('nan'):6.3f} "
              f"{r['lost_speech_s'] if r['lost_speech_s'] is not None else float('nan'):6.1f} "
              f"{len(r['sent_lost']):5d} {len(r['sent_duplicated']):4d}")
    if args.out:
        args.out.write_text(json.dumps({"realtime": args.realtime, "pair": args.pair, "shifts": shifts, "rows": rows,
                                        "misses": misses}, indent=1))
    for m in misses:
        print("MISS", m)
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
