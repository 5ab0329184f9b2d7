"""`relay --self-test`: check, offscreen, that this installation works end to end.

Made for the frozen desktop app (installer/), where a missing shared library, Qt plugin or data
file only shows up at run time, but it runs the same from a source checkout:

1. open the main window offscreen and wait for its first paint (the Qt plugins, the window code);
2. load and warm the pair's models from the model folder (CTranslate2, onnxruntime, Piper with its
   espeak-ng data, Silero VAD, the Numba kernels);
3. interpret the first seconds of the bundled demo clip through the real streaming pipeline, fed at
   real-time pace as live audio arrives;
4. check what came out: the Chinese was recognised, the English holds the words the clip says, and
   the dub is audible.

Timings are counted from the process's own start (the launch, including the bundle's unpacking):
window ready, models ready, first subtitle. The result is one JSON line on stdout; progress goes to
stderr. Exit 0 when every check passes, else 1 with one line naming the first failed check.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass

import numpy as np
import psutil

from app.accel.kernel_cache import compile_stats
from app.audio.files import load_audio
from app.core.audio import SR
from app.core.errors import UserError
from app.pipeline.messages import DubChunk, Translation
from app.session.build import build_pipeline
from app.session.models import load_models
from app.session.options import DEMO_CLIP, SessionOptions
from app.session.runner import FileSource, run_session

CLIP_S = 20.0  # the demo's first 20 s: a greeting, a sound check and the third-quarter sales
# what the first 20 s of the demo says (tests/integration/test_run_cli.py checks the same words)
EXPECT_SOURCE = ("大家好", "销售")
EXPECT_TARGET = ("hello", "sales", "quarter")
WINDOW_TIMEOUT_S = 20.0
PRELOAD_TIMEOUT_S = 300.0


class SelfTestFailed(Exception):
    pass


@dataclass
class FirstSubtitle:
    """Bus subscriber: the wall time of the first committed translation with text."""

    at: float | None = None
    text: str = ""

    def __call__(self, ev) -> None:
        if self.at is None and isinstance(ev, Translation) and not ev.preview and (ev.target or "").strip():
            self.at = time.time()
            self.text = ev.target.strip()


def launch_time() -> float:
    """When this process started (epoch seconds), so timings include interpreter start-up."""
    return psutil.Process().create_time()


def open_window(launched: float, log) -> tuple[float, object, float | None]:
    """Show the main window offscreen, as a user's launch does: it starts loading the default
    pair's models in the background ("Load models at launch"). Returns the seconds from launch to
    its first paint, and the models that background load produced with the seconds from launch
    to when they were ready (None, None when it did not produce them)."""
    os.environ["QT_QPA_PLATFORM"] = "offscreen"  # a self-test never puts a window on the screen
    from PySide6.QtCore import QEvent, QEventLoop, QObject, QSettings  # Qt only for the window check

    from app.ui.main import make_app  # Qt only for the window check (--no-window runs without it)

    app = make_app([])
    from app.ui.settings import Settings  # Qt only for the window check
    from app.ui.window import MainWindow  # Qt only for the window check

    class PaintProbe(QObject):
        """Sees the paint event Qt sends to the window's native surface (widgets paint inside it)."""

        def __init__(self, window):
            super().__init__()
            self.window, self.seen = window, False

        def eventFilter(self, obj, ev):  # noqa: N802 (Qt's name)
            if ev.type() == QEvent.Paint and obj is self.window.windowHandle():
                self.seen = True
            return False

    with tempfile.TemporaryDirectory(prefix="relay-selftest-") as tmp:  # leave the user's settings alone
        win = MainWindow(settings=Settings(QSettings(os.path.join(tmp, "relay.ini"), QSettings.IniFormat)))
        probe = PaintProbe(win)
        app.installEventFilter(probe)
        win.show()
        deadline = time.monotonic() + WINDOW_TIMEOUT_S
        while not probe.seen and time.monotonic() < deadline:
            app.processEvents(QEventLoop.AllEvents, 10)  # the paint completes inside this call
            if not probe.seen:
                time.sleep(0.005)
        painted_at = time.time()
        app.removeEventFilter(probe)
        if not probe.seen:
            raise SelfTestFailed(f"the main window was not painted within {WINDOW_TIMEOUT_S:.0f} s")
        if not win.isVisible():
            raise SelfTestFailed("the main window did not stay visible")
        ready = painted_at - launched
        log(f"self-test: window ready {ready:.2f} s after launch")
        models = win.controller.preloaded_models(PRELOAD_TIMEOUT_S)
        models_at = win.controller.preloaded_at
        win.close()
        win.deleteLater()
        app.processEvents()
    if models is None or models_at is None:
        return ready, None, None
    return ready, models, models_at - launched


def run_pipeline(launched: float, clip_s: float, log, models=None, models_ready: float | None = None) -> dict:
    """Load the models (unless the window's background load did), interpret the demo's first
    ``clip_s`` seconds at real-time pace through the session runner, check it."""
    opts = SessionOptions(pair="zh-en", realtime=True)
    if not DEMO_CLIP.is_file():
        raise SelfTestFailed(f"the bundled demo clip is missing ({DEMO_CLIP})")
    audio = load_audio(DEMO_CLIP)[: int(clip_s * SR)]
    preloaded = models is not None and models.plan.pair == opts.pair and models.tts is not None
    if not preloaded:
        models = load_models(opts, log)
        models_ready = time.time() - launched
    log(f"self-test: models ready {models_ready:.2f} s after launch (accel {models.accel})")

    first = FirstSubtitle()
    dub: list[DubChunk] = []
    fed_at = time.time()
    summary = run_session(build_pipeline(models, opts), models, opts, FileSource(audio, str(DEMO_CLIP)),
                          sinks=[first, lambda ev: dub.append(ev) if isinstance(ev, DubChunk) else None])
    if "error" in summary:
        raise SelfTestFailed(f"the pipeline failed: {summary['error']}")

    segments = summary["segments"]
    source = "".join(s["source"] for s in segments)
    target = " ".join(s["target"] or "" for s in segments)
    for zh in EXPECT_SOURCE:
        if zh not in source:
            raise SelfTestFailed(f"recognition: {zh!r} not heard in the demo (got {source[:80]!r})")
    low = target.lower()
    for en in EXPECT_TARGET:
        if en not in low:
            raise SelfTestFailed(f"translation: {en!r} missing from {target[:120]!r}")
    if first.at is None:
        raise SelfTestFailed("no subtitle was published while the clip played")
    spoken = [c for c in dub if not c.skipped and len(c.audio)]
    if not spoken or max(float(np.abs(c.audio).max()) for c in spoken) < 0.05:
        raise SelfTestFailed("speech synthesis produced no audible dub")
    first_s = first.at - launched
    log(f"self-test: first subtitle {first_s:.2f} s after launch "
        f"({first.at - fed_at:.2f} s into the clip): {first.text!r}")
    return {
        "models_ready_s": round(models_ready, 3),
        "models_preloaded": preloaded,
        "first_subtitle_s": round(first_s, 3),
        "first_subtitle_into_clip_s": round(first.at - fed_at, 3),
        "load_s": round(models.load_s, 3),
        "warmup_s": round(models.warm_s, 3),
        "accel": models.accel,
        "clip_s": round(len(audio) / SR, 3),
        "segments": len(segments),
        "dub_chunks": len(spoken),
        "first_subtitle": first.text,
        "target": target.strip(),
    }


def run(window: bool = True, clip_s: float = CLIP_S, out=sys.stdout, err=sys.stderr) -> int:
    launched = launch_time()

    def log(msg: str) -> None:
        print(msg, file=err, flush=True)

    result: dict = {"self_test": "failed", "frozen": bool(getattr(sys, "frozen", False))}
    try:
        models = models_ready = None
        if window:
            ready, models, models_ready = open_window(launched, log)
            result["window_ready_s"] = round(ready, 3)
        result.update(run_pipeline(launched, clip_s, log, models, models_ready))
    except SelfTestFailed as e:
        return _fail(result, str(e), out, err)
    except UserError as e:  # a missing or damaged model pack names the command that fixes it
        return _fail(result, str(e), out, err)
    except Exception as e:  # a missing library or data file in a bundle ends up here
        if os.environ.get("RELAY_SELFTEST_TRACEBACK"):  # for whoever is fixing the bundle
            traceback.print_exc(file=err)
        return _fail(result, describe(e), out, err)
    k = compile_stats()  # Numba kernels loaded from the cache vs compiled during this launch
    if k:
        result["kernels_from_cache"], result["kernels_compiled"] = k["from_cache"], k["compiled"]
    result["self_test"] = "ok"
    result["total_s"] = round(time.time() - launched, 3)
    print(json.dumps(result, ensure_ascii=False), file=out, flush=True)
    log(f"self-test: ok in {result['total_s']:.1f} s")
    return 0


def describe(e: BaseException) -> str:
    """One line: the exception, its first message line, and where it was raised."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    msg = lines[-1] if lines else ""  # a long message ends with what went wrong (numpy's "Original error")
    if isinstance(e, ImportError) and e.name and e.name not in msg:
        msg = f"{msg} (module {e.name})".strip()
    tb = traceback.extract_tb(e.__traceback__)
    where = f" at {'/'.join(tb[-1].filename.replace(os.sep, '/').split('/')[-2:])}:{tb[-1].lineno}" if tb else ""
    return f"{type(e).__name__}: {msg}{where}"


def _fail(result: dict, reason: str, out, err) -> int:
    result["reason"] = reason
    print(json.dumps(result, ensure_ascii=False), file=out, flush=True)
    print(f"relay: self-test failed: {reason}", file=err, flush=True)
    return 1
