import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def models_installed() -> bool:
    from app.models import store

    have = store.installed()
    return all(p in have for p in ("whisper-base", "whisper-tiny-en", "opus-mt-zh-en", "piper-joe-en"))


@pytest.fixture(scope="session", autouse=True)
def _need_models():
    if not models_installed():
        pytest.fail("model packs are not installed: run `relay models install` first (scripts/test.sh does)")


def relay_env(env=None) -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.update(env or {})
    return e


def relay(*args, env=None, cwd=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env=relay_env(env), timeout=timeout)


_started: list[subprocess.Popen] = []


def _ctrl_c_works() -> None:
    # a shell starts background jobs with SIGINT ignored, and children inherit that; the tests
    # stop sessions with SIGINT (Ctrl-C), so give each session the terminal's default back
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spawn(cmd: list[str], **kw) -> subprocess.Popen:
    """A session process that is killed after the test if the test left it running."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_ctrl_c_works, **kw)
    _started.append(proc)
    return proc


@pytest.fixture(autouse=True)
def _no_session_left_behind():
    yield
    while _started:
        proc = _started.pop()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def summary_of(proc) -> dict:
    last = proc.stdout.strip().splitlines()[-1]
    s = json.loads(last)
    assert s["type"] == "summary"
    return s
