"""Runtime hook of the frozen app: runs before `app` is imported.

* Numba's ``cache=True`` kernels need a writable cache folder; the app folder may be read-only
  (Program Files, /opt, a mounted .dmg), so the cache goes to the user's cache folder.
* The bundle ships its Numba kernels compiled for a generic CPU (``installer/build.sh`` runs
  ``relay --compile-kernels`` with ``NUMBA_CPU_NAME=generic``; ``app.accel.numba_cache`` seeds
  the user's cache from them), so the frozen app asks Numba for generic code too: its cache is
  keyed to the CPU, and code for this machine's CPU would mean compiling on the first launch.
* sounddevice finds PortAudio with ``ctypes.util.find_library``, which only looks at the system's
  library paths; the bundle ships its own PortAudio, so point it there.
* Nothing is ever downloaded at run time by the Hugging Face libraries.
"""

import os
import sys


def _user_cache_dir() -> str:
    home = os.path.expanduser("~")
    if sys.platform == "win32":
        return os.path.join(os.environ.get("LOCALAPPDATA") or os.path.join(home, "AppData", "Local"), "Relay", "Cache")
    if sys.platform == "darwin":
        return os.path.join(home, "Library", "Caches", "Relay")
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"), "relay")


os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(_user_cache_dir(), "numba"))
os.environ.setdefault("NUMBA_CPU_NAME", "generic")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

_bundle = getattr(sys, "_MEIPASS", os.path.dirname(sys.executable))
_portaudio = next((os.path.join(_bundle, n) for n in ("libportaudio.so.2", "libportaudio.so")
                   if os.path.isfile(os.path.join(_bundle, n))), None)
if _portaudio:
    import ctypes.util

    _find_library = ctypes.util.find_library

    def _find_library_bundled(name, _orig=_find_library):
        return _portaudio if name == "portaudio" else _orig(name)

    ctypes.util.find_library = _find_library_bundled
