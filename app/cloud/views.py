"""Per-session views of shared backends: the same weights, each session's own streaming state
(Whisper's incremental log-mel cache and language, the VAD's recurrent state). A pipeline must
never start on a backend whose streaming state another pipeline left behind: the feature cache
is keyed by sample index, so a new session at sample 0 would read the old session's audio."""

from __future__ import annotations

import collections
import copy
import dataclasses
import threading


def asr_view(asr, language_fixed: bool):
    """A per-session view of a shared Whisper model: same weights, own streaming state."""
    v = copy.copy(asr)
    if hasattr(asr, "_mel"):
        v._mel = type(asr._mel)(asr.n_mels, backend=asr.accel)
    if hasattr(asr, "_lock"):
        v._lock = threading.Lock()
    if not language_fixed and getattr(asr, "_multilingual", False):
        v.tokenizer, v.detected_language = None, None
    return v


def vad_view(vad):
    v = copy.copy(vad)
    v.reset()
    return v


def mt_view(mt):
    """A per-session view of a shared translator: the same weights and lock, its own memory of
    recent outputs (CT2Translator._recent: committed translations forced back as decoder
    prefixes), so one session's history never shapes another session's decoding."""
    if not hasattr(mt, "_recent"):
        return mt
    v = copy.copy(mt)
    v._recent = collections.OrderedDict()
    return v


def fresh_models(models):
    """LoadedModels whose ASR and VAD start clean, sharing every weight with ``models``."""
    return dataclasses.replace(models, asr=asr_view(models.asr, models.plan.src != "xx"), vad=vad_view(models.vad))
