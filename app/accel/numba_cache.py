"""Where Numba keeps the compiled kernels of ``_cpu.py``, and seeding that cache from the
prebuilt kernels the frozen app ships.

``installer/build.sh`` compiles every kernel (``app.accel.kernel_cache.compile_all``) in the
frozen app with ``NUMBA_CPU_NAME=generic`` (code for any x86-64/arm64 CPU, not only the build
machine's: Numba's cache is otherwise keyed to the CPU model and its features) and ships the
cache files in the bundle's ``numba-cache/`` folder. The frozen app also runs with
``NUMBA_CPU_NAME=generic`` (its runtime hook), and ``seed_from_bundle()``, called by ``_cpu``
before the first kernel loads, copies the shipped files into the user's cache folder (the app
folder may be read-only; Numba's cache folder for a source file is named after that file's
absolute path, so the copy is made where Numba will look for the installed location). Generic
code is slower per call than code tuned to the CPU (about 1.3-1.5x on these kernels, which take
a few ms per 30 s of audio: see docs/BENCHMARKS.md), and nothing is compiled on the user's machine.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

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
    from numba.core import caching, config  # Numba is optional: this module is imported without it

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
