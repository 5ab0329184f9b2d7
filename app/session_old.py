"""One interpretation session, independent of who drives it (the CLI, the desktop window, the
cloud server): resolve the pair, load and warm the models, build the pipeline, feed it, and
summarise. Qt-free; the UI and the server use exactly this."""

from __future__ import annotations

import os
import resource
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from app.core.errors import UserError

RESOURCES = Path(__file__).resolve().parent.parent / "resources"
DEMO_CLIP = RESOURCES / "demo" / "zh_meeting_demo.wav"
WARMUP_CLIP = RESOURCES / "demo" / "warmup_zh.wav"
BLOCK_S = 0.02  # the file feeder's block: what the live capture pump hands over (every 20 ms)
SR = 16000


@dataclass
class SessionOptions:
    pair: str = "zh-en"
    no_tts: bool = False
    serial: bool = False
    realtime: bool = True
    beam: int | None = None  # None: 1 for streamed pieces, 4 for --serial's whole sentences (mt_beam)
    # None: by the recognised language (asr_defaults); docs/BENCHMARKS.md has the sweep
    asr_step: float | None = None
    commit_lookahead: float | None = None  # audio heard after a word before it may commit
    first_commit_lookahead: float | None = None  # the same for an utterance's first commit
    asr_context: float | None = None  # seconds of the last utterance heard again before the next
    confident_commit: float | None = None  # probability for a one-hypothesis commit (0: off)
    confident_lookahead: float | None = None  # the audio that hypothesis must have heard after the word
    asr_model: str | None = None
    preview: str = "auto"  # auto | on | off
    eager: int | None = None
    threads: int = 0
    accel: str | None = None
    speculative: str = "auto"  # auto | on | off (MT drafts verified with score_batch)
    policy: str = "on"  # adaptive degradation
    extra: dict = field(default_factory=dict)  # options of later features (speculation, policy, …)

    def validate(self) -> None:
        if self.beam is not None and self.beam < 1:
            raise UserError("--beam must be at least 1")
        if self.asr_step is not None and not 0.2 <= self.asr_step <= 10:
            raise UserError("--asr-step must be between 0.2 and 10 seconds")
        for flag, value in (("--commit-lookahead", self.commit_lookahead),
                            ("--first-commit-lookahead", self.first_commit_lookahead),
                            ("--asr-context", self.asr_context),
                            ("--confident-lookahead", self.confident_lookahead)):
            if value is not None and not 0 <= value <= 3:
                raise UserError(f"{flag} must be between 0 and 3 seconds")
        if self.confident_commit is not None and not 0 <= self.confident_commit <= 1:
            raise UserError("--confident-commit must be a probability between 0 (off) and 1")
        if self.preview not in ("auto", "on", "off"):
            raise UserError("--preview must be auto, on or off")
        if not 0 <= self.threads <= 256:
            raise UserError(f"--threads must be between 0 (all cores) and 256, got {self.threads}")
        if self.eager is not None and not 0 <= self.eager <= 1000:
            raise UserError(f"--eager must be between 0 (wait for clause marks) and 1000, got {self.eager}")

    @property
    def mt_beam(self) -> int:
        """Greedy for the pipeline's pieces, each of which continues the sentence's forced translation
        (replayed zh_meeting pieces: chrF 48.3 greedy vs 44.9 at beam 4, 23 % faster); beam 4 for
        whole sentences (zh_meeting's reference sentences: chrF 62.4 vs 60.2 greedy)."""
        if self.beam is not None:
            return self.beam
        return 4 if self.serial else 1

    @property
    def accel_request(self) -> str:
        return self.accel or os.environ.get("RELAY_ACCEL") or "auto"


@dataclass
class LoadedModels:
    """Backends loaded once and reusable for several sessions in a row (the window's Start/Stop)."""

    plan: object
    asr: object
    mt: object
    tts: object
    vad: object
    accel: str
    load_s: float
    warm_s: float
    boundaries: object = None

    @property
    def out_lang(self) -> str:
        return getattr(self.asr, "output_language", self.plan.src) or self.plan.src


def check_models(opts: SessionOptions):
    """Resolve the pair and check its packs are present and intact (one-line errors)."""
    from app.models import store
    from app.models.loader import plan_pair

    opts.validate()
    plan = plan_pair(opts.pair, no_tts=opts.no_tts, asr_override=opts.asr_model)
    for pack in (plan.asr_pack, plan.mt_pack, plan.tts_pack):
        if pack:
            store.get(pack)
    return plan


def load_models(opts: SessionOptions, status: Callable[[str], None] = lambda m: None,
                plan=None) -> LoadedModels:
    from app.accel.dispatch import choose_backend
    from app.backends.silero_vad import SileroVAD
    from app.models.loader import load_asr, load_mt, load_tts

    from app.core.memory import start_trimmer

    plan = plan or check_models(opts)
    start_trimmer()  # long sessions hand freed memory back (app/memory.py)
    try:
        accel = choose_backend(opts.accel_request)
    except ValueError as e:
        raise UserError(str(e)) from None
    cores = os.cpu_count() or 2
    status(f"loading models for {plan.pair}: {plan.asr_pack}"
           + (f", {plan.mt_pack}" if plan.mt_pack else "") + (f", {plan.tts_pack}" if plan.tts_pack else ""))
    t = time.monotonic()
    _import_backends(plan)
    # The four loads are independent and spend much of their time outside the GIL (reading and
    # unpacking weights in CTranslate2 / ONNX Runtime), so they run side by side: ~20 % sooner
    # ready on two cores (see docs/BENCHMARKS.md, cold start).
    loaded, took = _load_parallel({
        "asr": lambda: load_asr(plan, threads=opts.threads or cores, accel=accel),
        "mt": lambda: load_mt(plan, threads=1, beam_size=opts.mt_beam),
        "tts": lambda: load_tts(plan, threads=1),
        "vad": SileroVAD,
    })
    asr, mt, tts, vad = loaded["asr"], loaded["mt"], loaded["tts"], loaded["vad"]
    parts = [f"{k} {v:.1f}" for k, v in took.items()]
    load_s = time.monotonic() - t
    status("warming up")
    warm_s = warm_up(asr, mt, tts, vad)
    models = LoadedModels(plan, asr, mt, tts, vad, accel, load_s, warm_s)
    if models.out_lang == "zh":
        from app.backends.zh_words import JiebaBoundaries
        from app.models.store import relay_home

        models.boundaries = JiebaBoundaries(str(relay_home() / "cache"))
    status(f"models ready: loaded in {load_s:.1f} s ({', '.join(parts)}), warm-up {warm_s:.2f} s")
    return models


def printable_path(path):
    """A path as text that any UTF-8 output takes: bytes a file name holds that are not UTF-8
    (kept by Python as lone surrogates) become U+FFFD."""
    if not isinstance(path, str):
        return path
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _import_backends(plan) -> None:
    """Import the model libraries here, in one thread, before the loads run side by side: two
    threads importing packages that import each other (faster_whisper from the ASR load and
    faster_whisper.utils from the VAD's) can each hold a module lock the other waits for, and
    Python then fails one import with _DeadlockError (seen in CI). ~0.2 s, spent once."""
    import importlib

    names = ["onnxruntime", "faster_whisper", "faster_whisper.utils", "app.backends.whisper_ct2",
             "app.backends.silero_vad"]
    if plan.mt_pack:
        names.append("app.backends.opus_ct2")
    if plan.tts_pack:
        names.append("app.backends.piper_tts")
    for name in names:
        importlib.import_module(name)


def _load_parallel(loaders: dict[str, Callable[[], object]]) -> tuple[dict, dict]:
    """Run each loader in its own thread; returns (results, seconds each took). The first error
    (in the loaders' order) is raised once all have ended, so no load is left running."""
    import threading

    results: dict = {}
    took: dict = {}
    errors: dict = {}

    def one(name, load):
        t0 = time.monotonic()
        try:
            results[name] = load()
        except BaseException as e:  # re-raised in the caller's thread below
            errors[name] = e
        took[name] = time.monotonic() - t0

    threads = [threading.Thread(target=one, args=item, name=f"relay-load-{item[0]}", daemon=True)
               for item in loaders.items()]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for name in loaders:
        if name in errors:
            raise errors[name]
    return results, {k: took[k] for k in loaders}


def warm_up(asr, mt, tts, vad) -> float:
    """Run every model once on bundled audio so the first real input is not slowed by lazy init."""
    from app.audio.files import load_audio

    t = time.monotonic()
    audio = load_audio(WARMUP_CLIP)
    vad.process(audio[: (len(audio) // 512) * 512])
    vad.reset()
    if hasattr(asr, "warm_up"):
        asr.warm_up(audio)
    words = asr.transcribe_utterance(audio)
    if mt is not None:
        mt.translate("".join(w.text for w in words) or "你好", beam_size=1)
    if tts is not None:
        list(tts.synthesize("Ready."))
    return time.monotonic() - t


def segmenter_config(lang: str, eager: int | None):
    """Chinese/Japanese pieces go to MT at 4 characters (6 until session 6 of 2026-12-04).
    Replaying the committed words of three traced real-time zh_meeting runs through the segmenter
    and the real MT (so that recognition is the same for every setting): chrF 47.7 at 4, 47.2 at
    5, 47.4 at 6, 45.4 at 3; subtitle p50 ~150 ms lower at 4 than at 6. In real time (3
    interleaved runs each) 989 vs 1179 ms. The cost is ~10 % more English words (fragments
    translate wordier), which the dub absorbs by catching up sooner (TTSConfig.catch_up_after_s)."""
    from app.pipeline.segmenter import SegmenterConfig

    if lang in ("zh", "ja"):
        return SegmenterConfig(lang=lang, eager_units=4 if eager is None else eager)
    return SegmenterConfig(lang="en", min_clause_units=4, max_units=20, eager_units=4 if eager is None else eager)


def asr_defaults(lang: str) -> tuple[float, float, float, float]:
    """Recognition step, commit margin, the margin of an utterance's first commit, and the
    audio of the last utterance decoded again in front of the next one.
    Chinese/Japanese: 0.25 s steps with a 0.25 s margin (zh-en subtitle p50 1.30 vs 1.50 s, p95
    2.09 vs 2.53 s, CER +0.4 points, against 0.5 s steps) and 0.75 s for the first words of an
    utterance (zh_meeting --fast: CER 6.43 vs 8.57 % with 0.5 s against none; real time, 3
    interleaved runs: rtf 0.621 vs 0.672 with 0.75 s against 0.5 s, lower in each pair, at the same
    CER and subtitle p50, because an utterance is not decoded before it has that much speech);
    other languages keep 0.5 s steps without a margin (en WER 8.4 % with the short steps vs
    6.7 %). No context by default: 1.5 s of it lowered the zh CER in --fast runs
    (bench/phase_cer.py: mean 5.48 vs 8.21 %) but not in real-time ones (5.36-6.43 vs 5.71 %),
    and it costs ~0.1 rtf (docs/BENCHMARKS.md)."""
    return (0.25, 0.25, 0.75, 0.0) if lang in ("zh", "ja") else (0.5, 0.0, 0.0, 0.0)


def confident_defaults(lang: str) -> tuple[float, float]:
    """The probability at which a word commits on one hypothesis, and the audio that hypothesis
    must have heard after it (see LocalAgreement._confident). Chinese/Japanese: 0.9 and 0.15 s.
    zh_meeting, real time, 3 interleaved runs each: subtitle p50 1290 vs 1369 ms off (commit 660
    vs 750 ms), CER 4.29 vs 4.64 %. At 0.5 the latency gain was about the same but the CER of
    --fast runs at four step phases (bench/phase_cer.py) rose to 7.95 % from 5.27 % (0.8: 5.98,
    0.9: 5.71): Whisper base's first reading of a word is often a homophone that a second
    hypothesis corrects (属道 for 署到). Other languages: off, not measured yet."""
    return (0.9, 0.15) if lang in ("zh", "ja") else (0.0, 0.15)


def pipeline_config(models: LoadedModels, opts: SessionOptions):
    from app.pipeline.engine import PipelineConfig
    from app.pipeline.stages import ASRConfig, MTConfig

    cores = os.cpu_count() or 2
    step, lookahead, first, context = asr_defaults(models.out_lang)
    step = step if opts.asr_step is None else opts.asr_step
    lookahead = lookahead if opts.commit_lookahead is None else opts.commit_lookahead
    first = first if opts.first_commit_lookahead is None else opts.first_commit_lookahead
    context = context if opts.asr_context is None else opts.asr_context
    confident, confident_s = confident_defaults(models.out_lang)
    confident = confident if opts.confident_commit is None else opts.confident_commit
    confident_s = confident_s if opts.confident_lookahead is None else opts.confident_lookahead
    return PipelineConfig(
        asr=ASRConfig(step_s=step, catch_up=opts.realtime, commit_lookahead_s=lookahead,
                      first_commit_lookahead_s=first, context_s=context, confident_prob=confident,
                      confident_lookahead_s=confident_s),
        mt=MTConfig(beam_size=opts.mt_beam,
                    previews=opts.preview == "on" or (opts.preview == "auto" and cores >= 4)),
        segmenter=segmenter_config(models.out_lang, opts.eager),
    )


def build_pipeline(models: LoadedModels, opts: SessionOptions, cfg=None, clock=None):
    from app.pipeline.engine import SerialCascade, StreamingPipeline

    models.vad.reset()
    if hasattr(models.asr, "reset_stream"):  # the models may have served an earlier session
        models.asr.reset_stream()
    cfg = cfg or pipeline_config(models, opts)
    cls = SerialCascade if opts.serial else StreamingPipeline
    mt = models.mt if models.plan.mt_pack else (None if opts.serial else models.mt)
    from app.obs import faults as fi  # test-only fault injection (RELAY_FAULTS), off by default

    faults, stall_s = fi.from_env(os.environ)
    if stall_s is not None:
        cfg.supervision.stall_s = stall_s
    pipe = cls(fi.wrap(models.asr, "asr", faults), fi.wrap(mt, "mt", faults), fi.wrap(models.tts, "tts", faults),
               fi.wrap(models.vad, "vad", faults), cfg, clock=clock,
               word_boundaries=models.boundaries, accel=models.accel)
    # latency control: speculative MT drafts and the degradation policy (streaming only)
    import dataclasses

    from app.pipeline.policy import PipelineActuator, PolicyConfig, PolicyEngine, PolicyRunner, default_rules
    from app.pipeline.policy import memory_probe
    from app.pipeline.speculation import SpeculationConfig, SpeculationController

    pipe.speculation = SpeculationController(SpeculationConfig(opts.speculative), pipe.clock, pipe.bus.publish)
    pipe.policy = None
    if opts.serial:
        return pipe
    pipe.mt_stage.speculation = pipe.speculation
    if opts.policy != "on":
        return pipe
    english = models.plan.src == "en"
    asr_swap = None
    if english and models.plan.asr_pack != "whisper-tiny-en" and models.plan.asr_task == "transcribe":
        alt = getattr(models, "alt_asr", None)
        if alt is None:
            from app.models import store
            from app.models.loader import load_asr

            if "whisper-tiny-en" in store.installed():
                alt = load_asr(dataclasses.replace(models.plan, asr_pack="whisper-tiny-en"),
                               threads=opts.threads or os.cpu_count() or 2, accel=models.accel)
                models.alt_asr = alt
        if alt is not None:
            main_asr, stage = models.asr, pipe.asr_stage

            def asr_swap(use_alt: bool) -> str:
                # the stage reads its backend at each step; committed words stay its prompt/prefix
                stage.asr = alt if use_alt else main_asr
                return f"ASR {main_asr.name} → {alt.name}" if use_alt else f"ASR back to {main_asr.name}"
    pcfg = PolicyConfig(rules=default_rules(english_source=english))
    engine = PolicyEngine(pcfg.rules, start=pipe.clock.now())
    actuator = PipelineActuator(pipe.mt_stage, pipe.speculation, batched=False, asr_swap=asr_swap)
    pipe.policy = PolicyRunner(engine, actuator, pcfg, pipe.clock, pipe.bus.publish, pipe.arrival.played_at,
                               memory=fi.memory_pressure(memory_probe(models.accel, pcfg.memory_budget_mb),
                                                         faults, pipe.clock))
    pipe.bus.subscribe(pipe.policy)
    return pipe


def feed_array(pipe, audio, realtime: bool, stop: threading.Event | None = None) -> bool:
    """Feed 16 kHz mono audio in capture-sized blocks; True when stopped before the end."""
    block = int(BLOCK_S * SR)
    t0 = pipe.clock.now()
    for off in range(0, len(audio), block):
        if stop is not None and stop.is_set():
            return True
        if realtime:
            pipe.clock.sleep_until(t0 + (off + block) / SR)
        pipe.push_audio(audio[off: off + block], wait_if_full=not realtime)
        if pipe.failed():
            break
    return False


def make_summary(models: LoadedModels, pipe, audio_s: float, wall_s: float, cpu_s: float,
                 opts: SessionOptions, source: str, interrupted: bool) -> dict:
    lat = pipe.tracker.summary()
    segs = pipe.record.segments
    busy = sum(v.get("busy_s", 0.0) for v in pipe.stage_stats().values() if isinstance(v, dict))
    durations = [s["src_end"] - s["src_start"] for s in segs]
    spec, policy = getattr(pipe, "speculation", None), getattr(pipe, "policy", None)
    return {
        "pair": models.plan.pair,
        "mode": ("serial" if opts.serial else "pipeline") + ("/realtime" if opts.realtime else "/fast"),
        "models": models.plan.models,
        "input": printable_path(source),
        "audio_s": round(audio_s, 3),
        "wall_s": round(wall_s, 3),
        "rtf": round(busy / audio_s, 3) if audio_s else None,
        "cpu_rtf": round(cpu_s / audio_s, 3) if audio_s else None,
        "wall_rtf": round(wall_s / audio_s, 3) if audio_s else None,
        "load_s": round(models.load_s, 2),
        "warmup_s": round(models.warm_s, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "interrupted": interrupted,
        "segments": segs,
        "mean_segment_s": round(sum(durations) / len(durations), 3) if durations else 0.0,
        "latency_ms": lat,
        "simuleval": pipe.tracker.simul_eval(),
        "stages": pipe.stage_stats(),
        "threads": {"asr": opts.threads or os.cpu_count(), "mt": 1, "tts": 1},
        "accel": models.accel,
        "speculation": spec.summary() if spec is not None else {"mode": opts.speculative, "drafts": 0},
        "degradation": ({"policy": "on", **policy.summary(policy.clock.now())} if policy is not None else
                        {"policy": "off", "level": 0, "seconds_at_level": {"0": round(wall_s, 3)},
                         "transitions": []}),
    }


def dub_timeline(pipe, realtime: bool):
    """The dub on the source timeline (or None when nothing was spoken)."""
    arrival_start = (pipe.first_audio_at or 0.0) - BLOCK_S
    return pipe.record.dub_timeline(arrival_start, realtime=realtime)
