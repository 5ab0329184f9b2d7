"""Front-end kernel benchmark (CPU): app.accel against faster-whisper's features and soxr.

    python bench/accel.py               # prints a markdown table, writes bench/out/accel.json
    python bench/accel.py --repeats 9

On 30 s of real speech (the first 30 s of resources/demo/zh_meeting_demo.wav, or the test clips
concatenated if it is missing):

1. log-mel of one 30 s window: the NumPy reference, the Numba CPU kernel and faster-whisper's
   ``FeatureExtractor`` (median of N runs after a warm-up, which also pays Numba's compile);
2. a streaming loop as the ASR backend runs it: the window grows by 0.5 s per step up to 30 s
   and features are recomputed each step, either from scratch (faster-whisper, NumPy reference)
   or by ``IncrementalLogMel`` (NumPy / Numba CPU); total front-end time over the 60 steps;
3. the resampler 48000 / 44100 / 8000 -> 16000 (input made from the speech with soxr HQ): time
   one-shot and in 20 ms blocks, against soxr, and SNR against ``soxr.resample(..., "HQ")``.
   Alignment: our resampler trims its own filter delay (a whole number of output samples by
   design), so output k is compared with soxr's output k directly (lag 0); the best lag in
   [-3, 3] is reported as a check;
4. frame features, mixer, int8 and low-rank projection, NumPy vs Numba CPU, for reference.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr
from faster_whisper.feature_extractor import FeatureExtractor

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.accel import dispatch  # noqa: E402
from app.accel.features import frame_features  # noqa: E402
from app.accel.logmel import IncrementalLogMel, log_mel_reference  # noqa: E402
from app.accel.mix import mix_duck  # noqa: E402
from app.accel.quant import lowrank_basis, lowrank_project, quantize_int8  # noqa: E402
from app.accel.resample import StreamingResampler, resample_oneshot  # noqa: E402
from app.core.audio import SR  # noqa: E402
SECONDS = 30


def load_speech() -> tuple[np.ndarray, str]:
    demo = ROOT / "resources" / "demo" / "zh_meeting_demo.wav"
    if demo.is_file():
        a, sr = sf.read(str(demo), dtype="float32")
        if sr == SR and len(a) >= SECONDS * SR:
            return a[: SECONDS * SR], f"{demo.relative_to(ROOT)} [0, {SECONDS}) s"
    clips = [sf.read(str(p), dtype="float32")[0] for p in sorted((ROOT / "tests" / "data").glob("*.wav"))]
    a = np.concatenate(clips)
    while len(a) < SECONDS * SR:
        a = np.concatenate([a, a])
    return a[: SECONDS * SR], "tests/data/*.wav concatenated"


def median_ms(fn, repeats: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts) * 1e3)


def snr_db(ref: np.ndarray, x: np.ndarray, lag: int = 0) -> float:
    ref, x = ref.astype(np.float64), x.astype(np.float64)
    if lag > 0:
        ref = ref[lag:]
    elif lag < 0:
        x = x[-lag:]
    n = min(len(ref), len(x))
    return float(10 * np.log10(np.sum(ref[:n] ** 2) / np.sum((ref[:n] - x[:n]) ** 2)))


def bench_logmel(a, repeats, cpu):
    fe = FeatureExtractor(feature_size=80)
    ref = fe(a)
    res = {"fw_ms": median_ms(lambda: fe(a), repeats),
           "numpy_ms": median_ms(lambda: log_mel_reference(a, 80), repeats)}
    if cpu:
        t = time.perf_counter()
        log_mel_reference(a[:SR], 80, backend="cpu")
        res["cpu_first_call_ms"] = (time.perf_counter() - t) * 1e3  # compile or cache load
        res["cpu_ms"] = median_ms(lambda: log_mel_reference(a, 80, backend="cpu"), repeats)
        res["cpu_max_abs_diff_vs_fw"] = float(np.abs(log_mel_reference(a, 80, backend="cpu") - ref).max())
        res["fw_over_cpu"] = res["fw_ms"] / res["cpu_ms"]
        res["numpy_over_cpu"] = res["numpy_ms"] / res["cpu_ms"]
    res["numpy_max_abs_diff_vs_fw"] = float(np.abs(log_mel_reference(a, 80) - ref).max())
    return res


def bench_streaming(a, repeats, cpu):
    """Window [0, 0.5 k s) for k = 1..60: total features time per strategy."""
    fe = FeatureExtractor(feature_size=80)
    ends = [SR // 2 * k for k in range(1, 2 * SECONDS + 1)]

    def full_fw():
        for e in ends:
            fe(a[:e])

    def full_numpy():
        for e in ends:
            log_mel_reference(a[:e], 80)

    def incremental(backend):
        def run():
            inc = IncrementalLogMel(80, backend=backend)
            for e in ends:
                inc.features(a[:e], 0)
            return inc
        return run

    res = {"steps": len(ends),
           "full_fw_ms": median_ms(full_fw, repeats, warmup=0),
           "full_numpy_ms": median_ms(full_numpy, repeats, warmup=0),
           "inc_numpy_ms": median_ms(incremental("numpy"), repeats)}
    inc = incremental("numpy")()
    res["inc_frames_computed"] = inc.frames_computed
    res["full_frames_computed"] = sum((e + 160) // 160 for e in ends)
    if cpu:
        res["inc_cpu_ms"] = median_ms(incremental("cpu"), repeats)
        res["full_fw_over_inc_cpu"] = res["full_fw_ms"] / res["inc_cpu_ms"]
    res["full_fw_over_inc_numpy"] = res["full_fw_ms"] / res["inc_numpy_ms"]
    res["full_numpy_over_inc_numpy"] = res["full_numpy_ms"] / res["inc_numpy_ms"]
    # the last step must still equal a from-scratch computation
    res["last_step_max_abs_diff_vs_fw"] = float(np.abs(inc.features(a, 0) - fe(a)).max())
    return res


def bench_resampler(a, repeats, cpu):
    out = {}
    for sr_in in (48000, 44100, 8000):
        x = soxr.resample(a, SR, sr_in, quality="HQ").astype(np.float32)
        ref = soxr.resample(x, sr_in, SR, quality="HQ")
        block = sr_in // 50  # 20 ms

        def soxr_stream():
            s = soxr.ResampleStream(sr_in, SR, 1, dtype="float32", quality="HQ")
            for i in range(0, len(x), block):
                s.resample_chunk(x[i : i + block], last=i + block >= len(x))

        r = {"soxr_ms": median_ms(lambda: soxr.resample(x, sr_in, SR, quality="HQ"), repeats),
             "soxr_20ms_blocks_ms": median_ms(soxr_stream, repeats)}
        backends = ["numpy"] + (["cpu"] if cpu else [])
        for b in backends:
            y = resample_oneshot(x, sr_in, backend=b)
            reps = repeats if b != "numpy" else max(1, min(repeats, 3))  # the reference is slow
            r[f"{b}_ms"] = median_ms(lambda: resample_oneshot(x, sr_in, backend=b), reps)
            r[f"{b}_snr_db"] = snr_db(ref, y)
            r[f"{b}_best_lag"] = max(range(-3, 4), key=lambda lag: snr_db(ref, y, lag))
        if cpu:
            def ours_stream():
                s = StreamingResampler(sr_in, backend="cpu")
                for i in range(0, len(x), block):
                    s.process(x[i : i + block])
                s.flush()

            r["cpu_20ms_blocks_ms"] = median_ms(ours_stream, repeats)
        rs = StreamingResampler(sr_in, backend="numpy")
        r.update(up=rs.up, down=rs.down, taps_per_output=rs.n_taps, delay_out_samples=rs.delay,
                 length=len(y), soxr_length=len(ref))
        out[str(sr_in)] = r
    return out


def bench_misc(a, repeats, cpu):
    dub = np.roll(a, SR * 3) * (np.arange(len(a)) % (4 * SR) < 2 * SR)
    feats = log_mel_reference(a, 80).T.copy()
    basis = lowrank_basis(feats, 16)
    cases = {
        "frame_features (512)": lambda b: frame_features(a, 512, backend=b),
        "mix_duck (30 s, 20 ms blocks)": lambda b: _mix_blocks(a, dub, b),
        "quantize_int8 (3001x80)": lambda b: quantize_int8(feats, backend=b),
        "lowrank_project (3001x80 -> 16)": lambda b: lowrank_project(feats, basis, backend=b),
    }
    out = {}
    for name, fn in cases.items():
        out[name] = {b: median_ms(lambda: fn(b), repeats) for b in (["numpy", "cpu"] if cpu else ["numpy"])}
    return out


def _mix_blocks(a, dub, backend):
    state = None
    for i in range(0, len(a), 320):
        _, state = mix_duck(a[i : i + 320], dub[i : i + 320], state, backend=backend)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "accel.json")
    args = ap.parse_args()
    repeats = max(5, args.repeats)
    cpu = dispatch.numba_available()
    a, source = load_speech()
    conditions = {"cpu_count": os.cpu_count(), "machine": platform.machine(), "processor": platform.processor(),
                  "python": platform.python_version(), "numpy": np.__version__, "repeats": repeats,
                  "audio": source, "loadavg_at_start": os.getloadavg()}
    if cpu:
        import numba  # optional (the "cpu" rows): only when it imports

        conditions.update(numba=numba.__version__, numba_threads=numba.get_num_threads())
    print("running log-mel ...", file=sys.stderr)
    lm = bench_logmel(a, repeats, cpu)
    if cpu:
        import numba  # optional (the "cpu" rows): only when it imports

        conditions["numba_threading_layer"] = numba.threading_layer()
    print("running streaming loop ...", file=sys.stderr)
    st = bench_streaming(a, repeats, cpu)
    print("running resampler ...", file=sys.stderr)
    rs = bench_resampler(a, repeats, cpu)
    print("running other kernels ...", file=sys.stderr)
    misc = bench_misc(a, repeats, cpu)
    conditions["loadavg_at_end"] = os.getloadavg()
    result = {"conditions": conditions, "logmel_30s": lm, "streaming_30s": st, "resampler_30s": rs, "misc_30s": misc}

    f = lambda v: "—" if v is None else f"{v:.1f}"  # noqa: E731
    print(f"\n## app.accel front-end, {SECONDS} s of speech ({source})\n")
    print(f"{conditions['cpu_count']} CPUs, numpy {np.__version__}, numba {conditions.get('numba', 'missing')}"
          f" ({conditions.get('numba_threads', 0)} threads, {conditions.get('numba_threading_layer', '-')}),"
          f" median of {repeats}, load avg at start {conditions['loadavg_at_start'][0]:.2f}\n")
    print("| log-mel, one 30 s window | ms | vs faster-whisper |")
    print("|---|---:|---:|")
    print(f"| faster-whisper FeatureExtractor | {f(lm['fw_ms'])} | 1.0x |")
    print(f"| NumPy reference | {f(lm['numpy_ms'])} | {lm['fw_ms'] / lm['numpy_ms']:.2f}x |")
    if cpu:
        print(f"| Numba CPU | {f(lm['cpu_ms'])} | **{lm['fw_over_cpu']:.2f}x** |")
    print(f"\nmax |diff| vs faster-whisper: NumPy {lm['numpy_max_abs_diff_vs_fw']:.1e}"
          + (f", Numba CPU {lm['cpu_max_abs_diff_vs_fw']:.1e}" if cpu else ""))
    print(f"\n| streaming, 0.5 s steps to 30 s ({st['steps']} windows) | total ms | vs full faster-whisper |")
    print("|---|---:|---:|")
    print(f"| full recompute, faster-whisper | {f(st['full_fw_ms'])} | 1.0x |")
    print(f"| full recompute, NumPy reference | {f(st['full_numpy_ms'])} | {st['full_fw_ms'] / st['full_numpy_ms']:.2f}x |")
    print(f"| IncrementalLogMel, NumPy | {f(st['inc_numpy_ms'])} | {st['full_fw_over_inc_numpy']:.1f}x |")
    if cpu:
        print(f"| IncrementalLogMel, Numba CPU | {f(st['inc_cpu_ms'])} | **{st['full_fw_over_inc_cpu']:.1f}x** |")
    print(f"\nframes transformed: incremental {st['inc_frames_computed']}, full {st['full_frames_computed']}")
    print("\n| resampler -> 16 kHz | ours one-shot ms | ours 20 ms blocks ms | soxr HQ ms | soxr 20 ms blocks ms "
          "| SNR vs soxr (lag 0) | taps/output |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for sr_in, r in rs.items():
        b = "cpu" if cpu else "numpy"
        print(f"| {sr_in} ({b}) | {f(r[f'{b}_ms'])} | {f(r.get('cpu_20ms_blocks_ms'))} | {f(r['soxr_ms'])} "
              f"| {f(r['soxr_20ms_blocks_ms'])} | {r[f'{b}_snr_db']:.1f} dB (best lag {r[f'{b}_best_lag']}) "
              f"| {r['taps_per_output']} |")
    print("\n| other kernels, 30 s | NumPy ms | Numba CPU ms |")
    print("|---|---:|---:|")
    for name, r in misc.items():
        print(f"| {name} | {f(r['numpy'])} | {f(r.get('cpu'))} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"\nwrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()
