"""The desktop bundle: build it with installer/build.sh, run the frozen `relay --self-test`, check the
archive. Slow (a PyInstaller build: about 2 minutes on 2 cores, plus ~30 s per self-test run)."""

import json
import os
import platform
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from app import __version__

pytestmark = [pytest.mark.bundle, pytest.mark.models]

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "build" / "bundle-test"  # inside the clone (build/ is ignored): CI caches nothing outside
BUILD_TIMEOUT_S = 1800
MAX_FOLDER_MB = 800  # the app without model packs; see docs/BENCHMARKS.md for what takes the space


@pytest.fixture(scope="module")
def bundle():
    if not sys.platform.startswith("linux"):
        pytest.skip("the bundle test builds the Linux variant (see installer/README.md for the others)")
    p = subprocess.run(["bash", str(ROOT / "installer" / "build.sh"), str(OUT)], cwd=ROOT,
                       capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    assert p.returncode == 0, f"build failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    info = json.loads((OUT / "build-info.json").read_text())
    print(f"\nbundle: {info['folder_bytes'] / 1e6:.0f} MB folder, {info['archive_bytes'] / 1e6:.0f} MB archive, "
          f"PyInstaller {info['pyinstaller_s']} s, archive {info['archive_s']} s")
    return info


def frozen(info, *args, env=None, timeout=600, cwd=None, folder=None):
    exe = Path(folder or info["folder"]) / "relay"
    e = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    e["QT_QPA_PLATFORM"] = "offscreen"
    e.update(env or {})
    return subprocess.run([str(exe), *args], capture_output=True, text=True, env=e, timeout=timeout,
                          cwd=cwd or "/")


def last_json(stdout: str) -> dict:
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    assert lines, f"no JSON result on stdout: {stdout!r}"
    return json.loads(lines[-1])


def test_folder_has_what_the_app_loads_at_run_time_and_not_what_it_never_uses(bundle):
    internal = Path(bundle["folder"]) / "_internal"
    assert os.access(Path(bundle["folder"]) / "relay", os.X_OK)
    for rel in ("resources/demo/zh_meeting_demo.wav", "resources/demo/warmup_zh.wav", "LICENSE",
                "resources/profanity/en.txt", "resources/profanity/zh.txt",
                "piper/espeak-ng-data/phondata", "piper/espeak-ng-data/en_dict",
                "faster_whisper/assets/silero_vad_v6.onnx", "zhconv/zhcdict.json", "jieba/dict.txt",
                "app/accel/_cpu.py", "libportaudio.so.2", "PySide6/Qt/plugins/platforms/libqoffscreen.so",
                "PySide6/Qt/plugins/platforms/libqxcb.so"):
        assert (internal / rel).exists(), f"{rel} is missing from the bundle"
    assert any(internal.glob("ctranslate2.libs/libctranslate2*")), "libctranslate2 is missing"
    assert any(internal.glob("onnxruntime/capi/libonnxruntime*")), "libonnxruntime is missing"
    assert any(internal.glob("llvmlite/binding/libllvmlite*")), "llvmlite (Numba) is missing"
    for unwanted in ("torch", "tensorflow", "matplotlib", "tkinter", "IPython", "pytest", "_pytest", "hypothesis",
                     "PyInstaller", "scipy", "jieba/lac_small", "jieba/analyse", "tests"):
        assert not (internal / unwanted).exists(), f"{unwanted} should not be in the bundle"
    assert not list(internal.glob("**/libQt6WebEngine*")) and not list(internal.glob("**/libQt6Qml*"))
    assert bundle["folder_bytes"] / 1e6 < MAX_FOLDER_MB
    # the Numba kernels, compiled at build time for a generic CPU (app/accel/numba_cache.py)
    shipped = {p.name.split("-")[0] for p in (internal / "numba-cache").glob("*.nbi")}
    for kernel in ("_cpu._log_mel_kernel", "_cpu.resample_block", "_cpu.frame_features", "_cpu.mix_duck"):
        assert kernel in shipped, f"{kernel} was not compiled into the bundle"


def test_archive_holds_the_whole_folder_under_a_versioned_name(bundle):
    name = f"relay-{__version__}-linux-{platform.machine()}"
    assert Path(bundle["archive"]).name == f"{name}.tar.gz"
    folder = Path(bundle["folder"])
    want = {f"{name}/{p.relative_to(folder)}" for p in folder.rglob("*") if p.is_file() or p.is_symlink()}
    with tarfile.open(bundle["archive"], "r:gz") as tf:  # reads the whole stream: a truncated archive fails
        got = {m.name for m in tf.getmembers() if m.isfile() or m.issym()}
        exe = tf.getmember(f"{name}/relay")
    assert got == want
    assert exe.mode & 0o111, "the launcher lost its executable bit"


def test_app_unpacked_from_the_archive_passes_its_self_test(bundle, tmp_path):
    # unpacked elsewhere (the app must not depend on where it was built), with a fresh Numba cache:
    # the cold start a user sees on the first launch after installing. The kernels come compiled
    # with the bundle, so none is compiled on this launch.
    with tarfile.open(bundle["archive"], "r:gz") as tf:
        tf.extractall(tmp_path / "unpacked", filter="tar")
    folder = next((tmp_path / "unpacked").iterdir())
    p = frozen(bundle, "--self-test", env={"NUMBA_CACHE_DIR": str(tmp_path / "numba")}, folder=folder)
    assert p.returncode == 0, p.stderr[-3000:]
    r = last_json(p.stdout)
    assert r["self_test"] == "ok" and r["frozen"] is True
    assert r["accel"] in ("cpu", "cuda")  # Numba works inside the bundle
    for en in ("hello", "sales", "quarter"):
        assert en in r["target"].lower()
    assert 0 < r["window_ready_s"] < r["models_ready_s"] < r["first_subtitle_s"] < r["total_s"]
    assert r["dub_chunks"] > 0
    assert any((tmp_path / "numba").rglob("*.nbi")), "the shipped kernels were not put in NUMBA_CACHE_DIR"
    assert r["kernels_compiled"] == 0 and r["kernels_from_cache"] > 0, r
    print(f"\nfrozen self-test (cold Numba cache): window {r['window_ready_s']:.2f} s, models "
          f"{r['models_ready_s']:.2f} s, first subtitle {r['first_subtitle_s']:.2f} s after launch")


def test_frozen_self_test_names_the_missing_models(bundle, tmp_path):
    p = frozen(bundle, "--self-test", "--no-window", env={"RELAY_MODELS": str(tmp_path / "empty")})
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert lines[-1].startswith("relay: self-test failed: ") and "relay models install" in lines[-1], p.stderr
    assert last_json(p.stdout)["self_test"] == "failed"


def test_frozen_command_line_and_model_manager(bundle, tmp_path):
    p = frozen(bundle, "--version")
    assert p.returncode == 0 and p.stdout.strip() == f"relay {__version__}"
    p = frozen(bundle, "run", "--input", str(tmp_path / "nope.wav"))
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and p.stderr.startswith("relay: ")
    p = frozen(bundle, "models", "list")
    assert p.returncode == 0 and "whisper-base" in p.stdout and "installed" in p.stdout
    p = frozen(bundle, "models", "verify", "piper-joe-en")
    assert p.returncode == 0 and "piper-joe-en: ok" in p.stdout
    p = frozen(bundle, "devices", "--json", timeout=120)  # sounddevice finds the bundled PortAudio
    assert p.returncode == 0, p.stderr
    assert {"sources", "sinks"} <= json.loads(p.stdout).keys()
