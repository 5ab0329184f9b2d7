import json
import os
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


def relay(*args, env=None, cwd=None, timeout=600):
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env=e, timeout=timeout)


def summary_of(proc) -> dict:
    last = proc.stdout.strip().splitlines()[-1]
    s = json.loads(last)
    assert s["type"] == "summary"
    return s
