"""Privacy on a live source: a whole live session (capture from PulseAudio, dub played out)
leaves no audio and no transcript on disk when nothing was exported. The home, temporary and
working directories are watched; the session's own text is then searched for in anything that
did change, so a failure says what leaked."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import DATA, ROOT, relay, spawn, summary_of
from .test_live_audio import pulse, wait_for_line  # noqa: F401 - the fixture
from .test_privacy import snapshot

pytestmark = pytest.mark.models


def server_env(home, tmp) -> dict:
    info = subprocess.run(["pactl", "info"], capture_output=True, text=True, timeout=10, check=True).stdout
    server = next(line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("Server String"))
    env = {"HOME": str(home), "TMPDIR": str(tmp), "RELAY_HOME": str(home / ".relay"), "PULSE_SERVER": server}
    cookie = os.path.expanduser("~/.config/pulse/cookie")
    if os.path.exists(cookie):  # the server's cookie, so the client does not make one in the new home
        env["PULSE_COOKIE"] = cookie
    from app.models import store

    env["RELAY_MODELS"] = str(store.models_dir())
    return env


def test_live_session_leaves_no_audio_or_transcript(pulse, tmp_path):  # noqa: F811
    home, work, tmp = (tmp_path / d for d in ("home", "work", "tmp"))
    for d in (home, work, tmp):
        d.mkdir()
    env = server_env(home, tmp)
    warm = relay("run", "--input", str(DATA / "zh_03.wav"), "--fast", "--no-tts", env=env, cwd=work)
    assert warm.returncode == 0, warm.stderr  # fills the word-boundary cache, as any first run does
    before = snapshot(home, work, tmp)
    t0 = time.time_ns()
    proc = spawn([sys.executable, "-m", "app", "run", "--source", "meeting.monitor", "--dub-device", "dub", "--json"],
                 cwd=work, env={**os.environ, **env, "PYTHONPATH": str(ROOT)})
    wait_for_line(proc, "listening on", 300)
    subprocess.run(["paplay", "--device=meeting", str(DATA / "zh_demo_20s.wav")], check=True, timeout=60)
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    s = summary_of(subprocess.CompletedProcess(proc.args, 0, stdout, stderr))
    assert s["mode"] == "pipeline/live" and s["segments"]
    after = snapshot(home, work, tmp)
    changed = [f for f, m in after.items() if f not in before or m != before[f] or m >= t0]
    pieces = [x["source"][i:i + 4] for x in s["segments"] for i in range(0, max(1, len(x["source"]) - 3), 4)]
    pieces += [w for x in s["segments"] for w in (x["target"] or "").split() if len(w) >= 6]
    leaks = {}
    for f in changed:
        try:
            data = Path(f).read_bytes()
        except OSError:
            continue
        found = [p for p in pieces if p.encode() in data]
        if found or data[:4] in (b"RIFF", b"OggS", b"fLaC"):
            leaks[f] = found[:3] or "audio"
    assert not leaks, leaks
    assert changed == [], changed
