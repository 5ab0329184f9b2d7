"""The summary a finished session leaves: what ran, how long, how late, how much."""

from __future__ import annotations

import os
import resource

from app.pipeline.coverage import warning as coverage_warning
from app.session.models import LoadedModels
from app.session.options import SessionOptions


def printable_path(path):
    """A path as text that any UTF-8 output takes: bytes a file name holds that are not UTF-8
    (kept by Python as lone surrogates) become U+FFFD."""
    if not isinstance(path, str):
        return path
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def session_mode(kind: str, opts: SessionOptions, live: bool) -> str:
    """``engine/pace``: engine serial | pipeline | cloud; pace live, realtime or fast (a local
    file), file (a file sent to the cloud, which sets its own pace)."""
    if kind == "cloud":
        return "cloud/live" if live else "cloud/file"
    engine = "serial" if opts.serial else "pipeline"
    return f"{engine}/" + ("live" if live else "realtime" if opts.realtime else "fast")


def make_summary(models: LoadedModels | None, pipe, audio_s: float, wall_s: float, cpu_s: float,
                 opts: SessionOptions, source: str, interrupted: bool, mode: str | None = None) -> dict:
    lat = pipe.tracker.summary()
    cov = pipe.coverage() if hasattr(pipe, "coverage") else None
    segs = pipe.record.segments
    stats = pipe.stage_stats()
    busy = sum(v.get("busy_s", 0.0) for v in stats.values() if isinstance(v, dict))
    durations = [s["src_end"] - s["src_start"] for s in segs]
    spec, policy = getattr(pipe, "speculation", None), getattr(pipe, "policy", None)
    if models is None:  # a cloud session without local models: the server's are not known here
        pair, used, load_s, warm_s, accel = opts.pair, {}, 0.0, 0.0, "none"
    else:
        pair, used, accel = models.plan.pair, models.plan.models, models.accel
        load_s, warm_s = models.load_s, models.warm_s
    return {
        "pair": pair,
        "mode": mode or session_mode(pipe.kind, opts, live=False),
        "models": used,
        "input": printable_path(source),
        "audio_s": round(audio_s, 3),
        "wall_s": round(wall_s, 3),
        "rtf": round(busy / audio_s, 3) if audio_s else None,
        "cpu_rtf": round(cpu_s / audio_s, 3) if audio_s else None,
        "wall_rtf": round(wall_s / audio_s, 3) if audio_s else None,
        "load_s": round(load_s, 2),
        "warmup_s": round(warm_s, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "interrupted": interrupted,
        "segments": segs,  # what stays: the final sentences (or, without a second pass, the pieces)
        "first_pass": pipe.record.pieces if pipe.record.final_mode else [],
        "display": {"erasure": pipe.record.erasure(), "finals": len(pipe.record.finals),
                    "finals_kept_first_pass": sum(1 for f in pipe.record.finals if f.get("failed"))},
        "clock": {"first_audio_at": round(pipe.first_audio_at, 4) if getattr(pipe, "first_audio_at", None) is not None else None},
        "mean_segment_s": round(sum(durations) / len(durations), 3) if durations else 0.0,
        # share of the voiced audio whose time span produced words that stayed (None: no VAD
        # here, as in a cloud session's client); below 90 % the session says so in ``warnings``
        "coverage": cov["coverage"] if cov else None,
        "lost_speech_s": cov["lost_speech_s"] if cov else None,
        "voiced_s": cov["voiced_s"] if cov else None,
        "lost_spans": cov["lost_spans"] if cov else [],
        "warnings": [w for w in [coverage_warning(cov) if cov else None] if w],
        "latency_ms": lat,
        "simuleval": pipe.tracker.simul_eval(),
        "stages": stats,
        "threads": {"asr": opts.threads or os.cpu_count(), "mt": 1, "tts": 1},
        "accel": accel,
        "profanity": opts.profanity,
        "speculation": spec.summary() if spec is not None else {"mode": opts.speculative, "drafts": 0},
        "degradation": ({"policy": "on", **policy.summary(policy.clock.now())} if policy is not None else
                        {"policy": "off", "level": 0, "seconds_at_level": {"0": round(wall_s, 3)},
                         "transitions": []}),
    }
