"""Numba's compiled kernels, ahead of the first launch.

Numba compiles the CPU kernels of ``_cpu.py`` the first time each one runs (seconds on two cores)
and keeps the result in its cache (``cache=True``), so only the very first launch pays. For the
desktop bundle that first launch is the one right after installing, so the build pays instead:

* ``compile_all()`` runs every kernel once through its public wrapper, with the argument types
  the app passes (the wrappers normalise dtypes and layouts), so each one is compiled and cached;
  ``relay --compile-kernels`` runs it.
* ``installer/build.sh`` runs that in the frozen app with ``NUMBA_CPU_NAME=generic`` (code for
  any x86-64/arm64 CPU, not only the build machine's: Numba's cache is otherwise keyed to the CPU
  model and its features) and ships the cache files in the bundle's ``numba-cache/`` folder.
* The frozen app also runs with ``NUMBA_CPU_NAME=generic`` (its runtime hook), and
  ``seed_from_bundle()``, called before the first kernel loads, copies the shipped files into
  the user's cache folder (the app folder may be read-only; Numba's cache folder for a source
  file is named after that file's absolute path, so the copy is made where Numba will look for
  the installed location). Generic code is slower per call than code tuned to the CPU (about
  1.3-1.5x on these kernels, which take a few ms per 30 s of audio: see docs/BENCHMARKS.md), and
  nothing is compiled on the user's machine.

``compile_stats()`` counts, over the kernels, the signatures loaded from the cache and those
compiled in this process; ``relay --self-test`` reports both.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

import numpy as np

BUNDLED_DIRNAME = "numba-cache"
_SEED_MARKER = ".relay-seeded-from"


def bundled_cache_dir() -> str | None:
    """The frozen app's shipped cache folder, or None (source checkout, or not built with one)."""
    if not getattr(sys, "frozen", False):
        return None
    base = getattr(sys, "_MEIPASS", os.path.dirname(sys.executable))
    path = os.path.join(base, BUNDLED_DIRNAME)
    return path if os.path.isdir(path) else None


def _cpu_source_file() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_cpu.py")


def user_cache_path(source_file: str | None = None) -> str | None:
    """Where Numba keeps the kernels' cache for ``_cpu.py`` at its present location, when the
    cache folder is set (``NUMBA_CACHE_DIR``); None otherwise."""
    from numba.core import caching, config

    if not config.CACHE_DIR:
        return None
    sub = caching._CacheLocator.get_suitable_cache_subpath(source_file or _cpu_source_file())
    return os.path.join(config.CACHE_DIR, sub)


def _manifest(folder: str) -> str:
    names = sorted(n for n in os.listdir(folder) if n.endswith((".nbi", ".nbc")))
    return "\n".join(f"{n} {os.path.getsize(os.path.join(folder, n))}" for n in names)


def seed_from_bundle() -> int:
    """Copy the shipped cache into the user's cache folder, once per build; returns how many
    files were copied (0 when there is nothing to do or it cannot be done: Numba then compiles
    as usual, so this never stops the app)."""
    src = bundled_cache_dir()
    if src is None:
        return 0
    try:
        dst = user_cache_path()
        if dst is None:
            return 0
        manifest = _manifest(src)
        marker = os.path.join(dst, _SEED_MARKER)
        try:
            with open(marker, encoding="utf-8") as f:
                if f.read() == manifest:
                    return 0
        except OSError:
            pass
        os.makedirs(dst, exist_ok=True)
        copied = 0
        for name in os.listdir(src):
            if not name.endswith((".nbi", ".nbc")):
                continue
            fd, tmp = tempfile.mkstemp(dir=dst, prefix=".seed-")
            os.close(fd)
            shutil.copyfile(os.path.join(src, name), tmp)
            os.replace(tmp, os.path.join(dst, name))  # atomic: another instance may be starting
            copied += 1
        with open(marker, "w", encoding="utf-8") as f:
            f.write(manifest)
        return copied
    except OSError:
        return 0


def _dispatchers():
    from numba.core.dispatcher import Dispatcher

    from . import _cpu

    return {name: obj for name, obj in vars(_cpu).items() if isinstance(obj, Dispatcher)}


def compile_stats() -> dict:
    """Signatures of the CPU kernels loaded from Numba's cache and compiled in this process
    (``{}`` when the Numba CPU kernels were never imported)."""
    if "app.accel._cpu" not in sys.modules:
        return {}
    hits = misses = 0
    compiled: list[str] = []
    for name, d in _dispatchers().items():
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
    from . import features, logmel, mix, quant, resample

    rng = np.random.default_rng(0)
    audio = (0.1 * rng.standard_normal(16000 * 3)).astype(np.float32)
    # log-mel: the streaming front-end of the Whisper backend, and the from-scratch path
    mel = logmel.IncrementalLogMel(80, backend="cpu")
    mel.features(audio[:16000], 0)
    mel.features(audio, 0)
    logmel.log_mel_reference(audio[:8000], 80, backend="cpu")
    # resampling: capture (48 / 44.1 kHz in), playback (Piper's 22.05 kHz out to the device),
    # files (one-shot)
    for sr_in, sr_out in ((48000, 16000), (44100, 16000), (22050, 48000)):
        r = resample.StreamingResampler(sr_in, sr_out, "cpu")
        r.process(audio[:480])
        r.flush()
    resample.resample_oneshot(audio[:4800], 48000, 16000, backend="cpu")
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
