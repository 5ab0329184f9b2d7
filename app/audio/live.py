"""A live session: capture from a device into the pipeline, dub out to another device.

``LiveSession`` is what both the CLI (``relay run --source``) and the desktop window use:

    live = LiveSession(models, opts, "meeting.monitor", dub_device="dub")
    live.pipe.bus.subscribe(observer)      # before start()
    live.start()
    ...
    summary = live.stop()                  # clean: the last segment is translated and spoken

Events about the devices (``device_lost``, ``device_restored``, ``error``) are published on the
pipeline's bus as ``DeviceEvent`` and kept in ``live.device_events``.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import time
from dataclasses import dataclass

from app.audio.devices import list_devices, resolve
from app.core.errors import UserError

log = logging.getLogger("relay.audio")


@dataclass(frozen=True)
class DeviceEvent:
    kind: str  # device_lost | device_restored | error
    message: str
    at: float


class LiveSession:
    def __init__(self, models, opts, source_id: str, dub_device: str | None = None, passthrough: bool = False,
                 duck: float = 0.25, rate: int = 48000, jitter_ms: float = 40.0, volume: float = 1.0,
                 pipe=None):
        """``pipe``: where the audio goes, when not a local pipeline built here — e.g. an
        ``app.cloud.client.CloudClient`` (started with ``connect()``, which falls back to the
        local models by itself)."""
        from app.audio.capture import LiveCapture
        from app.audio.playback import DubPlayer
        from app.session import build_pipeline

        if not 0.0 <= duck <= 1.0:
            raise UserError("--duck must be between 0 and 1")
        if not 0.0 <= volume <= 2.0:
            raise UserError("the dub volume must be between 0 and 2")
        if passthrough and not dub_device:
            raise UserError("--passthrough plays the original under the dub: it needs --dub-device")
        devices = list_devices()
        self.source = resolve(source_id, output=False, devices=devices)
        self.sink = resolve(dub_device, output=True, devices=devices) if dub_device else None
        if self.sink is not None and self.source.id == f"{self.sink.id}.monitor":
            raise UserError(f"capturing '{self.source.id}' while playing the dub on '{self.sink.id}' would feed "
                            "the dub back into the recognizer; play it on another sink")
        self.models, self.opts = models, opts
        opts.realtime = True
        self.pipe = pipe if pipe is not None else build_pipeline(models, opts)
        self.device_events: list[DeviceEvent] = []
        accel = models.accel if models.accel in ("cuda", "cpu", "numpy") else "auto"  # "server": no local models
        self.capture = LiveCapture(self.source, self.pipe, rate=rate, accel=accel, on_event=self._device)
        self.player = None
        if self.sink is not None and not opts.no_tts and (getattr(models, "tts", None) is not None or pipe is not None):
            self.pipe.tracker.dub_from_playback = True
            self.player = DubPlayer(self.sink, rate=rate, jitter_ms=jitter_ms,
                                    passthrough=self.capture.ring if passthrough else None,
                                    passthrough_rate=rate if passthrough else None, duck_gain=duck,
                                    accel=accel, publish=self.pipe.bus.publish,
                                    to_pipe_clock=self._to_pipe, on_event=self._device, volume=volume)
            self.pipe.bus.subscribe(self.player)
        self.t0 = self.cpu0 = 0.0
        self._stopped = False

    def _to_pipe(self, monotonic_t: float) -> float:
        return monotonic_t - (time.monotonic() - self.pipe.clock.now())

    def _device(self, kind: str, message: str) -> None:
        ev = DeviceEvent(kind, message, self.pipe.clock.now())
        self.device_events.append(ev)
        log.warning(message) if kind != "device_restored" else log.info(message)
        self.pipe.bus.publish(ev)

    def start(self) -> None:
        self.cpu0 = time.process_time()
        if hasattr(self.pipe, "connect"):  # a cloud client: opens the session (or goes local)
            self.pipe.connect()
        else:
            self.pipe.start()
        self.t0 = self.pipe.clock.now()
        if self.player is not None:
            self.player.start()
        try:
            self.capture.start()
        except Exception:
            self._abort()
            raise

    def _abort(self) -> None:
        if self.player is not None:
            self.player.stop()
        self.pipe.ring.close()

    def metrics(self) -> dict:
        c = self.capture.stats
        out = {"capture": {"device": self.source.id, "rate": self.capture.rate, "overflows": c.overflows,
                           "callbacks": c.callbacks, "lost": c.lost, "restored": c.restored,
                           "gap_s": round(c.gap_s, 2), "delay_ms": c.delay_ms()}}
        if self.player is not None:
            p = self.player.stats
            out["playback"] = {"device": self.sink.id, "rate": self.player.rate, "underflows": p.underflows,
                               "chunks": p.chunks, "played_s": round(p.played_s, 2), "lost": p.lost,
                               "restored": p.restored, "jitter_ms": round(self.player.jitter * 1000 / self.player.rate)}
        return out

    def stop(self, drain_timeout: float = 20.0) -> dict:
        """Stop capturing; what was heard is committed, translated and spoken; returns the summary."""
        from app.session import make_summary

        if self._stopped:
            raise RuntimeError("session already stopped")
        self._stopped = True
        self.capture.stop()
        audio_s = self.pipe.ring.written / 16000
        error = None
        try:
            self.pipe.finish()
        except Exception as e:  # PipelineError: keep what was processed, report it
            error = str(e)
        if self.player is not None:
            self.player.drain(min(drain_timeout, self.player.pending_s() + 2.0))
            self.player.stop()
        wall_s = self.pipe.clock.now() - self.t0
        s = make_summary(self.models, self.pipe, audio_s, wall_s, time.process_time() - self.cpu0, self.opts,
                         f"live:{self.source.id}", interrupted=False)
        s["mode"] = ("cloud" if hasattr(self.pipe, "connect") else "pipeline") + "/live"
        # the pipeline clock's zero on CLOCK_MONOTONIC, so other processes can line events up
        s["clock_zero_monotonic"] = round(time.monotonic() - self.pipe.clock.now(), 4)
        s["first_audio_at"] = round(self.pipe.first_audio_at or 0.0, 4)
        s["devices"] = self.metrics()
        s["device_events"] = [{"kind": e.kind, "message": e.message, "at": round(e.at, 3)} for e in self.device_events]
        if error:
            s["error"] = error
        return s


def _json_device_events(ev) -> None:
    from app.pipeline.messages import DubPlayed

    if isinstance(ev, DeviceEvent):
        obj = {"type": ev.kind, "message": ev.message, "at": round(ev.at, 3)}
    elif isinstance(ev, DubPlayed):
        obj = {"type": "dub_played", "seq": ev.seq, "first_of_segment": ev.first_of_segment,
               "scheduled_at": round(ev.scheduled_at, 3), "played_at": round(ev.played_at, 3)}
    else:
        return
    print(json.dumps(obj), flush=True)


def cmd_run_live(args) -> int:
    from app import session
    from app.cli import check_output_folders, options_from_args

    from app.obs.run import RunObservability

    obs = RunObservability(args)  # log level, --report path, --metrics-port: before anything loads
    if args.input or args.demo:
        raise UserError("--source captures live audio: leave out --input/--demo")
    if args.serial:
        raise UserError("--serial compares on files: use it with --input")
    if args.duration is not None and args.duration <= 0:
        raise UserError("--duration must be positive")
    opts = options_from_args(args)
    opts.validate()
    check_output_folders(args)
    devices = list_devices()
    resolve(args.source, devices=devices)  # a wrong name fails before models load
    if args.dub_device:
        resolve(args.dub_device, output=True, devices=devices)
    plan = session.check_models(opts)
    for note in plan.notes:
        print(f"relay: note: {note}", file=sys.stderr)

    def status(msg):
        if not args.json:
            print(msg, file=sys.stderr, flush=True)

    models = session.load_models(opts, status, plan=plan)
    return run_live(args, opts, models, obs=obs)


def run_live(args, opts, models, pipe=None, obs=None) -> int:
    """Run a live session until Ctrl-C, SIGTERM or --duration; print and write what it made."""
    from app.cli import Printer, _write_outputs, print_summary
    from app.obs.run import RunObservability

    obs = obs or RunObservability(args)

    def status(msg):
        if not args.json:
            print(msg, file=sys.stderr, flush=True)

    live = LiveSession(models, opts, args.source, args.dub_device, args.passthrough, args.duck, pipe=pipe)
    live.pipe.bus.subscribe(Printer(args.json))
    obs.attach(live.pipe, live.capture)
    if hasattr(live.pipe.record, "keep_dub_audio"):
        live.pipe.record.keep_dub_audio = bool(args.dub_out)  # else the dub's audio piles up in memory
    if args.json:
        live.pipe.bus.subscribe(_json_device_events)
    else:
        live.pipe.bus.subscribe(lambda ev: isinstance(ev, DeviceEvent)
                                and print(f"relay: {ev.message}", file=sys.stderr, flush=True))
    stop = threading.Event()
    old = signal.signal(signal.SIGTERM, lambda *a: stop.set())
    live.start()
    # stderr, also with --json (stdout carries the events): scripts wait for this line
    print(f"relay: listening on {live.source.label}" + (f", dub on {live.sink.label}" if live.sink else "")
          + " — Ctrl-C to stop", file=sys.stderr, flush=True)
    end = None if args.duration is None else time.monotonic() + args.duration
    try:
        while not stop.wait(0.1):
            if end is not None and time.monotonic() >= end:
                break
            if live.pipe.failed():
                break
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, old)
    status("relay: stopping: finishing the last segment")
    try:
        summary = live.stop()
    except KeyboardInterrupt:  # a second Ctrl-C: stop now, keep what is there
        summary = None
    from app.audio.files import write_wav

    _write_outputs(args, live.pipe, write_wav)
    if summary is None:
        return 130
    obs.write_report(summary, live.pipe)
    if args.json:
        print(json.dumps({"type": "summary", **summary}, ensure_ascii=False), flush=True)
    else:
        print_summary(summary)
        d = summary["devices"]
        print(f"  capture {d['capture']['device']}: {d['capture']['overflows']} overflows, "
              f"lost {d['capture']['lost']}×" + (f"; dub {d['playback']['device']}: "
                                                 f"{d['playback']['underflows']} underflows"
                                                 if "playback" in d else ""), file=sys.stderr)
    if "error" in summary:
        raise UserError(f"pipeline failed: {summary['error']}")
    return 0
