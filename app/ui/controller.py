"""Runs one session at a time off the GUI thread and reports back through signals.

A session is one worker thread: read the file (or open the live source), check and load the
models (kept for the next Start), build the pipeline, subscribe the bridge, start, feed the file
at real-time pace (or wait for Stop on a live source), then finish the pipeline (every committed
segment is translated and spoken) and summarise. Stop only sets an event; the window never waits."""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field

import psutil
from PySide6.QtCore import QObject, Signal

from app.audio.files import open_audio
from app.audio.live import DeviceDub, LiveSource
from app.cloud.client import CloudClient
from app.core.audio import SR
from app.core.errors import ModelDamaged, ModelMissing, UserError
from app.session.build import build_pipeline
from app.session.models import LoadedModels, check_models, load_models
from app.session.options import SessionOptions
from app.session.runner import FileSource, run_session
from app.ui.gauges import GaugeSnapshot

log = logging.getLogger("relay.ui")
FILE_SOURCE = "file"


@dataclass
class StartRequest:
    source: str  # FILE_SOURCE or a capture device id
    opts: SessionOptions
    file_path: str = ""
    dub: bool = True
    dub_device: str | None = None  # None: keep the dub in memory (export as WAV)
    passthrough: bool = False
    duck: float = 0.25
    volume: float = 0.8
    cloud: tuple | None = None  # (url, token, ca or None): run on a Relay server, local fallback
    extra: dict = field(default_factory=dict)


class SessionController(QObject):
    status = Signal(str)
    state_changed = Signal(str)  # idle | loading | running | stopping
    started = Signal()
    stopped = Signal(object)  # summary dict (with "error" when the pipeline failed), or None
    failed = Signal(str)  # bad input or a failure before the session started
    models_missing = Signal(str)  # the message names the install command
    cloud_status = Signal(str)  # cloud | cloud-lost | local | cloud-available (from the client's thread)
    preloaded = Signal(str)  # a pair's models finished loading in the background
    _started = Signal(object)
    _done = Signal(object, object)

    def __init__(self, bridge, parent=None):
        super().__init__(parent)
        self.bridge = bridge
        self.state = "idle"
        self.pipe = None
        self.live = None
        self.request: StartRequest | None = None
        self._models: dict[tuple, LoadedModels] = {}
        self._preloading: tuple[tuple, threading.Thread] | None = None  # (key, loader thread)
        self.preloaded_at: float | None = None  # epoch seconds the last background load ended
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None
        self._cursor = {"timeline": 0, "asr": 0}
        self._proc = None
        self._started.connect(self._on_started)
        self._done.connect(self._on_done)

    # -- GUI thread ----------------------------------------------------------------------------
    def start(self, req: StartRequest) -> None:
        if self.state != "idle":
            return
        self.request = req
        self._stop.clear()
        self._cursor = {"timeline": 0, "asr": 0}
        self._set_state("loading")
        self._worker = threading.Thread(target=self._run, args=(req,), name="relay-session", daemon=True)
        self._worker.start()

    def preload(self, opts: SessionOptions) -> bool:
        """Load the models ``opts`` needs in the background (at launch, or when the pair changes),
        so that Start finds them ready. Nothing happens when they are loaded already, while a
        session runs, or when a pack is missing (Start reports that, with the install command).
        True when a load was started."""
        if self.busy or (self._preloading is not None and self._preloading[1].is_alive()):
            return False
        try:
            plan = check_models(opts)
        except (ModelMissing, ModelDamaged, UserError):
            return False
        key = self._key(plan, opts)
        if key in self._models:
            return False

        def load():
            try:
                models = load_models(opts, plan=plan)
            except Exception as e:  # Start loads again and reports the error then
                log.warning("preloading the models failed: %s", e)
                return
            self._models = {key: models}  # one set in memory at a time
            self.preloaded_at = time.time()
            try:
                self.preloaded.emit(plan.pair)
            except RuntimeError:  # the window is gone
                pass

        th = threading.Thread(target=load, name="relay-preload", daemon=True)
        self._preloading = (key, th)
        th.start()
        return True

    def preloaded_models(self, timeout: float = 120.0):
        """Wait for a background load to end; the models it loaded, or None (none started, it
        failed, or it is still running after ``timeout``)."""
        pre = self._preloading
        if pre is None:
            return None
        pre[1].join(timeout)
        return None if pre[1].is_alive() else self._models.get(pre[0])

    @staticmethod
    def _key(plan, opts) -> tuple:
        return (plan.pair, plan.asr_pack, plan.mt_pack, plan.tts_pack, opts.mt_beam, opts.accel_request)

    def stop(self) -> None:
        if self.state in ("loading", "running"):
            self._stop.set()
            if self.state == "running":
                self._set_state("stopping")
                self.status.emit("Stopping: finishing the last segment…")

    @property
    def busy(self) -> bool:
        return self.state != "idle"

    def wait(self, timeout: float = 60.0) -> bool:
        """Join the worker (for shutdown paths and tests); True when it has ended."""
        w = self._worker
        if w is not None:
            w.join(timeout)
            return not w.is_alive()
        return True

    def _set_state(self, s: str) -> None:
        self.state = s
        self.state_changed.emit(s)

    def _on_started(self, pipe) -> None:
        self.pipe = pipe
        self._set_state("running" if not self._stop.is_set() else "stopping")
        self.started.emit()

    def _on_done(self, kind: str, payload) -> None:
        self.bridge.flush()  # every event published before the end is delivered first
        self._set_state("idle")
        if kind == "summary":
            self.stopped.emit(payload)
        elif kind == "missing":
            self.models_missing.emit(payload)
            self.stopped.emit(None)
        elif kind == "error":
            self.failed.emit(payload)
            self.stopped.emit(None)
        else:  # cancelled while loading
            self.status.emit("Cancelled")
            self.stopped.emit(None)

    # -- worker thread ------------------------------------------------------------------------
    def _run(self, req: StartRequest) -> None:
        try:
            result = self._session(req)
        except (ModelMissing, ModelDamaged) as e:
            result = ("missing", str(e))
        except UserError as e:
            result = ("error", str(e))
        except Exception as e:  # a bug: say so in one line, details in the log
            log.exception("session failed")
            result = ("error", f"the session failed unexpectedly: {type(e).__name__}: {e}")
        try:
            self._done.emit(*result)
        except RuntimeError:  # the window was destroyed without waiting; nobody is listening
            pass

    def _session(self, req: StartRequest):
        opts = req.opts
        if req.source == FILE_SOURCE:
            if not req.file_path:
                raise UserError("choose an audio file first")
            self.status.emit("Reading the audio file…")
            audio = open_audio(req.file_path, accel=opts.accel_request)
            source = FileSource(audio, req.file_path, realtime=True)
            label = f"Interpreting {os.path.basename(req.file_path)} ({len(audio) / SR:.0f} s)"
        else:
            opts.realtime = True  # a live source has its own pace
            source = LiveSource(req.source, dub_device=req.dub_device if req.dub else None,
                                passthrough=req.passthrough, duck=req.duck, volume=req.volume)
            label = f"Listening to {req.source}"
        models = self._models_for(opts)
        if models is None:
            return "cancelled", None
        if source.live:
            source.accel = models.accel  # resample with the kernels the models' front-end uses
        elif req.dub and req.dub_device and models.tts is not None:
            source.dub = DeviceDub(req.dub_device, volume=req.volume, accel=models.accel)
        if req.cloud:
            url, token, ca = req.cloud
            running = CloudClient(url, token, ca or None, opts=opts, models=models, fallback=True,
                                  auto_return=True, on_status=self.cloud_status.emit)
        else:
            running = build_pipeline(models, opts)

        def started(s) -> None:
            self._started.emit(s)
            self.status.emit(label)

        self.live = source if source.live else None
        try:
            summary = run_session(running, models, opts, source, sinks=[self.bridge], stop=self._stop,
                                  on_started=started)
        finally:
            self.live = None
        return "summary", summary

    def _models_for(self, opts: SessionOptions):
        """The models ``opts`` needs: the preloaded set, or loaded now (kept for the next Start);
        None when Stop was pressed while they loaded."""
        plan = check_models(opts)
        key = self._key(plan, opts)
        pre = self._preloading
        if pre is not None and pre[1].is_alive():  # never two sets of models loading at once
            self.status.emit("Loading models…")
            while pre[1].is_alive() and not self._stop.is_set():
                pre[1].join(0.1)
            if self._stop.is_set():
                return None
        models = self._models.get(key)
        if models is None:
            models = load_models(opts, lambda m: self.status.emit(m[:1].upper() + m[1:]), plan=plan)
            self._models = {key: models}  # one set in memory at a time
        return None if self._stop.is_set() else models

    # -- gauges (GUI timer) ------------------------------------------------------------------
    def snapshot(self, with_percentiles: bool = True) -> GaugeSnapshot | None:
        pipe = self.pipe
        if pipe is None:
            return None
        now = pipe.clock.now() - pipe.started_at
        tr = pipe.tracker
        s = GaugeSnapshot(now=now)
        if with_percentiles:
            s.latency_ms = tr.summary()
        n = len(tr.timeline)
        for t, name, v in tr.timeline[self._cursor["timeline"]:n]:
            s.points.append((t - pipe.started_at, name, v))
        self._cursor["timeline"] = n
        n = len(tr.asr_first_token)
        s.points += [(now, "asr_first_token", v) for v in tr.asr_first_token[self._cursor["asr"]:n]]
        self._cursor["asr"] = n
        if getattr(pipe, "seg_q", None) is not None:
            s.queues["segments"] = len(pipe.seg_q)
        if getattr(pipe, "tts_q", None) is not None:
            s.queues["translations"] = len(pipe.tts_q)
        s.audio_s = pipe.ring.written / SR
        if s.audio_s > 1:
            busy = sum(v.get("busy_s", 0.0) for v in pipe.stage_stats().values() if isinstance(v, dict))
            s.rtf = busy / s.audio_s
        s.cpu_pct, s.rss_mb = self._process_usage()
        return s

    def _process_usage(self):
        try:
            if self._proc is None:
                self._proc = psutil.Process()
                self._proc.cpu_percent(None)
            return self._proc.cpu_percent(None), self._proc.memory_info().rss / 2**20
        except Exception:
            return None, None
