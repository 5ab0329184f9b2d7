"""Resolve a language pair to installed packs and build the backends (loaded from disk only)."""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass, field

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from app.core.errors import ModelDamaged, UserError
from app.models import store
from app.models.catalog import AUTO_LLM, FINAL_MT_CHOICES


@dataclass
class PairPlan:
    pair: str
    src: str
    tgt: str
    asr_pack: str
    asr_task: str  # transcribe | translate
    mt_pack: str | None  # None: recognition already yields the target language
    tts_pack: str | None
    notes: list[str] = field(default_factory=list)

    @property
    def models(self) -> dict:
        return {"asr": self.asr_pack, "asr_task": self.asr_task, "mt": self.mt_pack or "none",
                "tts": self.tts_pack or "none"}


def _find(role: str, pred, inst) -> str | None:
    ranked = sorted((p for p in inst.values() if p.role == role and pred(p)),
                    key=lambda p: (p.manifest.get("imported", False), p.id))
    return ranked[0].id if ranked else None


def plan_pair(pair: str, no_tts: bool = False, asr_override: str | None = None) -> PairPlan:
    parts = pair.split("-")
    if len(parts) != 2 or not all(p.isalpha() for p in parts):
        raise UserError(f"unknown pair '{pair}': write it as SRC-TGT, e.g. zh-en, xx-en or en-en")
    src, tgt = (p.lower() for p in parts)
    inst = store.installed()
    notes: list[str] = []

    def need(pack_id: str | None, what: str, default: str) -> str:
        if pack_id is None:
            raise store.ModelMissing(default, f"is not installed ({what})")
        return pack_id

    # recognition
    if asr_override:
        asr = need(asr_override if asr_override in inst else None, "requested ASR model", asr_override)
    elif src == "en":
        asr = _find("asr", lambda p: p.languages == ["en"], inst) or _find("asr", lambda p: "*" in p.languages, inst)
        asr = need(asr, "English recognition", "whisper-tiny-en")
    else:
        asr = need(_find("asr", lambda p: "*" in p.languages, inst), "multilingual recognition", "whisper-base")
    task = "transcribe"
    mt: str | None = None
    if src == tgt:
        if src != "en":
            notes.append("captions only: source and target language are the same")
    elif src == "xx":
        if tgt != "en":
            raise UserError("xx-en is the only 'any language' pair (Whisper translates into English only)")
        task = "translate"
        asr = need(_find("asr", lambda p: "*" in p.languages, inst), "any-language recognition", "whisper-base")
    else:
        mt = _find("mt", lambda p: p.languages[:2] == [src, tgt], inst)
        if mt is None:
            if tgt == "en" and _find("asr", lambda p: "*" in p.languages, inst):
                task = "translate"
                asr = _find("asr", lambda p: "*" in p.languages, inst)
                notes.append(f"no {src}→en translator installed: using Whisper's own translation")
            else:
                raise UserError(f"no translation model for {src}→{tgt} is installed; import one with: "
                                "relay models import PATH --langs " + f"{src}-{tgt}")
    tts = None
    if not no_tts and not (src == tgt == "en"):
        tts = _find("tts", lambda p: p.languages and p.languages[0] == tgt, inst)
        if tts is None:
            notes.append(f"no {tgt} voice installed: dub disabled (relay models install piper-joe-en for English)")
    return PairPlan(pair, src, tgt, asr, task, mt, tts, notes)


def whisper_files(pack_id: str) -> dict[str, bytes]:
    inst = store.get(pack_id)
    d = inst.path
    files = {}
    for n in ("config.json", "tokenizer.json", "vocabulary.txt"):
        files[n] = (d / n).read_bytes()
    if (d / "model.bin").is_file():
        files["model.bin"] = (d / "model.bin").read_bytes()
    else:  # a split pack from before packs were joined at install: joined in memory
        parts = sorted(d.glob("model.bin.part*"), key=lambda p: int(p.name.rsplit("part", 1)[1]))
        files["model.bin"] = b"".join(p.read_bytes() for p in parts)
    return files


def whisper_model(pack_id: str) -> str | dict[str, bytes]:
    """What WhisperCT2 loads: the pack's folder, or (a split pack installed by an older version,
    whose parts were never joined on disk) its files joined in memory."""
    d = store.get(pack_id).path
    return str(d) if (d / "model.bin").is_file() else whisper_files(pack_id)


def load_asr(plan: PairPlan, threads: int = 2, beam_size: int = 1, frontend: str = "incremental",
             accel: str = "numpy"):
    from app.backends.whisper_ct2 import WhisperCT2  # CTranslate2 and faster-whisper load with a model only

    files = whisper_model(plan.asr_pack)
    lang = "en" if plan.src == "xx" else plan.src
    language = None if plan.src == "xx" else lang
    try:
        return WhisperCT2(files, name=plan.asr_pack, language=language, task=plan.asr_task,
                          threads=threads, beam_size=beam_size, frontend=frontend, accel=accel)
    except (RuntimeError, ValueError) as e:
        raise ModelDamaged(plan.asr_pack, str(e).splitlines()[0]) from None


def load_mt(plan: PairPlan, threads: int = 1, beam_size: int = 4):
    from app.backends.opus_ct2 import CT2Translator, IdentityMT  # CTranslate2 loads with a model only

    if plan.mt_pack is None:
        return IdentityMT(plan.tgt)
    inst = store.get(plan.mt_pack)
    d = inst.path
    src_sp = next((d / n for n in ("sentencepiece.model", "source.spm") if (d / n).is_file()), None)
    tgt_sp = d / "target.spm" if (d / "target.spm").is_file() else None
    if src_sp is None:
        raise ModelDamaged(plan.mt_pack, "no SentencePiece model")
    try:
        return CT2Translator(str(d / "model"), str(src_sp), str(tgt_sp) if tgt_sp else None,
                             name=plan.mt_pack, source_lang=plan.src, target_lang=plan.tgt,
                             threads=threads, beam_size=beam_size)
    except (RuntimeError, ValueError, OSError) as e:
        raise ModelDamaged(plan.mt_pack, str(e).splitlines()[0]) from None


def load_tts(plan: PairPlan, threads: int = 1):
    if plan.tts_pack is None:
        return None
    from app.backends.piper_tts import PiperTTS  # Piper and ONNX Runtime load with a voice only

    d = store.get(plan.tts_pack).path
    try:
        return PiperTTS(str(d / "voice.onnx"), str(d / "voice.onnx.json"), name=plan.tts_pack, threads=threads)
    except Exception as e:  # onnxruntime raises its own exception types for bad files
        raise ModelDamaged(plan.tts_pack, str(e).splitlines()[0][:120]) from None


def final_mt_pack(plan: PairPlan, choice: str = "auto") -> str | None:
    """The LLM pack the second pass translates with, or None (the pair's own translator).
    ``choice``: auto (the 1.5B pack when it and its runtime are installed), opus, or a pack id
    (missing: a one-line error naming its install command)."""
    if choice not in FINAL_MT_CHOICES:
        raise UserError(f"--final-mt must be one of {', '.join(FINAL_MT_CHOICES)}, got {choice[:30]!r}")
    if choice == "opus" or plan.mt_pack is None:
        return None
    if (plan.src, plan.tgt) != ("zh", "en"):
        if choice == "auto":
            return None
        raise UserError(f"the LLM translator is for zh→en finals only (this session is {plan.src}→{plan.tgt})")
    inst = store.installed()
    pack = AUTO_LLM if choice == "auto" else choice
    if choice == "auto" and (pack not in inst or "llama-cpp-runtime" not in inst):
        return None
    store.get(pack)  # ModelMissing / damaged: names the command
    store.get("llama-cpp-runtime")
    return pack


def load_final_mt(plan: PairPlan, choice: str = "auto", threads: int = 2):
    """The second pass's LLM translator (app.backends.llama_mt) or None."""
    pack = final_mt_pack(plan, choice)
    if pack is None:
        return None
    if sys.version_info[:2] != (3, 11) or platform.machine() not in ("x86_64", "AMD64") or sys.platform != "linux":
        raise UserError("the llama.cpp runtime pack is built for CPython 3.11 on x86-64 Linux; "
                        f"this is Python {platform.python_version()} on {sys.platform}/{platform.machine()} "
                        "(use --final-mt opus)")
    from app.backends.llama_mt import LlamaTranslator  # llama.cpp loads with a model only

    runtime = store.get("llama-cpp-runtime").path / "_llama_cpp_cpu.so"
    gguf = store.get(pack).path / "model.gguf"
    try:
        return LlamaTranslator(gguf, runtime, name=pack, threads=threads, source_lang=plan.src,
                               target_lang=plan.tgt)
    except (RuntimeError, OSError, ImportError) as e:
        raise ModelDamaged(pack, str(e).splitlines()[0][:120]) from None
