"""What the window offers: language pairs from the installed model packs, audio sources and
outputs from app.audio's device list."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.audio.devices import list_devices
from app.core.errors import UserError
from app.models import store
from app.models.loader import plan_pair

LANGUAGES = {"zh": "Chinese", "en": "English", "ja": "Japanese", "de": "German", "fr": "French",
             "es": "Spanish", "ru": "Russian", "ko": "Korean", "it": "Italian", "pt": "Portuguese",
             "xx": "Any language"}


# Session → Profanity: what subtitles, exports and the dub make of it (`relay run --profanity`)
PROFANITY_CHOICES = {"masked": "&Masked (f***)", "removed": "&Removed", "raw": "R&aw (as recognised)"}


# Session → Final translation: what translates the finals (`relay run --final-mt`); the LLM
# packs are optional (relay models install qwen-1.5b), offered only once installed
FINAL_MT_LABELS = {"auto": "&Automatic (the Qwen 1.5B LLM when installed, else OPUS-MT)",
                   "opus": "&OPUS-MT (fastest)", "qwen-1.5b": "Qwen2.5 &1.5B (LLM, better English)",
                   "qwen-0.5b": "Qwen2.5 &0.5B (LLM, small)"}


def final_mt_installed(choice: str) -> bool:
    """Whether a Final translation choice can run here (auto and opus always can)."""
    return choice in ("auto", "opus") or choice in store.installed()


def language_name(code: str) -> str:
    return LANGUAGES.get(code, code)


def pair_label(pair: str) -> str:
    src, _, tgt = pair.partition("-")
    if src == tgt:
        return f"{language_name(src)} captions"
    return f"{language_name(src)} → {language_name(tgt)}"


def available_pairs() -> list[tuple[str, str, str]]:
    """(pair, label, note) for every pair the installed packs can run; empty when none can."""
    inst = store.installed()
    candidates = []
    for p in inst.values():
        if p.role == "mt" and len(p.languages) >= 2:
            candidates.append(f"{p.languages[0]}-{p.languages[1]}")
    if any(p.role == "asr" and "*" in p.languages for p in inst.values()):
        candidates.append("xx-en")
    if any(p.role == "asr" for p in inst.values()):
        candidates.append("en-en")
    out, seen = [], set()
    for pair in candidates:
        if pair in seen:
            continue
        seen.add(pair)
        try:
            plan = plan_pair(pair)
        except UserError:
            continue
        src, _, tgt = pair.partition("-")
        note = ("captions only, no dub" if src == tgt else "" if plan.tts_pack
                else "no voice installed: subtitles only")
        out.append((pair, pair_label(pair), note))
    return out


@dataclass
class DeviceChoices:
    sources: list[tuple[str, str]] = field(default_factory=list)  # (id, label)
    sinks: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def list_audio_devices() -> DeviceChoices:
    """Capture sources and playback sinks; never raises (a note says why a list is empty)."""
    out = DeviceChoices()
    try:
        dl = list_devices()
    except Exception as e:  # no audio server, no PortAudio: the file source still works
        out.notes.append(f"audio devices unavailable: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
        return out
    for d in dl.sources:  # labels already say "System audio: …" / "Microphone: …"
        out.sources.append((d.id, d.label))
    for d in dl.sinks:
        out.sinks.append((d.id, d.label))
    out.notes += list(dl.notes)
    return out
