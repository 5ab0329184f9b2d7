"""Wire loaded models into a local running session: the streaming pipeline (with speculative MT
drafts and the degradation policy) or the serial cascade."""

from __future__ import annotations

import dataclasses
import os

from app.core import profanity
from app.core.text import unspaced
from app.models import store
from app.models.loader import load_asr
from app.obs import faults as fi  # test-only fault injection (RELAY_FAULTS), off by default
from app.pipeline.engine import PipelineConfig, SerialCascade, StreamingPipeline
from app.pipeline.final_stage import FinalConfig
from app.pipeline.policy import (PipelineActuator, PolicyConfig, PolicyEngine, PolicyRunner, default_rules,
                                 memory_probe)
from app.pipeline.segmenter import SegmenterConfig
from app.pipeline.mt_stage import MTConfig
from app.pipeline.recognizer import ASRConfig
from app.pipeline.shown import ShownText
from app.pipeline.speculation import SpeculationConfig, SpeculationController
from app.pipeline.tts_stage import TTSConfig
from app.session.models import LoadedModels
from app.session.options import SessionOptions
from app.session.tuning import mt_beam, tuning_for


def segmenter_config(lang: str, eager: int | None) -> SegmenterConfig:
    """Pieces go to MT at the tuning table's eager size unless the user set one."""
    eager = tuning_for(lang).eager if eager is None else eager
    if unspaced(lang):
        return SegmenterConfig(lang=lang, eager_units=eager)
    return SegmenterConfig(lang="en", min_clause_units=4, max_units=20, eager_units=eager)


def text_languages(models: LoadedModels | None, pair: str) -> tuple[str, str]:
    """The languages of the text a session shows: (its source line, its translation). The
    source line is what the recogniser writes: English for xx-en (Whisper translates)."""
    src, _, tgt = pair.partition("-")
    source = "en" if src == "xx" else src
    if models is None:  # a cloud session without local models: the pair says it
        return source, tgt
    return getattr(models, "out_lang", source), getattr(getattr(models, "plan", None), "tgt", tgt)


def shown_text(mode: str, source_lang: str, target_lang: str) -> ShownText | None:
    """The profanity setting as the pipeline's text filters (None: nothing to filter: ``raw``, or
    no word list for either language)."""
    shown = ShownText(profanity.make_filter(mode, source_lang), profanity.make_filter(mode, target_lang))
    return shown if shown else None


def profanity_notes(opts: SessionOptions, models: LoadedModels | None = None) -> list[str]:
    """What the profanity setting cannot do for this session (a language without a word list)."""
    if opts.profanity == "raw":
        return []
    have = set(profanity.languages())
    missing = [lang for lang in dict.fromkeys(text_languages(models, opts.pair)) if lang not in have]
    return [f"no profanity word list for '{lang}': its text is shown unfiltered" for lang in missing]


def pipeline_config(models: LoadedModels, opts: SessionOptions) -> PipelineConfig:
    """The pipeline's configuration: the user's options over the tuning table's defaults."""
    t = tuning_for(models.out_lang)

    def pick(value, default):
        return default if value is None else value

    cores = os.cpu_count() or 2
    return PipelineConfig(
        asr=ASRConfig(step_s=pick(opts.asr_step, t.asr_step), catch_up=opts.realtime,
                      commit_lookahead_s=pick(opts.commit_lookahead, t.commit_lookahead),
                      first_commit_lookahead_s=pick(opts.first_commit_lookahead, t.first_commit_lookahead),
                      context_s=pick(opts.asr_context, t.asr_context),
                      confident_prob=pick(opts.confident_commit, t.confident_commit),
                      confident_lookahead_s=pick(opts.confident_lookahead, t.confident_lookahead)),
        mt=MTConfig(beam_size=opts.mt_beam,
                    previews=opts.preview == "on" or (opts.preview == "auto" and cores >= 4)),
        segmenter=segmenter_config(models.out_lang, opts.eager),
        final=FinalConfig(enabled=opts.final_pass, asr_beam=t.final_asr_beam,
                          first_wait_s=pick(opts.final_wait, 1.0) if opts.realtime else 120.0,
                          pause_s=pick(opts.final_pause, FinalConfig.pause_s),
                          early_s=pick(opts.final_early, FinalConfig.early_s) if opts.realtime else 0.0,
                          mt_beam=mt_beam(opts.beam, whole_sentences=True),
                          context_s=pick(opts.final_lead_in, FinalConfig.context_s)),
        tts=TTSConfig(source_timeline=not opts.realtime),
        shown=shown_text(opts.profanity, *text_languages(models, opts.pair)),
    )


def build_pipeline(models: LoadedModels, opts: SessionOptions, cfg=None, clock=None):
    """A local RunningSession (app.pipeline.protocols) on ``models``, not started."""
    models.vad.reset()
    if hasattr(models.asr, "reset_stream"):  # an optional backend method: drop an earlier session's state
        models.asr.reset_stream()
    cfg = cfg or pipeline_config(models, opts)
    if cfg.shown is None:  # a configuration made elsewhere still shows text as the options say
        cfg.shown = shown_text(opts.profanity, *text_languages(models, opts.pair))
    cls = SerialCascade if opts.serial else StreamingPipeline
    mt = models.mt if models.plan.mt_pack else (None if opts.serial else models.mt)
    faults, stall_s = fi.from_env(os.environ)
    if stall_s is not None:
        cfg.supervision.stall_s = stall_s
    # the second pass keeps its own voice-activity state: a second detector of the same kind
    final_vad = type(models.vad)() if cfg.final.enabled and not opts.serial else None
    pipe = cls(fi.wrap(models.asr, "asr", faults), fi.wrap(mt, "mt", faults), fi.wrap(models.tts, "tts", faults),
               fi.wrap(models.vad, "vad", faults), cfg, clock=clock,
               word_boundaries=models.boundaries, accel=models.accel,
               final_vad=final_vad)
    if (getattr(pipe, "final_stage", None) is not None and getattr(models, "final_mt", None) is not None
            and opts.final_mt != "opus"):
        # finals translated by the LLM; in real time within a budget, else by the pair's OPUS-MT
        pipe.final_stage.use_llm(models.final_mt, getattr(models, "final_mt_s_per_char", 0.0),
                                 (opts.final_mt_budget or 1.5) if opts.realtime else None)
    # latency control: speculative MT drafts and the degradation policy (streaming only)
    pipe.speculation = SpeculationController(SpeculationConfig(opts.speculative), pipe.clock, pipe.bus.publish)
    pipe.policy = None
    if opts.serial:
        return pipe
    pipe.mt_stage.speculation = pipe.speculation
    if opts.policy != "on":
        return pipe
    english = models.plan.src == "en"
    two_pass = getattr(pipe, "final_stage", None) is not None
    actuator = PipelineActuator(pipe.mt_stage, pipe.speculation, batched=False,
                                asr_swap=_asr_swap(models, opts, pipe) if english else None,
                                asr_control=pipe.asr_stage.control if two_pass else None,
                                final_stage=pipe.final_stage if two_pass else None)
    pcfg = PolicyConfig(rules=actuator.prune(default_rules(english_source=english, two_pass=two_pass,
                                                           realtime=opts.realtime)))
    engine = PolicyEngine(pcfg.rules, start=pipe.clock.now())
    pipe.policy = PolicyRunner(engine, actuator, pcfg, pipe.clock, pipe.bus.publish, pipe.arrival.played_at,
                               memory=fi.memory_pressure(memory_probe(models.accel, pcfg.memory_budget_mb),
                                                         faults, pipe.clock))
    pipe.bus.subscribe(pipe.policy)
    return pipe


def _asr_swap(models: LoadedModels, opts: SessionOptions, pipe):
    """For English with a larger Whisper: the policy's step down to tiny.en (None without it)."""
    if models.plan.asr_pack == "whisper-tiny-en" or models.plan.asr_task != "transcribe":
        return None
    alt = getattr(models, "alt_asr", None)
    if alt is None:
        if "whisper-tiny-en" not in store.installed():
            return None
        alt = load_asr(dataclasses.replace(models.plan, asr_pack="whisper-tiny-en"),
                       threads=opts.threads or os.cpu_count() or 2, accel=models.accel)
        models.alt_asr = alt
    main_asr, stage = models.asr, pipe.asr_stage

    def asr_swap(use_alt: bool) -> str:
        # the stage reads its backend at each step; committed words stay its prompt/prefix
        stage.asr = alt if use_alt else main_asr
        return f"ASR {main_asr.name} → {alt.name}" if use_alt else f"ASR back to {main_asr.name}"

    return asr_swap
