"""Numba's compiled kernels, ahead of the first launch.

Numba compiles the CPU kernels of ``_cpu.py`` the first time each one runs (seconds on two cores)
and keeps the result in its cache (``cache=True``), so only the very first launch pays. For the
desktop bundle that first launch is the one right after installing, so the build pays instead:
``compile_all()`` runs every kernel once through its public wrapper, with the argument types the
app passes (the wrappers normalise dtypes and layouts), so each one is compiled and cached;
``relay --compile-kernels`` runs it, and ``installer/build.sh`` ships the result
(``app.accel.numba_cache``: where the cache lives, and how the frozen app seeds it).

``compile_stats()`` counts, over the kernels, the signatures loaded from the cache and those
compiled in this process; ``relay --self-test`` reports both.
"""

from __future__ import annotations

import sys

import numpy as np

from app.core.audio import SR

from . import features, logmel, mix, quant, resample
from .numba_cache import BUNDLED_DIRNAME, user_cache_path

__all__ = ["BUNDLED_DIRNAME", "compile_all", "compile_stats"]


def _dispatchers(cpu_module):
    from numba.core.dispatcher import Dispatcher  # Numba is optional: loaded already with the kernels

    return {name: obj for name, obj in vars(cpu_module).items() if isinstance(obj, Dispatcher)}


def compile_stats() -> dict:
    """Signatures of the CPU kernels loaded from Numba's cache and compiled in this process
    (``{}`` when the Numba CPU kernels were never imported)."""
    cpu_module = sys.modules.get("app.accel._cpu")
    if cpu_module is None:
        return {}
    hits = misses = 0
    compiled: list[str] = []
    for name, d in _dispatchers(cpu_module).items():
        s = d.stats
        hits += sum(s.cache_hits.values())
        n = sum(s.cache_misses.values())
        misses += n
        if n:
            compiled.append(name)
    return {"from_cache": hits, "compiled": misses, "compiled_kernels": sorted(compiled)}


def compile_all() -> dict:
    """Run every Numba CPU kernel once, through the public wrappers the app calls, so each is
    compiled (or loaded from the cache). Returns ``compile_stats()`` and the cache folder."""
    rng = np.random.default_rng(0)
    audio = (0.1 * rng.standard_normal(SR * 3)).astype(np.float32)
    # log-mel: the streaming front-end of the Whisper backend, and the from-scratch path
    mel = logmel.IncrementalLogMel(80, backend="cpu")
    mel.features(audio[:SR], 0)
    mel.features(audio, 0)
    logmel.log_mel_reference(audio[:8000], 80, backend="cpu")
    # resampling: capture (48 / 44.1 kHz in), playback (Piper's 22.05 kHz out to the device),
    # files (one-shot)
    for sr_in, sr_out in ((48000, SR), (44100, SR), (22050, 48000)):
        r = resample.StreamingResampler(sr_in, sr_out, "cpu")
        r.process(audio[:480])
        r.flush()
    resample.resample_oneshot(audio[:4800], 48000, SR, backend="cpu")
    # VAD energy gate, passthrough mixer
    features.frame_features(audio, 512, backend="cpu")
    mix.mix_duck(audio[:480], audio[:480], None, 0.25, 30.0, 48000, backend="cpu")
    mix.mix_duck(audio[:480], None, None, 0.25, 30.0, 48000, backend="cpu")
    # int8 and low-rank feature compression
    frames = audio[: 80 * 100].reshape(100, 80)
    q, scale = quant.quantize_int8(frames, backend="cpu")
    quant.dequantize_int8(q, scale, backend="cpu")
    basis = quant.lowrank_basis(frames, 8)
    quant.lowrank_project(frames, basis, backend="cpu")
    stats = compile_stats()
    stats["cache_path"] = user_cache_path()
    return stats
