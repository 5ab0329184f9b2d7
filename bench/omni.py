"""Score a `relay run --json` summary like the field: OmniSTEval (longform, with resegmentation).

    from omni import Reference, score_summary
    refs = [Reference("大家好。", "Hello everyone.", 0.3, 2.54), ...]   # in order, times on the file
    scores = score_summary(summary, refs)       # src CER, and per stream BLEU, chrF, LongYAAL (CA)

Two target streams are scored, each as one long hypothesis per recording that OmniSTEval
(https://github.com/pe-trik/OmniSTEval, >= 0.1.10) re-segments to the reference sentences with
its SoftSegmenter alignment before BLEU, chrF and the latency metrics:

- ``final``: what stays. With the second pass, each final sentence's target words are emitted at
  its ``final_at`` (a final whose second pass ``failed`` keeps the first pass's text: its words
  keep the times its covered pieces showed them, else ``final_at``). Without a second pass
  (``--no-final-pass``) the pieces; for ``--serial`` its whole utterances.
- ``first_pass``: what was first displayed: each first-pass piece's target words at its
  ``emitted_at``. Without a second pass, and for ``--serial``, the same stream as ``final``.

Emission times are computation-aware and on the source timeline: a word shown at pipeline time T
was emitted at ``T - summary["clock"]["first_audio_at"]`` (real-time feed: source time t arrived
at ``first_audio_at + t``). They go to OmniSTEval as its CA ``elapsed``; no computation-unaware
delays exist for a real-time pipeline, so only the (CA) latency metrics are given.

What OmniSTEval's longform LongYAAL does (its scoring.YAALScorer, is_longform=True), per reference
sentence with offset o, duration |X| and |Y*| reference words: d_i = emission_i − o for the words
aligned to it, γ = max(|Y|, |Y*|)/|X|, LongYAAL = mean over i of (d_i − (i−1)/γ), stopping at the
first word emitted after the recording's end (the end of the last reference sentence); a sentence
whose first word came after that end is not scored. So the file's last sentence is usually
dropped from the final stream's LongYAAL (its final comes after the audio ends), and a file holding
a single sentence gives no final-stream LongYAAL at all: ``latency_instances`` counts the
sentences that were scored. LongYAAL (CA) is the mean over the scored sentences of all files given.

The source is scored by CER/WER as ``bench/textmetrics.py`` defines it (whole file, joined).
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from textmetrics import error_rate  # noqa: E402

CJK = ("zh", "ja")


@dataclass(frozen=True)
class Reference:
    """One reference sentence of a recording: source text, target text, and where its speech
    lies in the file (seconds; None when the corpus does not say: then no latency)."""

    source: str
    target: str
    start: float | None = None
    end: float | None = None


@dataclass(frozen=True)
class Emitted:
    """Target text that appeared at ``at`` seconds on the source timeline (None: unknown)."""

    text: str
    at: float | None


# --- the summary's streams ---------------------------------------------------------------------

def _is_serial(summary: dict) -> bool:
    return str(summary.get("mode", "")).startswith("serial")


def _first_audio_at(summary: dict) -> float | None:
    v = (summary.get("clock") or {}).get("first_audio_at")
    return float(v) if v is not None else None


def _on_source(t, origin: float | None) -> float | None:
    return None if t is None or origin is None else float(t) - origin


def _piece_stream(pieces: list[dict], origin: float | None) -> list[Emitted]:
    out = []
    for p in sorted(pieces, key=lambda p: (p.get("seq", 0), p.get("src_start", 0.0))):
        text = (p.get("target") or "").strip()
        if text:  # a piece never translated was never shown
            t = p.get("emitted_at", p.get("final_at"))
            out.append(Emitted(text, _on_source(t, origin)))
    return out


def streams(summary: dict) -> dict[str, list[Emitted]]:
    """The ``final`` and ``first_pass`` target streams of a summary, in source order (see the
    module docstring for which text counts as emitted when)."""
    origin = _first_audio_at(summary)
    segs = summary.get("segments") or []
    pieces = summary.get("first_pass") or []
    # --serial lists its utterances among first_pass too: first display = final, one stream
    two_pass = not _is_serial(summary) and (bool(pieces) or any("final_at" in s for s in segs))
    if not two_pass:  # --no-final-pass (the pieces stay) or --serial (first display = final)
        if _is_serial(summary):
            s = [Emitted((x.get("target") or "").strip(), _on_source(x.get("final_at", x.get("emitted_at")), origin))
                 for x in sorted(segs, key=lambda x: (x.get("src_start", 0.0), x.get("id", x.get("seq", 0))))]
            s = [e for e in s if e.text]
        else:
            s = _piece_stream(segs, origin)
        return {"final": s, "first_pass": list(s)}
    by_seq = {p.get("seq"): p for p in pieces}
    final: list[Emitted] = []
    for f in sorted(segs, key=lambda f: (f.get("src_start", 0.0), f.get("id", 0))):
        text = (f.get("target") or "").strip()
        if not text:
            continue
        covered = [by_seq.get(s) for s in f.get("covers") or ()]
        if f.get("failed") and covered and all(c is not None for c in covered):
            final.extend(_piece_stream(covered, origin))  # the first pass's text stayed, as shown
        else:
            final.append(Emitted(text, _on_source(f.get("final_at"), origin)))
    return {"final": final, "first_pass": _piece_stream(pieces, origin)}


def source_texts(summary: dict) -> dict[str, str]:
    """The recognised source of each stream, in source order, joined with spaces (the error-rate
    tokeniser drops them for Chinese/Japanese; they keep Latin words apart)."""
    def join(items):
        items = sorted(items, key=lambda x: (x.get("src_start") or 0.0, x.get("id", x.get("seq", 0)) or 0))
        return " ".join((x.get("source") or "").strip() for x in items).strip()

    segs = summary.get("segments") or []
    pieces = summary.get("first_pass") or []
    return {"final": join(segs), "first_pass": join(pieces if pieces and not _is_serial(summary) else segs)}


# --- OmniSTEval ---------------------------------------------------------------------------------

def _units(text: str, tgt_lang: str) -> list[str]:
    return list(text.replace(" ", "")) if tgt_lang in CJK else text.split()


def write_inputs(folder: Path, refs: dict[str, list[Reference]], hyps: dict[str, list[Emitted]],
                 tgt_lang: str = "en") -> dict[str, Path]:
    """OmniSTEval's longform input files for recordings ``refs``/``hyps`` (same keys, one per
    recording): ``segmentation.json`` (wav, offset, duration in seconds), ``references.txt`` (one
    target sentence a line), ``hypothesis.jsonl`` (one line per recording: ``source``,
    ``prediction``, and ``elapsed``, the per-word computation-aware emission times in ms, when
    every word has one). The same files run through the CLI:
    ``omnisteval longform --speech_segmentation segmentation.json --ref_sentences_file
    references.txt --hypothesis_file hypothesis.jsonl --word_level --lang en``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    seg, ref_lines, hyp_lines = [], [], []
    for rec, rs in refs.items():
        for r in rs:
            timed = r.start is not None and r.end is not None and r.end > r.start
            seg.append({"wav": f"{rec}.wav", "offset": float(r.start) if timed else 0.0,
                        "duration": float(r.end - r.start) if timed else 0.0})
            ref_lines.append(" ".join(r.target.split()))
        words, elapsed = [], []
        for e in hyps.get(rec, []):
            u = _units(e.text, tgt_lang)
            words.extend(u)
            elapsed.extend([None if e.at is None else round(e.at * 1000.0, 1)] * len(u))
        line = {"source": f"{rec}.wav", "prediction": ("" if tgt_lang in CJK else " ").join(words)}
        if all(x is not None for x in elapsed):
            line["elapsed"] = elapsed
        hyp_lines.append(line)
    paths = {"segmentation": folder / "segmentation.json", "references": folder / "references.txt",
             "hypothesis": folder / "hypothesis.jsonl"}
    paths["segmentation"].write_text(json.dumps(seg, ensure_ascii=False, indent=0), encoding="utf-8")
    paths["references"].write_text("".join(x + "\n" for x in ref_lines), encoding="utf-8")
    paths["hypothesis"].write_text("".join(json.dumps(h, ensure_ascii=False) + "\n" for h in hyp_lines),
                                   encoding="utf-8")
    return paths


def _clean(v) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else round(float(v), 2)


def score_stream(refs: dict[str, list[Reference]], hyps: dict[str, list[Emitted]], tgt_lang: str = "en",
                 keep: Path | None = None) -> dict:
    """BLEU, chrF and the computation-aware longform latencies (LongYAAL, LongLAAL, LongAL, ms)
    of one target stream over one or more recordings, by OmniSTEval's own loaders, resegmenter and
    scorers (what its ``longform`` CLI runs). ``keep``: also leave its input files there."""
    from omnisteval import evaluate_instances, resegment
    from omnisteval.io import load_resegmentation_inputs

    logging.getLogger("omnisteval").setLevel(logging.ERROR)  # "no CU delays", said per call
    char_level = tgt_lang in CJK
    timed = all(r.start is not None and r.end is not None and r.end > r.start for rs in refs.values() for r in rs)
    with tempfile.TemporaryDirectory(prefix="omni-") as tmp:
        paths = write_inputs(Path(keep) if keep else Path(tmp), refs, hyps, tgt_lang)
        lines = paths["hypothesis"].read_text(encoding="utf-8").splitlines()
        has_times = all("elapsed" in json.loads(x) for x in lines)
        ref_words, hyp_words, segmentation, ref_sentences = load_resegmentation_inputs(
            str(paths["segmentation"]), None, str(paths["references"]), str(paths["hypothesis"]),
            hypothesis_format="jsonl", char_level=char_level)
    instances, _ = resegment(ref_words, hyp_words, segmentation, ref_sentences, char_level=char_level,
                             lang=None if char_level else tgt_lang)
    latency = timed and has_times
    scores, _, _ = evaluate_instances(instances, compute_quality=True, compute_latency=latency, is_longform=True,
                                      bleu_tokenizer="zh" if tgt_lang == "zh" else "13a")
    n_lat = 0
    if latency:
        from omnisteval.scoring import YAALScorer

        y = YAALScorer(computation_aware=True, is_longform=True)
        n_lat = sum(1 for ins in instances if ins.emission_ca and y.compute(ins) is not None)
    return {
        "bleu": _clean(scores.get("bleu")), "chrf": _clean(scores.get("chrf")),
        "long_yaal_ca_ms": _clean(scores.get("ca_long_yaal")) if latency else None,
        "long_laal_ca_ms": _clean(scores.get("ca_long_laal")) if latency else None,
        "long_al_ca_ms": _clean(scores.get("ca_long_al")) if latency else None,
        "instances": len(instances), "latency_instances": n_lat,
        "empty": sum(1 for ins in instances if not ins.prediction.strip()),
        "resegmented": [ins.prediction for ins in instances],
    }


def score_summary(summary: dict, refs: list[Reference], src_lang: str = "zh", tgt_lang: str = "en",
                  recording: str = "recording", keep: Path | None = None) -> dict:
    """One summary of one recording against its reference sentences (in order): the source's
    error rate (CER for Chinese/Japanese, else WER, in %), and BLEU, chrF and LongYAAL (CA) of the
    final and of the first-pass target stream. A summary without ``clock.first_audio_at`` (or
    references without times) gets quality only."""
    ref_src = ("" if src_lang in CJK else " ").join(r.source for r in refs)
    src = source_texts(summary)
    err, n = error_rate(ref_src, src["final"], src_lang)
    fp_err, _ = error_rate(ref_src, src["first_pass"], src_lang)
    out = {"src_error_pct": round(err, 2), "first_pass_src_error_pct": round(fp_err, 2), "ref_tokens": n}
    st = streams(summary)
    for name, stream in st.items():
        k = Path(keep) / name if keep else None
        out[name] = score_stream({recording: refs}, {recording: stream}, tgt_lang, keep=k)
        out[name]["words"] = sum(len(_units(e.text, tgt_lang)) for e in stream)
    return out


def references_from_json(path: Path) -> list[Reference]:
    """References in the shared data's long-file format (``zh_meeting.json``: ``segments`` with
    ``text``, ``en``, ``start_s``, ``end_s``)."""
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    return [Reference(s["text"], s["en"], s.get("start_s"), s.get("end_s")) for s in d["segments"]]


if __name__ == "__main__":  # score saved summaries: python bench/omni.py SUMMARY.json REFS.json
    s = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    r = references_from_json(Path(sys.argv[2]))
    res = score_summary(s, r, keep=Path(os.environ["OMNI_KEEP"]) if os.environ.get("OMNI_KEEP") else None)
    print(json.dumps(res, indent=1, ensure_ascii=False))
