"""`relay --self-test` from the source tree (the bundle test runs the frozen one)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def relay(*args, env=None):
    e = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring")
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, capture_output=True, text=True,
                          env=e, timeout=600)


def result_of(p) -> dict:
    return json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("{")][-1])


@pytest.mark.models
def test_self_test_opens_the_window_translates_the_demo_and_times_it(tmp_path):
    p = relay("--self-test", env={"RELAY_SETTINGS_DIR": str(tmp_path / "settings")})
    assert p.returncode == 0, p.stderr[-2000:]
    r = result_of(p)
    assert r["self_test"] == "ok" and r["frozen"] is False
    assert 0 < r["window_ready_s"] < r["models_ready_s"] < r["first_subtitle_s"] < r["total_s"]
    assert r["first_subtitle_into_clip_s"] < r["clip_s"]
    assert r["models_preloaded"] is True  # the window's load at launch was the one used
    assert r["kernels_compiled"] + r["kernels_from_cache"] > 0  # Numba's front-end ran
    for en in ("hello", "sales", "quarter"):
        assert en in r["target"].lower()
    assert "self-test: window ready" in p.stderr and "self-test: first subtitle" in p.stderr
    assert not (tmp_path / "settings").exists()  # the user's settings are never touched


def test_self_test_without_models_fails_with_one_line_naming_the_fix(tmp_path):
    p = relay("--self-test", "--no-window", env={"RELAY_MODELS": str(tmp_path / "none")})
    assert p.returncode == 1
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("relay: self-test failed: ") and "relay models install" in last
    r = result_of(p)
    assert r["self_test"] == "failed" and "relay models install" in r["reason"]


def test_self_test_flags_are_checked():
    p = relay("--self-test", "devices")
    assert p.returncode == 2 and p.stderr.strip() == "relay: --self-test takes no command"
    p = relay("--no-window")
    assert p.returncode == 2 and p.stderr.strip() == "relay: --no-window goes with --self-test"


def test_failed_checks_are_reported_not_raised(monkeypatch, capsys):
    from app.ui import selftest

    monkeypatch.setattr(selftest, "run_pipeline", lambda launched, clip_s, log, *preloaded: (_ for _ in ()).throw(
        selftest.SelfTestFailed("translation: 'sales' missing from 'hello'")))
    assert selftest.run(window=False) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["reason"] == "translation: 'sales' missing from 'hello'"
    assert err.strip().splitlines()[-1] == "relay: self-test failed: translation: 'sales' missing from 'hello'"

    def broken(launched, clip_s, log, *preloaded):
        raise ImportError("\nlong advice\n\nOriginal error was: libfoo.so: cannot open shared object file")

    monkeypatch.setattr(selftest, "run_pipeline", broken)
    assert selftest.run(window=False) == 1
    reason = json.loads(capsys.readouterr()[0])["reason"]
    assert reason.startswith("ImportError: Original error was: libfoo.so") and "test_selftest.py" in reason
