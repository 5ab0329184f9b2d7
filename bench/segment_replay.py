"""Segmentation settings judged on the same recognised text: record real-time runs' committed
words, then replay them through the segmenter and the real MT (zh_meeting, zh-en).

    python bench/segment_replay.py --record 3                 # 3 real-time runs -> bench/out/replay/
    python bench/segment_replay.py "eager=6" "eager=4"        # replay every recorded run per setting

Streaming recognition is chaotic, so a real-time sweep mixes a setting's effect on translation
with the run-to-run spread of what was recognised (chrF moves by ±2 between runs of one setting).
The segmenter does not change recognition: replaying recorded commits (each word with the time it
was committed, the time it had been spoken and the tentative text after it) through it and
through the MT backend gives every setting the same source. Latency here is simulated: one MT
worker, each call's measured time × ``--mt-factor`` (contention with recognition in a live run).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from latency import ZH_WAV, zh_references  # noqa: E402
from textmetrics import chrf  # noqa: E402

from app.audio.files import load_audio  # noqa: E402
from app.cli.parser import build_parser  # noqa: E402
from app.cli.run import options_from_args  # noqa: E402
from app.pipeline.messages import CommittedWords  # noqa: E402
from app.pipeline.mt_stage import MTConfig, MTStage  # noqa: E402
from app.pipeline.protocols import Word  # noqa: E402
from app.pipeline.queues import ControlChannel, MonotonicClock  # noqa: E402
from app.pipeline.segmenter import Segmenter, SegmenterConfig  # noqa: E402
from app.session.build import build_pipeline  # noqa: E402
from app.session.models import check_models, load_models  # noqa: E402
from app.session.runner import feed_array  # noqa: E402

OUT = ROOT / "bench" / "out" / "replay"


def load(extra: list[str]):
    args = build_parser().parse_args(["run", "--input", str(ZH_WAV), "--pair", "zh-en", *extra])
    opts = options_from_args(args)
    return opts, load_models(opts, lambda m: None, plan=check_models(opts))


def record(n: int, extra: list[str]) -> None:
    opts, models = load(extra)
    audio = load_audio(str(ZH_WAV))
    OUT.mkdir(parents=True, exist_ok=True)
    for k in range(n):
        pipe = build_pipeline(models, opts)
        commits = []

        def obs(ev, pipe=pipe, commits=commits):
            if isinstance(ev, CommittedWords):  # published by the ASR stage before it segments
                commits.append({"at": ev.emitted_at, "pause": ev.pause_after,
                                "lookahead": "".join(w.text for w in pipe.asr_stage.policy.tentative).strip(),
                                "words": [[w.text, w.start, w.end, pipe.arrival.played_at(w.end)] for w in ev.words]})
        pipe.bus.subscribe(obs)
        pipe.start()
        feed_array(pipe, audio, True)
        pipe.finish()
        lat = pipe.tracker.summary()["e2e_subtitle"]
        path = OUT / f"run{k + 1}.json"
        rec = {"flags": extra, "commits": commits, "subtitle_p50": lat["p50"]}
        path.write_text(json.dumps(rec, ensure_ascii=False), encoding="utf-8")
        print(f"{path}: subtitle p50 {lat['p50']} ms (live)", file=sys.stderr, flush=True)


class _Last:
    """A bus that keeps the last event published (the MT stage's translation)."""

    event = None

    def publish(self, event) -> None:
        self.event = event


def replay(rec: dict, eager: int, mt, boundaries, ref_tgt: str, factor: float) -> dict:
    now = [0.0]
    seg = Segmenter(SegmenterConfig(lang="zh", eager_units=eager), lambda: now[0], boundaries)
    # the real MT stage, driven on this thread: each piece continues its sentence's translation
    bus = _Last()
    stage = MTStage(mt, None, None, None, ControlChannel(), MTConfig(beam_size=1, previews=False), bus,
                    MonotonicClock())
    played: dict = {}
    mt_free = 0.0
    lats, targets = [], []
    for c in rec["commits"]:
        now[0] = c["at"]
        words = []
        for text, start, end, at in c["words"]:
            words.append(Word(text, start, end, 1.0))
            played[(text, start, end)] = at
        for sg in seg.feed(words, c["pause"], c["lookahead"]):
            stage._translate_segment(sg)
            tr = bus.event
            mt_free = max(sg.emitted_at, mt_free) + (tr.emitted_at - tr.started_at) * factor
            lats += [mt_free - played[(w.text, w.start, w.end)] for w in sg.words]
            targets.append(tr.target)
    text = " ".join(t for t in targets if t).strip()
    lats.sort()
    return {"p50": 1000 * statistics.median(lats), "p95": 1000 * lats[int(0.95 * (len(lats) - 1))],
            "chrF": chrf([text], [ref_tgt]), "pieces": len(targets), "words": len(text.split())}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("settings", nargs="*", help='segmenter settings to replay, e.g. "eager=6" "eager=4"')
    ap.add_argument("--record", type=int, default=0, metavar="N", help="record N real-time runs first")
    ap.add_argument("--flags", default="", help="relay run flags for the recorded runs")
    ap.add_argument("--mt-factor", type=float, default=1.6)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.record:
        record(args.record, args.flags.split())
    if not args.settings:
        return
    runs = sorted(OUT.glob("run*.json"))
    if not runs:
        sys.exit("segment_replay: nothing recorded yet: run it with --record N first")
    recs = [json.loads(p.read_text(encoding="utf-8")) for p in runs]
    _, models = load(["--no-tts"])
    _, ref_tgt = zh_references()
    print(f"{len(recs)} recorded runs; simulated MT time = measured x {args.mt_factor}")
    print("| setting | subtitle p50 ms (mean) | p95 | chrF (mean) | chrF per run | pieces | English words |")
    print("|---|---|---|---|---|---|---|")
    for setting in args.settings:
        kv = dict(x.split("=") for x in setting.split())
        rs = [replay(r, int(kv.get("eager", 4)), models.mt, models.boundaries, ref_tgt, args.mt_factor) for r in recs]

        def mean(k):
            return statistics.mean(r[k] for r in rs)
        print(f"| {setting} | {mean('p50'):.0f} | {mean('p95'):.0f} | {mean('chrF'):.1f} | "
              + " / ".join(f"{r['chrF']:.1f}" for r in rs) + f" | {mean('pieces'):.1f} | {mean('words'):.1f} |",
              flush=True)


if __name__ == "__main__":
    main()
