"""Resolve a pair's model packs, load and warm the models once for several sessions."""

from __future__ import annotations

import importlib
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable

from app.accel.dispatch import choose_backend
from app.audio.files import load_audio
from app.backends.silero_vad import SileroVAD
from app.backends.zh_words import JiebaBoundaries
from app.core.errors import UserError
from app.core.memory import start_trimmer
from app.models import store
from app.models.loader import final_mt_pack, load_asr, load_final_mt, load_mt, load_tts, plan_pair
from app.session.options import WARMUP_CLIP, SessionOptions

os.environ.setdefault("HF_HUB_OFFLINE", "1")


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
    final_mt: object = None  # the second pass's LLM translator (None: the pair's own)
    final_mt_s_per_char: float = 0.0  # its warm-up speed

    @property
    def out_lang(self) -> str:
        return getattr(self.asr, "output_language", self.plan.src) or self.plan.src


def check_models(opts: SessionOptions):
    """Resolve the pair and check its packs are present and intact (one-line errors)."""
    opts.validate()
    plan = plan_pair(opts.pair, no_tts=opts.no_tts, asr_override=opts.asr_model)
    for pack in (plan.asr_pack, plan.mt_pack, plan.tts_pack):
        if pack:
            store.get(pack)
    final_mt_pack(plan, opts.final_mt)  # an LLM asked for and missing: its install command
    return plan


def load_models(opts: SessionOptions, status: Callable[[str], None] = lambda m: None,
                plan=None) -> LoadedModels:


    plan = plan or check_models(opts)
    start_trimmer()  # long sessions hand freed memory back (app/core/memory.py)
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
        "final_mt": lambda: None if opts.serial else load_final_mt(plan, opts.final_mt, threads=opts.threads or cores),
    })
    asr, mt, tts, vad = loaded["asr"], loaded["mt"], loaded["tts"], loaded["vad"]
    parts = [f"{k} {v:.1f}" for k, v in took.items()]
    load_s = time.monotonic() - t
    status("warming up")
    warm_s = warm_up(asr, mt, tts, vad)
    models = LoadedModels(plan, asr, mt, tts, vad, accel, load_s, warm_s)
    if loaded["final_mt"] is not None:
        models.final_mt = loaded["final_mt"]
        t1 = time.monotonic()
        probe = "今天的会议到此结束，谢谢大家。"
        models.final_mt.translate(probe)
        models.final_mt_s_per_char = (time.monotonic() - t1) / len(probe)
        models.warm_s = warm_s = models.warm_s + (time.monotonic() - t1)
        parts.append(f"final translator {models.final_mt.name}")
    if models.out_lang == "zh":

        models.boundaries = JiebaBoundaries(str(store.relay_home() / "cache"))
    status(f"models ready: loaded in {load_s:.1f} s ({', '.join(parts)}), warm-up {warm_s:.2f} s")
    return models


def _import_backends(plan) -> None:
    """Import the model libraries here, in one thread, before the loads run side by side: two
    threads importing packages that import each other (faster_whisper from the ASR load and
    faster_whisper.utils from the VAD's) can each hold a module lock the other waits for, and
    Python then fails one import with _DeadlockError (seen in CI). ~0.2 s, spent once."""
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
