"""app.accel kernels: every backend against the NumPy reference, on real speech and edge cases.

* ``numpy`` and ``cpu`` (Numba njit) run in this process.
* ``cuda`` runs here under the Numba CUDA simulator, in a subprocess, because the simulator must
  be switched on (NUMBA_ENABLE_CUDASIM=1) before ``numba.cuda`` is first imported. Inputs are
  tiny: the simulator runs every GPU thread as a Python thread.
* ``@pytest.mark.gpu`` tests run the CUDA kernels on a real GPU and skip without one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import soundfile as sf
import soxr

from app.accel import dispatch
from app.accel.dispatch import choose_backend
from app.accel.features import frame_features
from app.accel.logmel import HOP, IncrementalLogMel, log_mel_frames, log_mel_reference, mel_filters
from app.accel.mix import DuckState, mix_duck
from app.accel.quant import (dequantize_int8, lowrank_basis, lowrank_project, lowrank_reconstruct,
                             quantize_int8)
from app.accel.resample import StreamingResampler, resample_oneshot

from ..conftest import DATA, ROOT

HAS_NUMBA = dispatch.numba_available()
HAS_GPU = dispatch.cuda_available() and os.environ.get("NUMBA_ENABLE_CUDASIM") != "1"
HOST = ["numpy", pytest.param("cpu", marks=pytest.mark.skipif(not HAS_NUMBA, reason="numba missing"))]
COMPILED = [pytest.param("cpu", marks=pytest.mark.skipif(not HAS_NUMBA, reason="numba missing")),
            pytest.param("cuda", marks=[pytest.mark.gpu,
                                        pytest.mark.skipif(not HAS_GPU, reason="no CUDA GPU")])]


def _read(name: str) -> np.ndarray:
    a, sr = sf.read(str(DATA / name), dtype="float32")
    assert sr == 16000
    return a


@pytest.fixture(scope="module")
def speech():
    return _read("zh_demo_20s.wav")


@pytest.fixture(scope="module")
def jfk():
    return _read("jfk.wav")


def edge_signals(speech: np.ndarray) -> dict[str, np.ndarray]:
    sq = np.where((np.arange(4003) // 37) % 2 == 0, 1.0, -1.0).astype(np.float32)
    return {
        "empty": np.zeros(0, np.float32),
        "one": np.array([0.5], np.float32),
        "odd": speech[16000:17001].copy(),
        "silence": np.zeros(3001, np.float32),
        "clipped": np.clip(speech[20000:24001] * 30.0, -1.0, 1.0),
        "square": sq,
    }


BAD = [np.array([0.0, np.nan, 0.0] * 300, np.float32), np.array([0.1] * 900 + [np.inf], np.float32)]


# -- dispatch ---------------------------------------------------------------------------------


def test_choose_backend(monkeypatch):
    monkeypatch.delenv("RELAY_ACCEL", raising=False)
    assert choose_backend("numpy") == "numpy"
    if HAS_NUMBA:
        assert choose_backend("cpu") == "cpu"
    assert choose_backend("auto") == ("cuda" if dispatch.cuda_available() else "cpu" if HAS_NUMBA else "numpy")
    if not dispatch.cuda_available():
        with pytest.raises(ValueError, match="cuda"):
            choose_backend("cuda")
    with pytest.raises(ValueError, match="unknown accel backend"):
        choose_backend("tpu")
    monkeypatch.setenv("RELAY_ACCEL", "numpy")
    assert choose_backend() == "numpy"
    assert choose_backend("auto") == "numpy"
    if HAS_NUMBA:
        assert choose_backend("cpu") == "cpu"  # an explicit request beats the environment
    monkeypatch.setenv("RELAY_ACCEL", "bogus")
    with pytest.raises(ValueError, match="RELAY_ACCEL"):
        choose_backend()


def test_numpy_backend_works_without_numba():
    code = textwrap.dedent("""
        import sys
        sys.modules["numba"] = None  # makes `import numba` raise ImportError
        import numpy as np
        from app.accel.dispatch import choose_backend
        from app.accel import log_mel_reference, frame_features, quantize_int8
        assert choose_backend("auto") == "numpy", choose_backend("auto")
        try:
            choose_backend("cpu")
        except ValueError as e:
            assert "Numba" in str(e)
        else:
            raise AssertionError("cpu without numba must raise")
        x = np.random.default_rng(0).standard_normal(4000).astype(np.float32) * 0.1
        assert log_mel_reference(x, backend="auto").shape == (80, 26)
        assert frame_features(x)[0].shape == (8,)
        assert quantize_int8(x.reshape(40, 100))[0].dtype == np.int8
        print("OK")
    """)
    env = {**os.environ, "RELAY_ACCEL": ""}
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-2000:]


# -- log-mel ------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", COMPILED)
@pytest.mark.parametrize("n_mels", [80, 128])
def test_log_mel_matches_reference_on_speech(speech, backend, n_mels):
    for n in (401, 16000, 48123, len(speech)):
        ref = log_mel_reference(speech[:n], n_mels)
        got = log_mel_reference(speech[:n], n_mels, backend=backend)
        assert got.shape == ref.shape
        assert np.abs(got - ref).max() <= 1e-3


@pytest.mark.parametrize("backend", COMPILED)
def test_log_mel_frames_at_arbitrary_starts(speech, backend):
    filters = mel_filters(80)
    starts = np.array([0, 7, 160, 1001, 33333, len(speech) - 400, 5], np.int64)
    ref = log_mel_frames(speech, starts, filters, backend="numpy")
    got = log_mel_frames(speech, starts, filters, backend=backend)
    assert got.shape == (80, len(starts))
    assert np.abs(got - ref).max() <= 1e-3  # raw log10; Whisper's scaling divides this by 4
    with pytest.raises(ValueError, match="frame starts"):
        log_mel_frames(speech[:500], np.array([101]), filters, backend=backend)


@pytest.mark.parametrize("backend", COMPILED)
def test_incremental_log_mel_backends(speech, backend):
    inc = IncrementalLogMel(80, backend=backend)
    assert inc.backend == backend
    windows = [(0, 8000 * k) for k in range(1, 12)] + [(48000, 48000 + 8000 * k) for k in range(2, 8)]
    windows += [(33, 5000), (HOP * 3, HOP * 3 + 799)]  # unaligned start, short window
    full = 0
    for start, end in windows:
        ref = log_mel_reference(speech[start:end], 80)
        got = inc.features(speech[start:end], start)
        assert got.shape == ref.shape
        assert np.abs(got - ref).max() <= 1e-3
        full += ref.shape[1]
    assert inc.frames_computed < full / 2


@pytest.mark.parametrize("backend", COMPILED)
def test_log_mel_edge_cases(speech, backend):
    for name, x in edge_signals(speech).items():
        ref = log_mel_reference(x, 80)
        got = log_mel_reference(x, 80, backend=backend)
        assert got.shape == ref.shape == (80, (len(x) + HOP) // HOP), name
        assert np.isfinite(got).all(), name
        assert np.abs(got - ref).max() <= 1e-3, name
    for bad in BAD:
        with pytest.raises(ValueError, match="NaN or Inf"):
            log_mel_reference(bad, backend=backend)
        with pytest.raises(ValueError, match="NaN or Inf"):
            IncrementalLogMel(backend=backend).features(bad, 0)


def test_incremental_default_backend_is_numpy():
    assert IncrementalLogMel(80).backend == "numpy"


# -- resampler ----------------------------------------------------------------------------------

RATES = [48000, 44100, 8000]


def _at_rate(x: np.ndarray, sr: int) -> np.ndarray:
    return soxr.resample(x, 16000, sr, quality="HQ").astype(np.float32)


@pytest.mark.parametrize("backend", COMPILED)
@pytest.mark.parametrize("sr_in", RATES)
def test_resampler_matches_reference(speech, backend, sr_in):
    x = _at_rate(speech[: 2 * 16000], sr_in)
    ref = resample_oneshot(x, sr_in, backend="numpy")
    got = resample_oneshot(x, sr_in, backend=backend)
    assert got.shape == ref.shape == (-(-len(x) * 16000 // sr_in),)
    assert np.abs(got - ref).max() <= 1e-5


@pytest.mark.parametrize("backend", HOST)
@pytest.mark.parametrize("sr_in", RATES)
def test_resampler_blocks_equal_one_shot(speech, backend, sr_in):
    x = _at_rate(speech[: 16000], sr_in)
    one_shot = resample_oneshot(x, sr_in, backend=backend)
    rng = np.random.default_rng(sr_in)
    r = StreamingResampler(sr_in, backend=backend)
    outs, i = [], 0
    while i < len(x):
        k = int(rng.choice([0, 1, 2, 7, 160, 441, 960, 3001]))
        outs.append(r.process(x[i : i + k]))
        i += k
    outs.append(r.flush())
    assert np.array_equal(np.concatenate(outs), one_shot)  # no seams: bit-identical
    # flush reset the stream: the object can be reused and gives the same result again
    assert np.array_equal(np.concatenate([r.process(x), r.flush()]), one_shot)


@pytest.mark.parametrize("sr_in", RATES)
def test_resampler_snr_vs_soxr(speech, sr_in):
    """Output k is aligned with input time k/16000 (the filter delay is trimmed), as soxr's is."""
    x = _at_rate(speech[16000 : 5 * 16000], sr_in)
    ref = soxr.resample(x, sr_in, 16000, quality="HQ")
    got = resample_oneshot(x, sr_in, backend="cpu" if HAS_NUMBA else "numpy")
    n = min(len(ref), len(got))
    err = ref[:n].astype(np.float64) - got[:n]
    snr = 10 * np.log10(np.sum(ref[:n].astype(np.float64) ** 2) / np.sum(err**2))
    assert snr > 40, snr


@pytest.mark.parametrize("backend", HOST)
def test_resampler_edge_cases(speech, backend):
    for sr_in in RATES:
        for name, x in edge_signals(speech).items():
            ref = resample_oneshot(x, sr_in, backend="numpy")
            got = resample_oneshot(x, sr_in, backend=backend)
            assert got.shape == ref.shape == (-(-len(x) * 16000 // sr_in),), (sr_in, name)
            assert np.abs(got - ref).max(initial=0) <= 1e-5, (sr_in, name)
            if name == "silence":
                assert not got.any()
        r = StreamingResampler(sr_in, backend=backend)
        assert r.flush().size == 0  # nothing in, nothing out
        for bad in BAD:
            with pytest.raises(ValueError, match="NaN or Inf"):
                r.process(bad)
    with pytest.raises(ValueError):
        StreamingResampler(0)


# -- frame features ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", COMPILED)
def test_frame_features_match_reference(speech, jfk, backend):
    for x in (speech, jfk[:100001]):
        for frame in (512, 400, 1):
            r_ref, z_ref = frame_features(x, frame, backend="numpy")
            r, z = frame_features(x, frame, backend=backend)
            assert r.shape == z.shape == (-(-len(x) // frame),)
            assert np.abs(r - r_ref).max() <= 1e-3  # dB
            assert np.abs(z - z_ref).max() <= 1e-6


@pytest.mark.parametrize("backend", HOST + COMPILED[1:])
def test_frame_features_edge_cases(speech, backend):
    for name, x in edge_signals(speech).items():
        r_ref, z_ref = frame_features(x, 512, backend="numpy")
        r, z = frame_features(x, 512, backend=backend)
        assert r.shape == z.shape == r_ref.shape, name
        assert np.abs(r - r_ref).max(initial=0) <= 1e-3 and np.abs(z - z_ref).max(initial=0) <= 1e-6, name
    r, z = frame_features(np.zeros(1000, np.float32), 512, backend=backend)
    assert np.all(r == -100) and np.all(z == 0)
    r, z = frame_features(np.tile(np.float32([1, -1]), 512), 512, backend=backend)
    assert np.allclose(r, 0, atol=1e-4) and np.allclose(z, 1)
    for bad in BAD:
        with pytest.raises(ValueError, match="NaN or Inf"):
            frame_features(bad, backend=backend)
    with pytest.raises(ValueError):
        frame_features(speech, 0, backend=backend)


# -- mixer ----------------------------------------------------------------------------------------


def _dub_for(speech: np.ndarray, jfk: np.ndarray, n: int) -> np.ndarray:
    dub = np.zeros(n, np.float32)
    dub[n // 4 : n // 4 + 16000] = jfk[16000:32000]  # one second of dub speech
    dub[3 * n // 4 : 3 * n // 4 + 8000] = jfk[40000:48000]
    return dub


@pytest.mark.parametrize("backend", COMPILED)
def test_mix_matches_reference(speech, jfk, backend):
    n = 4 * 16000
    orig, dub = speech[:n], _dub_for(speech, jfk, n)
    o_ref, s_ref, g_ref = mix_duck(orig, dub, None, backend="numpy", return_gain=True)
    o, s, g = mix_duck(orig, dub, None, backend=backend, return_gain=True)
    assert np.abs(o - o_ref).max() <= 1e-5 and np.abs(g - g_ref).max() <= 1e-5
    assert abs(s.gain - s_ref.gain) <= 1e-5 and s.hold == s_ref.hold


@pytest.mark.parametrize("backend", HOST)
def test_mix_envelope_is_ramped_and_state_carries(speech, jfk, backend):
    sr, ramp_ms, duck = 16000, 30.0, 0.25
    n = 4 * sr
    orig, dub = speech[:n], _dub_for(speech, jfk, n)
    one, _, g_one = mix_duck(orig, dub, None, duck, ramp_ms, sr, backend=backend, return_gain=True)
    # block by block, carrying the state, gives the same mix and envelope
    state, outs, gains = None, [], []
    for i in range(0, n, 333):
        o, state, g = mix_duck(orig[i : i + 333], dub[i : i + 333], state, duck, ramp_ms, sr,
                               backend=backend, return_gain=True)
        outs.append(o)
        gains.append(g)
    g_blocks = np.concatenate(gains)
    assert np.abs(np.concatenate(outs) - one).max() <= 1e-6
    assert np.abs(g_blocks - g_one).max() <= 1e-6
    ramp_samples = ramp_ms * sr / 1000
    full = np.concatenate([[1.0], g_blocks])
    assert np.abs(np.diff(full)).max() <= 1 / ramp_samples + 1e-6  # no clicks
    assert np.isclose(g_one.min(), duck)  # it does duck while the dub talks ...
    assert np.isclose(g_one[n // 4 - 1], 1.0) and np.isclose(g_one[n // 4 + 8000], duck)
    assert np.isclose(g_one[3 * n // 4 - 1], 1.0)  # ... and recovers in between
    # the ramp takes ramp_ms: from the first dub sample, duck_gain is reached after ramp_samples
    k = n // 4 + int(np.argmax(np.abs(dub[n // 4 :]) > 1e-3))
    assert g_one[k + int(ramp_samples) - 2] > duck and np.isclose(g_one[k + int(ramp_samples) + 1], duck)


@pytest.mark.parametrize("backend", HOST + COMPILED[1:])
def test_mix_edge_cases(speech, backend):
    e = edge_signals(speech)
    for name, x in e.items():
        for dub in (None, x, -x):
            o_ref, s_ref = mix_duck(x, dub, None, backend="numpy")
            o, s = mix_duck(x, dub, DuckState(), backend=backend)
            assert o.shape == x.shape, name
            assert np.abs(o).max(initial=0) <= 1.0, name  # clipping-safe even at 2x full scale
            assert np.abs(o - o_ref).max(initial=0) <= 1e-5, name
            assert abs(s.gain - s_ref.gain) <= 1e-5 and s.hold == s_ref.hold, name
    full = np.ones(1000, np.float32)
    o, _ = mix_duck(full, full, None, duck_gain=1.0, backend=backend)
    assert 0.99 < o.max() <= 1.0  # soft clip: near but not past full scale
    o, _ = mix_duck(full * 0.5, None, None, backend=backend)
    assert np.array_equal(o, full * 0.5)  # below the knee the mixer is transparent
    with pytest.raises(ValueError, match="samples"):
        mix_duck(full, full[:10], None, backend=backend)
    for bad in BAD:
        with pytest.raises(ValueError, match="NaN or Inf"):
            mix_duck(bad, None, None, backend=backend)
        with pytest.raises(ValueError, match="NaN or Inf"):
            mix_duck(np.zeros_like(bad), bad, None, backend=backend)


# -- int8 quantisation and low-rank projection --------------------------------------------------


@pytest.fixture(scope="module")
def mel_rows(speech):
    return log_mel_reference(speech, 80).T.copy()  # (frames, 80): real features to compress


@pytest.mark.parametrize("backend", HOST + COMPILED[1:])
def test_quantize_matches_reference(mel_rows, speech, backend):
    for x in (mel_rows, speech[: 160 * 333].reshape(333, 160), mel_rows[:1, :1]):
        q_ref, s_ref = quantize_int8(x, backend="numpy")
        q, s = quantize_int8(x, backend=backend)
        assert q.dtype == np.int8 and s.dtype == np.float32
        assert np.array_equal(q, q_ref) and np.array_equal(s, s_ref)
        assert np.abs(q).max() <= 127
        back = dequantize_int8(q, s, backend=backend)
        assert np.array_equal(back, dequantize_int8(q, s, backend="numpy"))
        assert np.all(np.abs(back - x) <= s[:, None] / 2 + 1e-6)


@pytest.mark.parametrize("backend", HOST + COMPILED[1:])
def test_quantize_edge_cases(backend):
    for shape in ((0, 5), (5, 0), (0, 0)):
        q, s = quantize_int8(np.zeros(shape, np.float32), backend=backend)
        assert q.shape == shape and s.shape == (shape[0],)
        assert dequantize_int8(q, s, backend=backend).shape == shape
    x = np.array([[0.0, 0.0], [1.0, -1.0], [1e-30, -3e-31]], np.float32)
    q, s = quantize_int8(x, backend=backend)
    assert np.array_equal(q, [[0, 0], [127, -127], [127, -38]]) and s[0] == 0
    with pytest.raises(ValueError, match="NaN or Inf"):
        quantize_int8(np.array([[1.0, np.nan]]), backend=backend)
    with pytest.raises(ValueError, match="2-D"):
        quantize_int8(np.zeros(4), backend=backend)
    with pytest.raises(ValueError, match="one scale per row"):
        dequantize_int8(np.zeros((2, 2), np.int8), np.ones(3), backend=backend)


def test_lowrank_basis(mel_rows):
    b = lowrank_basis(mel_rows, 16)
    assert b.shape == (80, 16) and b.dtype == np.float32
    assert np.allclose(b.T @ b, np.eye(16), atol=1e-5)
    full = lowrank_basis(mel_rows, 80)  # full rank reconstructs exactly
    assert np.abs(lowrank_reconstruct(lowrank_project(mel_rows, full, backend="numpy"), full) - mel_rows).max() < 1e-3
    # more rank, less error
    errs = [np.linalg.norm(lowrank_reconstruct(lowrank_project(mel_rows, lowrank_basis(mel_rows, k), backend="numpy"),
                                               lowrank_basis(mel_rows, k)) - mel_rows) for k in (2, 8, 32)]
    assert errs[0] > errs[1] > errs[2]
    with pytest.raises(ValueError, match="rank"):
        lowrank_basis(mel_rows, 81)
    with pytest.raises(ValueError, match="NaN or Inf"):
        lowrank_basis(np.array([[np.inf, 1.0]]), 1)


@pytest.mark.parametrize("backend", HOST + COMPILED[1:])
def test_lowrank_project_matches_reference(mel_rows, backend):
    b = lowrank_basis(mel_rows, 16)
    for x in (mel_rows, mel_rows[:1], mel_rows[:0], np.clip(mel_rows * 50, -1, 1)):
        ref = lowrank_project(x, b, backend="numpy")
        got = lowrank_project(x, b, backend=backend)
        assert got.shape == ref.shape == (len(x), 16)
        assert np.abs(got - ref).max(initial=0) <= 1e-4 * max(1.0, np.abs(ref).max(initial=0))
    with pytest.raises(ValueError, match="rows"):
        lowrank_project(mel_rows, b[:10], backend=backend)
    with pytest.raises(ValueError, match="NaN or Inf"):
        lowrank_project(np.full((2, 80), np.nan, np.float32), b, backend=backend)


# -- CUDA kernels under the simulator -------------------------------------------------------------

_SIM_SCRIPT = r"""
import numpy as np, soundfile as sf
from app.accel.dispatch import choose_backend
from app.accel.features import frame_features
from app.accel.logmel import log_mel_frames, log_mel_reference, mel_filters
from app.accel.mix import mix_duck
from app.accel.quant import dequantize_int8, lowrank_basis, lowrank_project, quantize_int8
from app.accel.resample import StreamingResampler, resample_oneshot

assert choose_backend("auto") == "cuda"
speech, _ = sf.read("tests/data/jfk.wav", dtype="float32")
x = speech[20000:20000 + 2000]
edges = [np.zeros(0, np.float32), np.float32([0.5]), np.zeros(301, np.float32),
         np.clip(x[:333] * 30, -1, 1)]
C = "cuda"

def close(a, b, tol, what):
    assert a.shape == b.shape, (what, a.shape, b.shape)
    d = float(np.abs(a.astype(np.float64) - b).max(initial=0))
    assert d <= tol, (what, d)

# log-mel: raw frames at arbitrary starts, and whole windows (1 frame each). ~0.5 s per frame in
# the simulator; IncrementalLogMel only calls the same engine and is covered on cpu / real GPU.
f = mel_filters(80)
st = np.array([7, 1001], np.int64)
close(log_mel_frames(x, st, f, backend=C), log_mel_frames(x, st, f, backend="numpy"), 1e-3, "frames")
for e in edges[:2]:
    close(log_mel_reference(e, 80, backend=C), log_mel_reference(e, 80), 1e-3, "logmel window")

# resampler: one-shot vs reference per ratio; block by block vs one-shot on 44.1k (160 phases)
for sr_in, n in ((48000, 300), (44100, 300), (8000, 80)):
    z = np.interp(np.arange(n) * 16000 / sr_in, np.arange(len(x)), x).astype(np.float32)
    one = resample_oneshot(z, sr_in, backend=C)
    close(one, resample_oneshot(z, sr_in, backend="numpy"), 1e-5, f"resample {sr_in}")
    if sr_in == 44100:
        r = StreamingResampler(sr_in, backend=C)
        parts = [r.process(z[i:i + 97]) for i in range(0, n, 97)] + [r.flush()]
        assert np.array_equal(np.concatenate(parts), one), sr_in
        for e in edges[:3]:
            close(resample_oneshot(e, sr_in, backend=C), resample_oneshot(e, sr_in, backend="numpy"), 1e-5, "rs edge")

# frame features
for e in (x[:300], edges[0], edges[1]):
    for a, b in zip(frame_features(e, 256, backend=C), frame_features(e, 256, backend="numpy")):
        close(a, b, 1e-3, "frame features")

# mixer: a dub burst inside the block, state carried over two blocks
dub = np.zeros(1500, np.float32); dub[300:900] = speech[30000:30600]
kw = dict(ramp_ms=5.0, hold_ms=10.0, sr=16000, return_gain=True)
o1, s1, g1 = mix_duck(x[:1500], dub, None, backend="numpy", **kw)
o2, s2, g2 = mix_duck(x[:1500], dub, None, backend=C, **kw)
close(o2, o1, 1e-5, "mix"); close(g2, g1, 1e-5, "gain")
assert abs(s1.gain - s2.gain) < 1e-5 and s1.hold == s2.hold
o3, s3, g3 = mix_duck(x[:400], dub[:400], None, backend=C, **kw)
o4, s4, g4 = mix_duck(x[400:1500], dub[400:1500], s3, backend=C, **kw)
close(np.concatenate([g3, g4]), g1, 1e-5, "gain blocks")
for e in (edges[0], edges[1], edges[3]):
    close(mix_duck(e, e, None, backend=C)[0], mix_duck(e, e, None, backend="numpy")[0], 1e-5, "mix edge")

# int8 and low-rank: one real feature row and one all-zero row
X = np.vstack([log_mel_reference(x, 80)[:40, 3], np.zeros(40)]).astype(np.float32)
q, s = quantize_int8(X, backend=C)
q_ref, s_ref = quantize_int8(X, backend="numpy")
assert np.array_equal(q, q_ref) and np.array_equal(s, s_ref) and s[1] == 0
close(dequantize_int8(q, s, backend=C), dequantize_int8(q, s, backend="numpy"), 0, "dequant")
B = lowrank_basis(X, 2)
close(lowrank_project(X, B, backend=C), lowrank_project(X, B, backend="numpy"), 1e-4, "lowrank")

# bad input is rejected before any device work
for fn in (lambda: log_mel_reference(np.float32([np.nan] * 9), backend=C),
           lambda: frame_features(np.float32([np.inf]), backend=C),
           lambda: StreamingResampler(48000, backend=C).process(np.float32([np.nan]))):
    try:
        fn()
    except ValueError:
        pass
    else:
        raise AssertionError("NaN/Inf accepted")
print("SIM-OK")
"""


@pytest.mark.skipif(not HAS_NUMBA, reason="numba missing")
def test_cuda_kernels_under_simulator():
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "RELAY_ACCEL": ""}
    r = subprocess.run([sys.executable, "-c", _SIM_SCRIPT], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "SIM-OK" in r.stdout, (r.stdout[-2000:], r.stderr[-4000:])


# -- real GPU -------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="no CUDA GPU")
@pytest.mark.parametrize("sr_in", RATES)
def test_gpu_resampler_blocks(speech, sr_in):
    x = _at_rate(speech[: 3 * 16000], sr_in)
    one = resample_oneshot(x, sr_in, backend="cuda")
    r = StreamingResampler(sr_in, backend="cuda")
    parts = [r.process(x[i : i + 960]) for i in range(0, len(x), 960)] + [r.flush()]
    assert np.array_equal(np.concatenate(parts), one)
