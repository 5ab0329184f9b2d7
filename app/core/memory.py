"""Keeping a long session's memory flat (glibc's allocator, Linux).

A session runs recognition, translation, synthesis, capture and playback in their own threads,
and glibc gives each thread its own malloc arena (up to 8 per core). Each arena keeps the peak of
what its thread ever allocated (a long recognition window, a long sentence's audio) after it is
freed, so the process's RSS climbs in steps over hours although nothing leaks (measured by
``bench/soak.py``; see docs/BENCHMARKS.md). Two remedies, both no-ops off glibc:

* ``tune_allocator()``: at most 2 arenas (``mallopt(M_ARENA_MAX, 2)``, what ``MALLOC_ARENA_MAX=2``
  does), set before the worker threads exist; an environment ``MALLOC_ARENA_MAX`` wins.
* ``start_trimmer()``: one background thread for the process that hands freed memory back to the
  system every ``interval_s`` (``malloc_trim(0)``, a few milliseconds; never in a stage's thread).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys
import threading

log = logging.getLogger("relay.memory")

M_ARENA_MAX = -8  # glibc's mallopt parameter
ARENAS = 2
TRIM_INTERVAL_S = 30.0

_libc = None
_trimmer: threading.Thread | None = None
_trimmer_stop: threading.Event | None = None
_lock = threading.Lock()
trims = 0  # how many trims ran (tests and the soak read it)


def _glibc():
    global _libc
    if _libc is None:
        _libc = False
        if sys.platform.startswith("linux"):
            try:
                lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                if hasattr(lib, "malloc_trim") and hasattr(lib, "mallopt"):
                    lib.malloc_trim.argtypes = [ctypes.c_size_t]
                    lib.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
                    _libc = lib
            except OSError:  # musl and others: nothing to tune
                pass
    return _libc or None


def tune_allocator() -> bool:
    """Cap glibc's arenas (call early, before the worker threads start). True when applied."""
    lib = _glibc()
    if lib is None or os.environ.get("MALLOC_ARENA_MAX"):
        return False
    return bool(lib.mallopt(M_ARENA_MAX, ARENAS))


def trim() -> bool:
    """Give freed heap memory back to the system now. True when some was released."""
    global trims
    lib = _glibc()
    if lib is None:
        return False
    trims += 1
    return bool(lib.malloc_trim(0))


def start_trimmer(interval_s: float = TRIM_INTERVAL_S) -> bool:
    """Start the process's trimming thread once (later calls do nothing). False off glibc."""
    global _trimmer, _trimmer_stop
    if _glibc() is None or os.environ.get("RELAY_NO_TRIM"):  # RELAY_NO_TRIM: bench baselines
        return False
    with _lock:
        if _trimmer is not None and _trimmer.is_alive():
            return True
        stop = threading.Event()

        def loop():
            while not stop.wait(interval_s):
                try:
                    trim()
                except Exception:  # never take the app down for housekeeping
                    log.exception("malloc_trim failed")
                    return

        _trimmer = threading.Thread(target=loop, name="relay-memory-trim", daemon=True)
        _trimmer_stop = stop
        _trimmer.start()
    return True


def stop_trimmer(timeout: float = 2.0) -> None:
    """End the trimming thread (tests; the app lets it end with the process)."""
    global _trimmer
    with _lock:
        if _trimmer_stop is not None:
            _trimmer_stop.set()
        if _trimmer is not None:
            _trimmer.join(timeout)
        _trimmer = None
