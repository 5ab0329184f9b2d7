"""Quality and latency of every setting in one table, scored like the field (OmniSTEval).

    python bench/quality.py                          # the corpus manifest (else the shared zh data), 2 runs
    python bench/quality.py --files 3 --runs 1       # a subset
    python bench/quality.py --only _clean --only pink10 --files 4     # files whose id has _clean or pink10
    python bench/quality.py --quick                  # 2 files, 1 run, no offline decode: a smoke run
    python bench/quality.py --offline                # plus the offline CER ceiling of each file
    python bench/quality.py --by snr_db              # rows per setting and noise level (a manifest field)
    python bench/quality.py --setting "two-pass=" --setting "eager 6=--eager 6" --setting "serial=--serial"
    python bench/quality.py --rescore bench/out/quality.json    # score the saved runs again, no relay

Settings (default: ``two-pass`` = the defaults, ``first-pass only`` = ``--no-final-pass``,
``serial`` = ``--serial``) run interleaved: for each run, for each file, every setting in turn,
each a separate ``relay run --json`` process in real-time mode (computation-aware latencies, peak
RSS per run). Each run is scored by ``bench/omni.py``: CER of the final source, BLEU/chrF and
LongYAAL (CA) of the final and the first-pass target streams after OmniSTEval resegments them to
the reference sentences; the rest comes from the summary (``latency_ms`` p50s, ``display.erasure``,
``rtf``, ``peak_rss_mb``). The table shows, per setting, each figure's median over all its
(file, run) results (a run without a figure, e.g. a file too short for a final-stream LongYAAL,
is left out of that median; ``n`` counts the runs). With ``--offline``, one more row: the same
Whisper pack decoding each whole file at once (faster-whisper, beam 5, vad_filter), the CER
ceiling. Every run's figures and its whole summary go to ``--out`` (bench/out/quality.json).

The manifest (``--manifest``; default ``bench/corpus/{,out/}manifest.jsonl`` or ``.json`` if one exists)
is JSONL or a JSON list (or ``{"files": [...]}``), one entry per file, paths relative to the
manifest: ``{"id": .., "wav": .., "pair": "zh-en", "sentences": [{"zh": .., "en": .., "start":
s, "end": s}, ...]}``; accepted too are ``audio``/``path`` for ``wav``, ``segments`` for
``sentences``, ``text``/``source`` and ``translation``/``target``/``translations.en`` for the
texts, ``start_s``/``end_s`` or ``offset``/``duration`` for the times, and ``ref``/``reference``:
a reference JSON in the format of ``zh_meeting.json``. Sentences without times get quality only.
Without a manifest: ``shared/data/zh/long/zh_meeting.wav`` (16 sentences, timed) then the 16
single-sentence clips of ``shared/data/zh/manifest.jsonl`` (a clip's last — only — sentence gets
no final-stream LongYAAL: OmniSTEval does not score output after the recording's end).
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

from omni import CJK, Reference, references_from_json, score_summary  # noqa: E402
from textmetrics import error_rate  # noqa: E402

SHARED = Path(os.environ.get("RELAY_SHARED", ROOT.parent / "shared"))
CORPUS = ROOT / "bench" / "corpus"
DEFAULT_SETTINGS = [("two-pass", ""), ("first-pass only", "--no-final-pass"), ("serial", "--serial")]


# --- the manifest ------------------------------------------------------------------------------

def _get(d: dict, *keys, default=None):
    for k in keys:
        cur = d
        for part in k.split("."):
            if not isinstance(cur, dict) or part not in cur:
                break
            cur = cur[part]
        else:
            return cur
    return default


def _sentence(s: dict, src: str, tgt: str, offset: float = 0.0) -> Reference:
    source = _get(s, src, "text", "source", "src", "transcript")
    target = _get(s, tgt, "translation", "target", "tgt", f"translations.{tgt}")
    start = _get(s, "start", "start_s", "offset")
    end = _get(s, "end", "end_s")
    if end is None and start is not None and _get(s, "duration", "duration_s") is not None:
        end = float(start) + float(_get(s, "duration", "duration_s"))
    if source is None or target is None:
        raise ValueError(f"a reference sentence without {src} or {tgt} text: {s}")
    return Reference(str(source), str(target), None if start is None else float(start) + offset,
                     None if end is None else float(end) + offset)


def _resolve(base: Path, p: str) -> Path:
    for cand in (Path(p), base / p, ROOT / p):
        if cand.is_file():
            return cand.resolve()
    return (base / p).resolve()


def load_manifest(path: Path) -> list[dict]:
    """Files to run: dicts with id, wav (Path), pair, src, tgt, refs (list of Reference)."""
    path = Path(path)
    if path.is_dir():
        names = ("manifest.jsonl", "manifest.json")
        path = next((path / n for n in names if (path / n).is_file()), path / names[0])
    text = path.read_text(encoding="utf-8").strip()
    try:
        data = json.loads(text)  # a JSON list, an object holding one, or a one-line JSONL
    except json.JSONDecodeError:
        data = [json.loads(line) for line in text.splitlines() if line.strip()]
    if isinstance(data, dict):
        data = next((data[k] for k in ("files", "recordings", "items") if isinstance(data.get(k), list)), [data])
    entries = data
    out = []
    for i, e in enumerate(entries):
        pair = _get(e, "pair") or f"{_get(e, 'lang', 'src_lang', default='zh')}-{_get(e, 'tgt_lang', default='en')}"
        src, tgt = pair.split("-")
        wav = _resolve(path.parent, _get(e, "wav", "audio", "path"))
        ref = _get(e, "ref", "reference", "json")
        sents = _get(e, "sentences", "segments")
        if ref is not None and sents is None:
            sents = json.loads(_resolve(path.parent, ref).read_text(encoding="utf-8"))["segments"]
        if sents is None:  # one sentence: the entry itself
            sents = [e]
        refs = [_sentence(s, src, tgt) for s in sents]
        meta = {k: v for k, v in e.items() if isinstance(v, (str, int, float)) and k not in ("wav", "id")}
        out.append({"id": str(_get(e, "id", default=wav.stem or i)), "wav": wav, "pair": pair, "src": src,
                    "tgt": tgt, "refs": refs, "meta": meta})
    return out


def fallback_manifest() -> list[dict]:
    """The shared dev data: zh_meeting.wav (16 timed sentences), then its 16 clips, one sentence
    each (0.2 s of silence before the speech, 0.3 s after, as the data's README says)."""
    zh = SHARED / "data" / "zh"
    files = [{"id": "zh_meeting", "wav": zh / "long" / "zh_meeting.wav", "pair": "zh-en", "src": "zh", "tgt": "en",
              "refs": references_from_json(zh / "long" / "zh_meeting.json")}]
    for line in (zh / "manifest.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            e = json.loads(line)
            files.append({"id": e["id"], "wav": zh / e["audio"], "pair": "zh-en", "src": "zh", "tgt": "en",
                          "refs": [Reference(e["text"], e["translations"]["en"], 0.2,
                                             round(e["duration_s"] - 0.3, 3))]})
    return files


def default_manifest() -> Path | None:
    """bench/corpus's manifest (bench/corpus/build.py writes it to bench/corpus/out/)."""
    for d in (CORPUS, CORPUS / "out"):
        for n in ("manifest.jsonl", "manifest.json"):
            if (d / n).is_file():
                return d / n
    return None


# --- running and scoring -----------------------------------------------------------------------

def run_relay(wav: Path, pair: str, flags: list[str]) -> dict:
    """One real-time `relay run --json`; its summary (the last stdout line). A run that takes
    more than 3× the audio plus 3 minutes is stopped (a hung session must not stall the bench)."""
    import soundfile

    cmd = [sys.executable, "-m", "app", "run", "--input", str(wav), "--pair", pair, "--json", *flags,
           "--profanity", "raw"]  # scored against references: the words as said
    t = time.monotonic()
    limit = 3 * soundfile.info(str(wav)).duration + 180
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=limit)
    if p.returncode != 0:
        raise RuntimeError(f"relay failed ({p.returncode}): {p.stderr.strip()[-400:]}")
    s = json.loads(p.stdout.strip().splitlines()[-1])
    s["_proc_wall_s"] = round(time.monotonic() - t, 2)
    return s


def _p50(summary: dict, name: str):
    return ((summary.get("latency_ms") or {}).get(name) or {}).get("p50")


def figures(summary: dict, f: dict) -> dict:
    """The table's figures of one run."""
    sc = score_summary(summary, f["refs"], f["src"], f["tgt"], recording=f["id"])
    fin, fp = sc["final"], sc["first_pass"]
    return {
        "src_error_pct": sc["src_error_pct"], "first_pass_src_error_pct": sc["first_pass_src_error_pct"],
        "final_chrf": fin["chrf"], "final_bleu": fin["bleu"],
        "first_chrf": fp["chrf"], "first_bleu": fp["bleu"],
        "final_long_yaal": fin["long_yaal_ca_ms"], "first_long_yaal": fp["long_yaal_ca_ms"],
        "final_long_laal": fin["long_laal_ca_ms"], "first_long_laal": fp["long_laal_ca_ms"],
        "final_yaal_sentences": fin["latency_instances"], "first_yaal_sentences": fp["latency_instances"],
        "sentences": fin["instances"], "final_empty": fin["empty"], "first_empty": fp["empty"],
        "first_display_p50": _p50(summary, "e2e_first_display"), "final_p50": _p50(summary, "e2e_final"),
        "dub_p50": _p50(summary, "e2e_dub"), "subtitle_p50": _p50(summary, "e2e_subtitle"),
        "erasure": (summary.get("display") or {}).get("erasure"),
        "rtf": summary.get("rtf"), "cpu_rtf": summary.get("cpu_rtf"), "peak_rss_mb": summary.get("peak_rss_mb"),
        # second-pass decodes used early, and sparse decodes replaced (app.pipeline.final_stage)
        **{k: _get(summary, f"stages.final.{k}") for k in ("early_used", "sparse_replaced")},
        "_streams": {"final": fin["resegmented"], "first_pass": fp["resegmented"]},
    }


def offline_transcript(wav: Path, pack: str, lang: str) -> str:
    """The same Whisper pack as relay's, the whole file at once: faster-whisper, beam 5, VAD."""
    from faster_whisper import WhisperModel

    from app.models.loader import whisper_model

    m = whisper_model(pack)
    kw = {"files": m} if isinstance(m, dict) else {}
    model = WhisperModel(m if isinstance(m, str) else "offline", device="cpu", compute_type="int8", **kw)
    prompt = "以下是普通话的句子。" if lang == "zh" else None
    segs, _ = model.transcribe(str(wav), language=lang, beam_size=5, vad_filter=True, initial_prompt=prompt)
    return ("" if lang in CJK else " ").join(s.text.strip() for s in segs)


def asr_pack(pair: str, flags: list[str]) -> str:
    from app.models.loader import plan_pair

    override = flags[flags.index("--asr-model") + 1] if "--asr-model" in flags[:-1] else None
    return plan_pair(pair, asr_override=override).asr_pack


COLS = [("n", "n"), ("src_error_pct", "CER %"), ("final_chrf", "final chrF"), ("final_bleu", "final BLEU"),
        ("first_chrf", "1st-pass chrF"), ("first_bleu", "1st-pass BLEU"),
        ("final_long_yaal", "LongYAAL final ms"), ("first_long_yaal", "LongYAAL 1st-pass ms"),
        ("first_display_p50", "first display p50"), ("final_p50", "final p50"), ("dub_p50", "dub p50"),
        ("subtitle_p50", "subtitle p50"), ("erasure", "erasure"), ("rtf", "rtf"), ("peak_rss_mb", "peak RSS MB")]


def median_row(label: str, runs: list[dict]) -> dict:
    """Each figure's median over the runs that have it."""
    row = {"setting": label, "n": len(runs)}
    for k, _ in COLS[1:]:
        vals = [r[k] for r in runs if r.get(k) is not None]
        row[k] = round(statistics.median(vals), 3) if vals else None
    return row


def _fmt(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}" if abs(v) < 1000 else f"{v:.0f}"
    return str(v)


def table(rows: list[dict]) -> str:
    lines = ["| setting | " + " | ".join(h for _, h in COLS) + " |", "|---|" + "---|" * len(COLS)]
    for r in rows:
        lines.append(f"| {r['setting']} | " + " | ".join(_fmt(r.get(k)) for k, _ in COLS) + " |")
    return "\n".join(lines)


def rows_of(per_run: list[dict], settings: list[str], offline: dict[str, float], by: str | None = None) -> list[dict]:
    """One row per setting over all files, then (with ``by``) one per setting and value of that
    manifest field."""
    groups = [None] + (sorted({str(r.get("group")) for r in per_run}) if by else [])
    rows = []
    for g in groups:
        for label in settings:
            rs = [r["figures"] for r in per_run
                  if r["setting"] == label and r.get("figures") and (g is None or str(r.get("group")) == g)]
            rows.append(median_row(label if g is None else f"{label} [{by}={g}]", rs))
    if offline:
        rows.append({"setting": "offline (faster-whisper beam 5, VAD)", "n": len(offline),
                     "src_error_pct": round(statistics.median(offline.values()), 3)})
    return rows


def parse_setting(s: str) -> tuple[str, str]:
    label, sep, flags = s.partition("=")
    return (label.strip(), flags.strip()) if sep else (s.strip() or "(defaults)", s.strip())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manifest",
                    help="corpus manifest (default: bench/corpus/manifest.jsonl, else the shared zh data)")
    ap.add_argument("--runs", type=int, default=None, help="runs of every setting on every file (default 2)")
    ap.add_argument("--files", type=int, default=None, help="only the first N files of the manifest")
    ap.add_argument("--only", action="append", default=[], metavar="TEXT",
                    help="only the files whose id contains TEXT (repeatable: any of them), before --files")
    ap.add_argument("--by", metavar="FIELD", help="rows per value of this manifest field too, e.g. snr_db, kind")
    ap.add_argument("--quick", action="store_true", help="smoke: 2 files, 1 run, no offline decode (unless given)")
    ap.add_argument("--setting", action="append", default=[], metavar="LABEL=FLAGS",
                    help='a setting: its label and its relay run flags, e.g. "serial=--serial" (repeatable)')
    ap.add_argument("--extra", default="", help="flags added to every setting but serial")
    ap.add_argument("--offline", action="store_true", help="also the offline decode of each file (the CER ceiling)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "quality.json"))
    ap.add_argument("--rescore", metavar="JSON", help="score the runs saved in this output again; run nothing")
    args = ap.parse_args()
    runs = args.runs if args.runs is not None else (1 if args.quick else 2)
    nfiles = args.files if args.files is not None else (2 if args.quick else None)
    settings = [parse_setting(s) for s in args.setting] or DEFAULT_SETTINGS
    extra = args.extra.split()

    manifest = Path(args.manifest) if args.manifest else default_manifest()
    if args.rescore and not args.manifest:  # the manifest those runs used
        used = json.loads(Path(args.rescore).read_text(encoding="utf-8"))["conditions"].get("manifest", "")
        manifest = Path(used) if used and not used.startswith("fallback") else None
    files = load_manifest(manifest) if manifest else fallback_manifest()
    if args.only and not args.rescore:
        files = [f for f in files if any(t in f["id"] for t in args.only)]
    if nfiles is not None and not args.rescore:
        files = files[:nfiles]
    by_id = {f["id"]: f for f in files}
    missing = [str(f["wav"]) for f in files if not Path(f["wav"]).is_file()]
    if missing and not args.rescore:
        raise SystemExit(f"audio missing: {missing[:3]}")

    per_run: list[dict] = []
    offline: dict[str, float] = {}
    if args.rescore:
        old = json.loads(Path(args.rescore).read_text(encoding="utf-8"))
        settings = [(s["label"], s["flags"]) for s in old["settings"]]
        offline = old.get("offline_cer", {})
        for r in old["per_run"]:
            f = by_id.get(r["file"])
            if f is not None and args.by:
                r["group"] = f.get("meta", {}).get(args.by)
            if f is not None and r.get("summary"):
                r["figures"] = figures(r["summary"], f)
            per_run.append(r)
    else:
        print(f"{len(files)} files × {len(settings)} settings × {runs} runs "
              f"({'manifest ' + str(manifest) if manifest else 'shared zh data (no corpus manifest)'})",
              file=sys.stderr)
        for k in range(runs):
            for f in files:
                for label, flags in settings:
                    fl = flags.split() + ([] if "--serial" in flags.split() else extra)
                    rec = {"setting": label, "flags": fl, "file": f["id"], "run": k + 1,
                           "group": f.get("meta", {}).get(args.by) if args.by else None}
                    try:
                        s = run_relay(Path(f["wav"]), f["pair"], fl)
                        rec["summary"] = s
                        rec["figures"] = figures(s, f)
                    except Exception as e:  # one broken run must not lose the others
                        rec["error"] = f"{type(e).__name__}: {e}"
                    per_run.append(rec)
                    show = {x: rec.get("figures", {}).get(x) for x in
                            ("src_error_pct", "final_chrf", "first_chrf", "final_long_yaal", "first_long_yaal",
                             "first_display_p50", "final_p50", "rtf")}
                    print(f"run {k + 1} {f['id']} [{label}]: {rec.get('error') or show}", file=sys.stderr, flush=True)
        if args.offline:
            for f in files:
                try:
                    ref = ("" if f["src"] in CJK else " ").join(r.source for r in f["refs"])
                    hyp = offline_transcript(Path(f["wav"]), asr_pack(f["pair"], extra), f["src"])
                    offline[f["id"]] = round(error_rate(ref, hyp, f["src"])[0], 2)
                except Exception as e:
                    print(f"offline decode of {f['id']} failed: {e}", file=sys.stderr)
    labels = [label for label, _ in settings]
    rows = rows_of(per_run, labels, offline, args.by)
    print(table(rows))
    failed = [r for r in per_run if r.get("error")]
    if failed:
        print(f"{len(failed)} runs failed: " + "; ".join(f"{r['file']} [{r['setting']}]: {r['error'][:120]}"
                                                       for r in failed[:5]), file=sys.stderr)
    conditions = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                  "python": platform.python_version(), "date": time.strftime("%Y-%m-%d %H:%M"),
                  "manifest": str(manifest) if manifest else "fallback: shared/data/zh",
                  "files": [f["id"] for f in files], "runs": runs,
                  "scoring": "OmniSTEval longform (resegmented to the reference sentences), BLEU 13a, chrF, "
                             "LongYAAL (CA) ms; CER as bench/textmetrics.py; medians over (file, run)"}
    try:
        import omnisteval

        conditions["omnisteval"] = omnisteval.__version__
    except ImportError:
        pass
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"conditions": conditions, "settings": [{"label": a, "flags": b} for a, b in settings],
                               "rows": rows, "offline_cer": offline, "per_run": per_run}, indent=1, ensure_ascii=False),
                   encoding="utf-8")
    print(f"every run: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
