"""A session keeps audio and text in memory: nothing is written that the user did not ask for."""

import os
import time
from pathlib import Path

import pytest

from .conftest import DATA, relay

pytestmark = pytest.mark.models


def snapshot(*roots):
    seen = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            if ".venv" in dirpath or ".git" in dirpath or "__pycache__" in dirpath:
                continue
            for f in filenames:
                p = Path(dirpath) / f
                try:
                    seen[str(p)] = p.stat().st_mtime_ns
                except OSError:
                    pass
    return seen


def test_run_writes_only_what_was_asked(tmp_path):
    home = tmp_path / "home"
    work = tmp_path / "work"
    tmp = tmp_path / "tmp"
    for d in (home, work, tmp):
        d.mkdir()
    from app.models import store

    env = {"HOME": str(home), "TMPDIR": str(tmp), "RELAY_MODELS": str(store.models_dir()),
           "RELAY_HOME": str(home / ".relay")}
    # warm any caches first so that the measured run is a normal one
    relay("run", "--input", str(DATA / "zh_05.wav"), "--fast", env=env, cwd=work)
    before = snapshot(home, work, tmp)
    t0 = time.time_ns()
    p = relay("run", "--input", str(DATA / "zh_05.wav"), "--fast", "--srt", str(work / "asked.srt"),
              env=env, cwd=work)
    assert p.returncode == 0, p.stderr
    after = snapshot(home, work, tmp)
    new_or_changed = [f for f, m in after.items() if f not in before or m != before[f]]
    assert new_or_changed == [str(work / "asked.srt")], new_or_changed
    assert all(m < t0 for f, m in after.items() if f != str(work / "asked.srt"))
