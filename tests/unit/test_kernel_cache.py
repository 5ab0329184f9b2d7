"""Prebuilt Numba kernels (app.accel.kernel_cache): compiled once for a generic CPU, shipped in a
(simulated) frozen app's folder, seeded into an empty user cache and loaded there without a single
compile. Each step is a fresh interpreter, as a real launch is."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.accel import dispatch

pytestmark = pytest.mark.skipif(not dispatch.numba_available(), reason="numba missing")

ROOT = Path(__file__).resolve().parents[2]

# A launch of "the frozen app": sys.frozen and sys._MEIPASS set as PyInstaller sets them, so Numba
# stamps the cache with the executable's hash and kernel_cache looks for the shipped folder.
LAUNCH = """
import json, sys
sys.frozen = True
sys._MEIPASS = sys.argv[1]
from app.accel import kernel_cache
stats = kernel_cache.compile_all()
print(json.dumps(stats))
"""


def launch(meipass: Path, cache: Path, cpu: str | None = "generic") -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env["NUMBA_CACHE_DIR"] = str(cache)
    if cpu:
        env["NUMBA_CPU_NAME"] = cpu
    p = subprocess.run([sys.executable, "-c", LAUNCH, str(meipass)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_shipped_kernels_are_loaded_on_the_first_launch_without_compiling(tmp_path):
    meipass = tmp_path / "bundle"
    meipass.mkdir()
    # the build: compile everything into a scratch cache, ship its files in the bundle folder
    built = launch(meipass, tmp_path / "build-cache")
    assert built["compiled"] >= 7, built
    shipped = meipass / "numba-cache"
    shipped.mkdir()
    for f in Path(built["cache_path"]).iterdir():
        if f.suffix in (".nbi", ".nbc"):
            (shipped / f.name).write_bytes(f.read_bytes())

    # first launch after installing: the user's cache is empty, and nothing gets compiled
    user = tmp_path / "user-cache"
    first = launch(meipass, user)
    assert first["compiled"] == 0 and first["compiled_kernels"] == [], first
    assert first["from_cache"] >= 7
    assert list(Path(first["cache_path"]).glob("*.nbi")), "the shipped cache was not copied"

    # a later launch finds the seeded cache as it is, and still compiles nothing
    again = launch(meipass, user)
    assert again["compiled"] == 0

    # the failing case the test guards against: without the shipped files, the first launch compiles
    empty = tmp_path / "bundle-without-cache"
    empty.mkdir()
    cold = launch(empty, tmp_path / "cold-cache")
    assert cold["compiled"] >= 7


def test_code_for_another_cpu_is_not_taken_from_a_generic_cache(tmp_path):
    # Numba keys its cache by CPU: a launch that asks for host-tuned code must compile, not load
    # generic code (and the frozen app therefore runs with NUMBA_CPU_NAME=generic)
    meipass = tmp_path / "bundle"
    meipass.mkdir()
    cache = tmp_path / "cache"
    launch(meipass, cache)
    host = launch(meipass, cache, cpu=None)
    assert host["compiled"] >= 7
