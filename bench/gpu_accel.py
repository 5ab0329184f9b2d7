"""GPU benchmark for app.accel: Numba CUDA kernels against the CPU paths, and torch.stft features.

    python bench/gpu_accel.py            # on a machine with a CUDA GPU; writes bench/out/gpu_accel.json

Not run in CI or on CPU-only machines: it exits with a message when ``numba.cuda`` sees no GPU.
For every kernel it checks the CUDA result against the NumPy reference before timing, then
reports medians (after a warm-up that pays JIT compilation) for ``cuda``, ``cpu`` (Numba) and
``numpy``. If PyTorch with CUDA is importable it also times Whisper features built on
``torch.stft`` on the GPU (the usual GPU baseline); otherwise that row is skipped.

CUDA timings are wall-clock per call and include the host<->device copies, because that is what
a caller holding NumPy audio pays; the per-stream engines reuse their device buffers.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from app.accel import dispatch  # noqa: E402
from app.accel.features import frame_features  # noqa: E402
from app.accel.logmel import IncrementalLogMel, log_mel_reference, mel_filters  # noqa: E402
from app.accel.mix import mix_duck  # noqa: E402
from app.accel.quant import lowrank_basis, lowrank_project, quantize_int8  # noqa: E402
from app.accel.resample import StreamingResampler, resample_oneshot  # noqa: E402
from app.core.audio import SR  # noqa: E402
from accel import median_ms as _median_ms  # noqa: E402


def median_ms(fn, repeats: int) -> float:
    # two warm-up calls on a GPU: the first compiles the kernel, the second settles the context
    return _median_ms(fn, repeats, warmup=2)


def load_speech(seconds: int) -> np.ndarray:
    a, _ = sf.read(str(ROOT / "resources" / "demo" / "zh_meeting_demo.wav"), dtype="float32")
    while len(a) < seconds * SR:
        a = np.concatenate([a, a])
    return a[: seconds * SR]


def torch_features():
    """Whisper log-mel with torch.stft on the GPU, or None if torch/CUDA is unavailable."""
    try:
        import torch  # optional: the torch.stft comparison row
    except Exception:
        return None
    if not torch.cuda.is_available():
        return None
    dev = torch.device("cuda")
    window = torch.hann_window(400, device=dev)
    filters = torch.from_numpy(mel_filters(80)).to(dev)

    def run(audio: np.ndarray) -> np.ndarray:
        x = torch.from_numpy(audio).to(dev)
        x = torch.nn.functional.pad(x, (0, 160))
        spec = torch.stft(x, 400, 160, window=window, center=True, pad_mode="reflect", return_complex=True)
        power = spec[..., :-1].abs() ** 2
        mel = torch.clamp(filters @ power, min=1e-10).log10()
        mel = torch.maximum(mel, mel.max() - 8.0)
        out = ((mel + 4.0) / 4.0).cpu().numpy()  # .cpu() synchronises
        return out

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "gpu_accel.json")
    args = ap.parse_args()
    if not dispatch.cuda_available():
        print("numba.cuda.is_available() is False: no CUDA GPU here, nothing to benchmark", file=sys.stderr)
        sys.exit(0)
    from numba import cuda  # optional: only once a CUDA GPU was found

    backends = ["cuda", "cpu", "numpy"]
    a = load_speech(args.seconds)
    n = args.repeats
    name = cuda.get_current_device().name
    res: dict = {"device": name.decode() if isinstance(name, bytes) else str(name),
                 "seconds": args.seconds, "repeats": n}

    def check(name, got, ref, tol):
        d = float(np.abs(np.asarray(got, np.float64) - ref).max(initial=0))
        res.setdefault("max_abs_diff_vs_numpy", {})[name] = d
        if d > tol:
            raise SystemExit(f"{name}: CUDA result differs from the NumPy reference by {d} (> {tol})")

    # log-mel, one window
    ref = log_mel_reference(a, 80)
    check("log_mel", log_mel_reference(a, 80, backend="cuda"), ref, 1e-3)
    res["log_mel_ms"] = {b: median_ms(lambda: log_mel_reference(a, 80, backend=b), n) for b in backends}
    tf = torch_features()
    if tf is not None:
        check("log_mel_torch", tf(a), ref, 1e-3)
        res["log_mel_ms"]["torch.stft (GPU)"] = median_ms(lambda: tf(a), n)
    else:
        res["log_mel_ms"]["torch.stft (GPU)"] = None

    # streaming: window grows by 0.5 s up to the full length
    ends = [SR // 2 * k for k in range(1, 2 * args.seconds + 1)]

    def stream(backend):
        inc = IncrementalLogMel(80, backend=backend)
        for e in ends:
            inc.features(a[:e], 0)

    res["streaming_ms"] = {b: median_ms(lambda: stream(b), max(3, n // 3), warmup=1) for b in backends}

    # resampler
    res["resample_ms"] = {}
    for sr_in in (48000, 44100, 8000):
        x = soxr.resample(a, SR, sr_in, quality="HQ").astype(np.float32)
        check(f"resample_{sr_in}", resample_oneshot(x, sr_in, backend="cuda"), resample_oneshot(x, sr_in, backend="cpu"), 1e-4)
        row = {b: median_ms(lambda: resample_oneshot(x, sr_in, backend=b), 3 if b == "numpy" else n, warmup=1)
               for b in backends}
        blk = sr_in // 50

        def blocks(backend):
            r = StreamingResampler(sr_in, backend=backend)
            for i in range(0, len(x), blk):
                r.process(x[i : i + blk])
            r.flush()

        row["cuda_20ms_blocks"] = median_ms(lambda: blocks("cuda"), 3, warmup=1)
        row["cpu_20ms_blocks"] = median_ms(lambda: blocks("cpu"), 3, warmup=1)
        row["soxr"] = median_ms(lambda: soxr.resample(x, sr_in, SR, quality="HQ"), n)
        res["resample_ms"][str(sr_in)] = row

    # the rest, whole arrays
    dub = np.roll(a, 3 * SR) * (np.arange(len(a)) % (4 * SR) < 2 * SR)
    feats = np.ascontiguousarray(np.tile(ref.T, (8, 1)))  # (8 x frames, 80)
    basis = lowrank_basis(feats[:3000], 16)
    check("frame_features", frame_features(a, 512, backend="cuda")[0], frame_features(a, 512, backend="numpy")[0], 1e-3)
    check("mix_duck", mix_duck(a, dub, None, backend="cuda")[0], mix_duck(a, dub, None, backend="numpy")[0], 1e-4)
    check("quantize_int8", quantize_int8(feats, backend="cuda")[0], quantize_int8(feats, backend="numpy")[0], 0)
    check("lowrank_project", lowrank_project(feats, basis, backend="cuda"), lowrank_project(feats, basis, backend="numpy"), 1e-3)
    cases = {"frame_features": lambda b: frame_features(a, 512, backend=b),
             "mix_duck (one call)": lambda b: mix_duck(a, dub, None, backend=b),
             "quantize_int8": lambda b: quantize_int8(feats, backend=b),
             "lowrank_project": lambda b: lowrank_project(feats, basis, backend=b)}
    res["other_ms"] = {k: {b: median_ms(lambda: fn(b), n) for b in backends} for k, fn in cases.items()}

    print(f"\n## app.accel on {res['device']}, {args.seconds} s of speech, median of {n}\n")
    print("| kernel | cuda ms | cpu ms | numpy ms | other |")
    print("|---|---:|---:|---:|---|")

    def row(name, r, other=""):
        print(f"| {name} | {r['cuda']:.2f} | {r['cpu']:.2f} | {r['numpy']:.2f} | {other} |")

    t = res["log_mel_ms"]["torch.stft (GPU)"]
    row("log-mel (one window)", res["log_mel_ms"], f"torch.stft {t:.2f} ms" if t is not None else "torch: n/a")
    row("log-mel streaming loop", res["streaming_ms"])
    for sr_in, r in res["resample_ms"].items():
        row(f"resample {sr_in}", r, f"soxr {r['soxr']:.2f}; 20 ms blocks cuda {r['cuda_20ms_blocks']:.1f} / "
                                    f"cpu {r['cpu_20ms_blocks']:.1f}")
    for k, r in res["other_ms"].items():
        row(k, r)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
