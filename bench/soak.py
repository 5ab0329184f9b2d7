"""Soak: real-time replay of the long clips in a loop through one live-paced session, with the
real models. Not part of CI.

    python bench/soak.py [--minutes 30] [--clips A.wav B.wav] [--sample-s 10] [--out FILE.json] [--hog 1]
                         [--faults "mt:raise@40,asr:raise@300"]

Every ``--sample-s`` it records the process RSS, thread count and open file descriptors. At the
end it reports:

* memory growth: RSS at the end against RSS once the first loop of the clips was done (lazy
  allocations and caches fill during the first pass), as a percentage — the target is < 5 %;
* subtitle and dub latency p50/p95/p99 per window of the session (stable over time?);
* threads and file descriptors: during the session (after the first loop vs. the end) and
  after the session has finished against before it started (leaks);
* supervisor restarts (with ``--faults``: the test-only RELAY_FAULTS knob, see app/obs/faults.py).

The session record keeps every segment's text in memory for the summary, so some growth with
session length is expected; the figure says how much. The dub audio is kept only with
``--keep-dub`` (about 0.3 GB per hour of speech, for an export afterwards).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CLIPS = [ROOT / "resources" / "demo" / "zh_meeting_demo.wav", ROOT / "tests" / "data" / "zh_demo_20s.wav"]


def pct(values) -> dict:
    if not values:
        return {"p50": None, "p95": None, "p99": None, "n": 0}
    a = np.asarray(values) * 1000
    return {k: round(float(np.percentile(a, q)), 1) for k, q in (("p50", 50), ("p95", 95), ("p99", 99))} | {"n": len(a)}


class Sampler(threading.Thread):
    def __init__(self, every_s: float, clock):
        super().__init__(name="soak-sampler", daemon=True)
        import psutil

        self.proc = psutil.Process()
        self.every_s, self.clock = every_s, clock
        self.samples: list[dict] = []
        self.stop_ev = threading.Event()

    def sample(self) -> dict:
        import gc

        # Python objects alive: tells growth of the session's own records from native memory
        return {"t": round(self.clock(), 1), "rss_mb": round(self.proc.memory_info().rss / 2**20, 1),
                "threads": threading.active_count(), "fds": self.proc.num_fds(), "py_objects": len(gc.get_objects())}

    def run(self) -> None:
        while not self.stop_ev.wait(self.every_s):
            self.samples.append(self.sample())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--clips", nargs="*", type=Path, default=CLIPS)
    ap.add_argument("--pair", default="zh-en")
    ap.add_argument("--sample-s", type=float, default=10.0)
    ap.add_argument("--windows", type=int, default=6, help="latency windows over the session")
    ap.add_argument("--faults", default=None, help="RELAY_FAULTS spec to inject during the soak")
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    ap.add_argument("--keep-dub", action="store_true",
                    help="keep the dub audio in memory for an export (what --dub-out and the window do)")
    ap.add_argument("--hog", type=int, default=0,
                    help="competing CPU hogs: processes that spin for the whole soak (the issue's load)")
    ap.add_argument("--edge-min", type=float, default=5.0,
                    help="final latency p95 of the first and the last this many minutes are compared")
    ap.add_argument("--no-memory-tuning", action="store_true",
                    help="leave glibc's allocator as it is: no arena cap, no periodic trim (the baseline)")
    args = ap.parse_args()
    if args.no_memory_tuning:
        os.environ["RELAY_NO_TRIM"] = "1"
    if args.minutes <= 0:
        raise SystemExit("--minutes must be positive")
    if args.faults:
        os.environ["RELAY_FAULTS"] = args.faults
    from app.core import memory
    from app.core.audio import SR
    from app.session.build import build_pipeline
    from app.session.models import load_models
    from app.session.options import SessionOptions
    from app.session.runner import feed_array
    from app.audio.files import load_audio

    if not args.no_memory_tuning:
        memory.tune_allocator()  # what `relay` does first thing (app/memory.py)
    clips = [load_audio(c) for c in args.clips]
    loop_s = sum(len(c) for c in clips) / SR
    opts = SessionOptions(pair=args.pair, realtime=True)
    models = load_models(opts, lambda m: print(m, file=sys.stderr, flush=True))
    import psutil

    proc = psutil.Process()
    # the hogs first: their process handles and multiprocessing's resource tracker hold fds of
    # this process, which are the benchmark's, not the session's
    hogs = start_hogs(args.hog)
    before = {"threads": threading.active_count(), "fds": proc.num_fds()}
    pipe = build_pipeline(models, opts)
    pipe.record.keep_dub_audio = args.keep_dub
    sampler = Sampler(args.sample_s, pipe.clock.now)
    pipe.start()
    sampler.start()
    t0 = time.monotonic()
    end = t0 + args.minutes * 60
    loops, fed_s, baseline = 0, 0.0, None
    while time.monotonic() < end and not pipe.failed():
        for clip in clips:
            left = end - time.monotonic()
            if left <= 0:
                break
            part = clip[: int(left * SR)] if left * SR < len(clip) else clip
            feed_array(pipe, part, realtime=True)
            fed_s += len(part) / SR
        loops += 1
        if baseline is None:
            baseline = sampler.sample()
            print(f"soak: first loop of {loop_s:.0f} s done: {baseline}", file=sys.stderr, flush=True)
        else:
            print(f"soak: loop {loops}, {fed_s / 60:.1f} min fed: {sampler.sample()}", file=sys.stderr, flush=True)
    last = sampler.sample()
    pipe.finish()
    for h in hogs:
        h.terminate()
    sampler.stop_ev.set()
    sampler.join()
    timeline = list(pipe.tracker.timeline)
    totals = {"segments": len(pipe.record.segments), "latency_ms": pipe.tracker.summary(),
              "supervisor": pipe.supervisor.summary(),
              "degradation": pipe.policy.summary() if pipe.policy is not None else None,
              "asr_overruns": pipe.asr_stage.cursor.overruns}
    del pipe
    import gc

    gc.collect()
    time.sleep(1.0)
    after = {"threads": threading.active_count(), "fds": proc.num_fds()}
    result = report(args, models, sampler.samples, baseline or last, last, before, after, loops, fed_s,
                    timeline, totals)
    result["allocator"] = {"tuned": not args.no_memory_tuning, "arena_max": memory.ARENAS,
                           "trim_interval_s": memory.TRIM_INTERVAL_S, "trims": memory.trims}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        tmp = args.out.with_suffix(args.out.suffix + ".part")
        tmp.write_text(text)
        tmp.replace(args.out)
    return 0


def _spin() -> None:
    while True:
        pass


def start_hogs(n: int) -> list:
    import multiprocessing as mp

    hogs = [mp.get_context("spawn").Process(target=_spin, daemon=True, name=f"hog{i}") for i in range(n)]
    for h in hogs:
        h.start()
    return hogs


def edges(tl, edge_s: float) -> dict:
    """p95 of each end-to-end kind over the first and the last ``edge_s`` of the session, and the
    ratio last/first (the issue's drift target is final latency p95 last/first ≤ 1.2)."""
    span = max((t for t, _, _ in tl), default=0.0)
    out = {}
    for kind in ("e2e_final", "e2e_subtitle", "e2e_dub"):
        first = [v for t, k, v in tl if k == kind and t < edge_s]
        last = [v for t, k, v in tl if k == kind and t >= span - edge_s]
        a, b = pct(first), pct(last)
        out[kind] = {"first": a, "last": b,
                     "p95_ratio": round(b["p95"] / a["p95"], 3) if a["p95"] and b["p95"] else None}
    return out


def report(args, models, samples, baseline, last, before, after, loops, fed_s, tl, totals) -> dict:
    span = max((t for t, _, _ in tl), default=0.0)
    wins = []
    for i in range(args.windows):
        a, b = span * i / args.windows, span * (i + 1) / args.windows
        sub = [v for t, k, v in tl if a <= t < b + (1e-9 if i == args.windows - 1 else 0) and k == "e2e_subtitle"]
        dub = [v for t, k, v in tl if a <= t < b + (1e-9 if i == args.windows - 1 else 0) and k == "e2e_dub"]
        fin = [v for t, k, v in tl if a <= t < b + (1e-9 if i == args.windows - 1 else 0) and k == "e2e_final"]
        wins.append({"from_min": round(a / 60, 2), "to_min": round(b / 60, 2), "subtitle": pct(sub),
                     "final": pct(fin), "dub": pct(dub)})
    growth = (last["rss_mb"] - baseline["rss_mb"]) / baseline["rss_mb"] * 100
    return {
        "minutes": round(fed_s / 60, 2), "loops": loops, "clips": [str(c) for c in args.clips],
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
        "accel": models.accel, "faults": args.faults, "keep_dub_audio": args.keep_dub,
        "rss_mb": {"after_first_loop": baseline["rss_mb"], "end": last["rss_mb"],
                   "max": max(s["rss_mb"] for s in samples) if samples else last["rss_mb"],
                   "growth_pct": round(growth, 2)},
        "py_objects": {"after_first_loop": baseline["py_objects"], "end": last["py_objects"]},
        "threads": {"after_first_loop": baseline["threads"], "end_of_session": last["threads"],
                    "before_session": before["threads"], "after_session": after["threads"]},
        "fds": {"after_first_loop": baseline["fds"], "end_of_session": last["fds"],
                "before_session": before["fds"], "after_session": after["fds"]},
        "latency_windows": wins,
        "hogs": args.hog,
        "edges": edges(tl, args.edge_min * 60),
        "totals": totals,
        "samples": samples,
    }


if __name__ == "__main__":
    sys.exit(main())
