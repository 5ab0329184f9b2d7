"""app.core.memory: glibc's arena cap and the trimming thread (Linux/glibc only)."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.core import memory

ROOT = str(Path(__file__).resolve().parents[2])
glibc = pytest.mark.skipif(memory._glibc() is None, reason="not glibc")


@glibc
def test_trim_hands_freed_heap_back_to_the_system():
    # in a fresh interpreter: allocate 200 MB in small blocks (heap, not mmap), free them, trim
    code = """
import ctypes, gc, psutil
from app.core import memory
p = psutil.Process()
blocks = [bytearray(64 * 1024 - 64) for _ in range(3200)]  # under the mmap threshold: heap memory
peak = p.memory_info().rss
del blocks[:-1]  # keep the last one: the heap top stays in use, so only trim can give back the rest
gc.collect()
freed = p.memory_info().rss
memory.trim()
trimmed = p.memory_info().rss
print(peak >> 20, freed >> 20, trimmed >> 20)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin"}, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    peak, freed, trimmed = map(int, out.stdout.split())
    assert peak - trimmed > 150, (peak, freed, trimmed)  # trimmed memory left the process
    assert freed - trimmed > 100, "free() alone gave it back: the test shows nothing about trim"


@glibc
def test_trimmer_runs_in_its_own_thread_once_per_process(monkeypatch):
    monkeypatch.delenv("RELAY_NO_TRIM", raising=False)
    memory.stop_trimmer()
    before = memory.trims
    assert memory.start_trimmer(interval_s=0.05)
    assert memory.start_trimmer(interval_s=0.05)  # the second call starts nothing
    import threading

    assert [t.name for t in threading.enumerate()].count("relay-memory-trim") == 1
    deadline = time.monotonic() + 5
    while memory.trims < before + 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert memory.trims >= before + 2
    memory.stop_trimmer()
    assert "relay-memory-trim" not in [t.name for t in threading.enumerate()]


@glibc
def test_arena_cap_is_applied_unless_the_environment_sets_one(monkeypatch):
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert memory.tune_allocator()
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert not memory.tune_allocator()


def test_off_glibc_everything_is_a_no_op(monkeypatch):
    monkeypatch.setattr(memory, "_libc", False)
    assert not memory.tune_allocator() and not memory.trim() and not memory.start_trimmer()
