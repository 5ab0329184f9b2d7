"""Source error rate of settings, averaged over step phases (zh_meeting, `--fast`, no TTS).

    python bench/phase_cer.py "" "--first-commit-lookahead 1.0"
    python bench/phase_cer.py --phases 0 0.1 0.2 -- "--asr-step 0.3"

A `--fast` run is deterministic, but streaming recognition is chaotic: moving where the 0.25 s
steps fall by a fraction of a second changes what each step hears, and the CER of one run of this
280-character clip moves by a point or two. This script prepends a little silence (the phase) to
the clip, runs each setting at every phase, and reports each run's CER and the mean, so that a
setting is judged on several realisations instead of one. Settings run interleaved.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from latency import ZH_WAV, run_relay, score, zh_references  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("settings", nargs="+", help='extra flags per setting, e.g. "" "--eager 4"')
    ap.add_argument("--phases", type=float, nargs="+", default=[0.0, 0.06, 0.12, 0.18])
    args = ap.parse_args()
    ref_src, ref_tgt = zh_references()
    audio, sr = sf.read(str(ZH_WAV), dtype="float32")
    results: dict[str, list[float]] = {s: [] for s in args.settings}
    with tempfile.TemporaryDirectory() as tmp:
        for phase in args.phases:
            wav = Path(tmp) / f"phase_{phase:.3f}.wav"
            sf.write(str(wav), np.concatenate([np.zeros(int(phase * sr), np.float32), audio]), sr)
            for setting in args.settings:
                s = run_relay(wav, "zh-en", ["--fast", "--no-tts", *setting.split()])
                r = score(s, ref_src, ref_tgt, "zh")
                results[setting].append(r["src_error_pct"])
                print(f"phase {phase:.2f} {setting or '(defaults)'}: CER {r['src_error_pct']} rtf {s['rtf']}",
                      file=sys.stderr, flush=True)
    print("| setting | " + " | ".join(f"CER % at +{p:.2f} s" for p in args.phases) + " | mean |")
    print("|---|" + "---|" * (len(args.phases) + 1))
    for setting, errs in results.items():
        print(f"| {setting or '(defaults)'} | " + " | ".join(f"{e:.2f}" for e in errs)
              + f" | {statistics.mean(errs):.2f} |")


if __name__ == "__main__":
    main()
