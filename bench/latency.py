"""Latency benchmark: the streaming pipeline against the serial cascade, on the same audio, in one go.

    python bench/latency.py                       # zh-en on zh_meeting.wav, en-en on asterisk_session.wav
    python bench/latency.py --only zh --runs 2

Each run is a separate `relay run --json` process in real-time mode (so latencies are
computation-aware and peak RSS is per run). Prints p50/p95/p99 subtitle and dub latency, RTF,
peak RSS, WER/CER of the committed source text, chrF of the translation, and pipeline/serial ratios.
With ``--runs N`` pipeline and serial alternate N times and the table shows each figure's median
over the runs (every run is kept under ``per_run`` in the JSON): streaming recognition is chaotic,
and one run's CER on the 280-character clip moves by points.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from textmetrics import chrf, error_rate  # noqa: E402

SHARED = Path(os.environ.get("RELAY_SHARED", ROOT.parent / "shared"))
ZH_WAV = SHARED / "data" / "zh" / "long" / "zh_meeting.wav"
ZH_REF = SHARED / "data" / "zh" / "long" / "zh_meeting.json"
DEV = Path(os.environ.get("RELAY_DEVSPEECH", "/tmp/devspeech"))


def ensure_devspeech() -> Path | None:
    wav = DEV / "long" / "asterisk_session.wav"
    if wav.is_file():
        return wav
    script = SHARED / "data" / "fetch-dev-speech.sh"
    print(f"fetching the English dev set into {DEV} …", file=sys.stderr)
    r = subprocess.run(["bash", str(script), str(DEV)], capture_output=True, text=True)
    if r.returncode != 0 or not wav.is_file():
        print(f"could not build {wav}: {r.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    return wav


def zh_references() -> tuple[str, str]:
    """zh_meeting's Chinese text and English translation, each joined over its sentences."""
    ref = json.loads(ZH_REF.read_text(encoding="utf-8"))
    return "".join(s["text"] for s in ref["segments"]), " ".join(s["en"] for s in ref["segments"])


def run_relay(wav: Path, pair: str, extra: list[str], tree: Path = ROOT) -> dict:
    """One `relay run --json` of the code in ``tree``; its summary object."""
    cmd = [sys.executable, "-m", "app", "run", "--input", str(wav), "--pair", pair, "--json", *extra]
    if (tree / "app" / "core" / "profanity.py").is_file():  # scored against references: the words as said
        cmd += ["--profanity", "raw"]
    t = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=tree)
    if p.returncode != 0:
        raise SystemExit(f"relay failed ({p.returncode}): {p.stderr.strip()[-400:]}")
    last = p.stdout.strip().splitlines()[-1]
    s = json.loads(last)
    s["_proc_wall_s"] = time.monotonic() - t
    return s


def offline_transcript(wav: Path, pack: str, lang: str) -> str:
    """The same model transcribing the whole file at once (faster-whisper, beam 5)."""
    from faster_whisper import WhisperModel

    from app.models.loader import whisper_files

    m = WhisperModel("offline", device="cpu", compute_type="int8", files=whisper_files(pack))
    prompt = "以下是普通话的句子。" if lang == "zh" else None
    segs, _ = m.transcribe(str(wav), language=lang if pack == "whisper-base" else None, beam_size=5,
                           initial_prompt=prompt)
    return ("" if lang == "zh" else " ").join(s.text.strip() for s in segs)


def score(summary: dict, ref_src: str, ref_tgt: str | None, lang: str) -> dict:
    sep = "" if lang == "zh" else " "
    src = sep.join(s["source"] for s in summary["segments"])
    err, n = error_rate(ref_src, src, lang)
    out = {"src_error_pct": round(err, 2), "ref_tokens": n}
    if ref_tgt is not None:
        tgt = " ".join((s.get("target") or "") for s in summary["segments"]).strip()
        out["chrF"] = round(chrf([tgt], [ref_tgt]), 1)
    return out


def row(label: str, s: dict, sc: dict) -> dict:
    lat = s["latency_ms"]
    return {
        "run": label,
        "subtitle_p50": lat["e2e_subtitle"]["p50"], "subtitle_p95": lat["e2e_subtitle"]["p95"],
        "subtitle_p99": lat["e2e_subtitle"]["p99"],
        "dub_p50": lat["e2e_dub"]["p50"], "dub_p95": lat["e2e_dub"]["p95"], "dub_p99": lat["e2e_dub"]["p99"],
        "asr_first_token_p50": lat["asr_first_token"]["p50"],
        "tts_first_audio_p50": lat["tts_first_audio"]["p50"], "tts_first_audio_p95": lat["tts_first_audio"]["p95"],
        "rtf": s["rtf"], "cpu_rtf": s["cpu_rtf"], "peak_rss_mb": s["peak_rss_mb"],
        "segments": len(s["segments"]), "mean_segment_s": s["mean_segment_s"],
        "AL_ms": s["simuleval"]["AL_ms"], **sc,
    }


def fmt(rows: list[dict]) -> str:
    cols = ["run", "subtitle_p50", "subtitle_p95", "subtitle_p99", "dub_p50", "dub_p95", "dub_p99",
            "tts_first_audio_p50", "rtf", "cpu_rtf", "peak_rss_mb", "src_error_pct", "chrF", "AL_ms"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join("" if r.get(c) is None else str(r.get(c)) for c in cols) + " |")
    return "\n".join(lines)


def median_row(rs: list[dict]) -> dict:
    """Each figure's median over the runs of one setting (the runs' count in ``runs``)."""
    out = {"run": rs[0]["run"], "runs": len(rs)}
    for k, v in rs[0].items():
        if isinstance(v, (int, float)):
            vals = [r[k] for r in rs if r.get(k) is not None]
            out[k] = round(statistics.median(vals), 2) if vals else None
        elif k != "run":
            out[k] = v
    return out


def ratio(a, b):
    return round(b / a, 2) if a and b else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=("zh", "en"), help="one clip only")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "latency.json"))
    ap.add_argument("--extra", default="", help="extra relay run flags for the pipeline runs")
    ap.add_argument("--runs", type=int, default=1,
                    help="pipeline and serial runs, interleaved; the table shows each figure's median")
    args = ap.parse_args()
    rows, ratios, per_run = [], {}, []
    extra = args.extra.split()
    beam = extra[extra.index("--beam") + 1] if "--beam" in extra[:-1] else "1"  # --extra goes to the pipeline
    conditions = {
        "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
        "python": platform.python_version(), "date": time.strftime("%Y-%m-%d"),
        "compute": f"int8 CPU; ASR threads = cores, MT 1, TTS 1; MT beam {beam} streaming, 4 serial; "
                   "real-time feed in 20 ms blocks" + (f"; pipeline flags: {args.extra}" if extra else ""),
    }
    def compare(key: str, wav: Path, pair: str, lang: str, pack: str, ref_src: str, ref_tgt: str | None):
        """Pipeline and serial on the same audio, plus the same model offline, as two rows."""
        off_err, _ = error_rate(ref_src, offline_transcript(wav, pack, lang), lang)
        runs: dict[str, list[dict]] = {"pipeline": [], "serial": []}
        for _ in range(max(1, args.runs)):
            for mode, flags in (("pipeline", args.extra.split()), ("serial", ["--serial"])):
                s = run_relay(wav, pair, flags)
                runs[mode].append(row(f"{pair} {mode}", s, score(s, ref_src, ref_tgt, lang)))
        for mode in ("pipeline", "serial"):
            rows.append(median_row(runs[mode]))
            per_run.extend(runs[mode])
        r = {"subtitle_p50_serial_over_pipeline": ratio(rows[-2]["subtitle_p50"], rows[-1]["subtitle_p50"]),
             f"offline_{key}_pct": round(off_err, 2)}
        if ref_tgt is not None:
            r["dub_p50_serial_over_pipeline"] = ratio(rows[-2]["dub_p50"], rows[-1]["dub_p50"])
        ratios[pair] = r

    if args.only in (None, "zh"):
        compare("cer", ZH_WAV, "zh-en", "zh", "whisper-base", *zh_references())
    if args.only in (None, "en"):
        wav = ensure_devspeech()
        if wav is not None:
            ref = json.loads(wav.with_suffix(".json").read_text(encoding="utf-8"))
            compare("wer", wav, "en-en", "en", "whisper-tiny-en", " ".join(s["text"] for s in ref["segments"]), None)
    table = fmt(rows)
    print(table)
    print(json.dumps(ratios, indent=1))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"conditions": conditions, "rows": rows, "ratios": ratios,
                                          "per_run": per_run}, indent=1))


if __name__ == "__main__":
    main()
