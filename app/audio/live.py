"""Live audio around a running session: capture from a device into it, play its dub on another.

``LiveSource`` is the runner's source for ``relay run --source`` and the window's live sessions
(``app.session.runner.run_session``); ``DeviceDub`` plays a file session's dub on a device.
Device events (``device_lost``, ``device_restored``, ``error``) are published on the session's
bus as ``DeviceEvent`` and listed in the summary.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from app.audio.capture import LiveCapture
from app.audio.devices import list_devices, resolve
from app.audio.playback import DubPlayer
from app.core.audio import SR
from app.core.errors import UserError

log = logging.getLogger("relay.audio")
DRAIN_TIMEOUT_S = 20.0  # at most this long for the dub to play out after the session finished


@dataclass(frozen=True)
class DeviceEvent:
    kind: str  # device_lost | device_restored | error
    message: str
    at: float


def _front_end(accel: str) -> str:
    """The resampling kernels to use: the models' front-end, or auto when the models run
    elsewhere (a cloud session without local models)."""
    return accel if accel in ("cuda", "cpu", "numpy") else "auto"


def _to_session_clock(session, monotonic_t: float) -> float:
    return monotonic_t - (time.monotonic() - session.clock.now())


class DeviceDub:
    """Plays a session's dub on an output device; dub latency is then measured to the device."""

    def __init__(self, sink_id: str, volume: float = 1.0, accel: str = "auto"):
        if not 0.0 <= volume <= 2.0:
            raise UserError("the dub volume must be between 0 and 2")
        self.sink = resolve(sink_id, output=True)
        self.volume, self.accel = volume, _front_end(accel)
        self.player: DubPlayer | None = None

    def attach(self, session) -> None:
        self.player = DubPlayer(self.sink, accel=self.accel, publish=session.bus.publish,
                                to_pipe_clock=lambda t: _to_session_clock(session, t), volume=self.volume)
        session.tracker.dub_from_playback = True
        session.bus.subscribe(self.player)

    def start(self) -> None:
        self.player.start()

    def drain(self) -> None:
        self.player.drain(min(DRAIN_TIMEOUT_S, self.player.pending_s() + 2.0))
        self.player.stop()


class LiveSource:
    """Capture ``source_id`` into a session, optionally playing the dub on ``dub_device`` (with
    the original ducked under it when ``passthrough``). Devices are resolved at construction, so
    a wrong name fails before any model loads."""

    live = True

    def __init__(self, source_id: str, dub_device: str | None = None, passthrough: bool = False,
                 duck: float = 0.25, volume: float = 1.0, *, dub: bool = True, accel: str = "auto",
                 duration: float | None = None, rate: int = 48000, jitter_ms: float = 40.0):
        if not 0.0 <= duck <= 1.0:
            raise UserError("--duck must be between 0 and 1")
        if not 0.0 <= volume <= 2.0:
            raise UserError("the dub volume must be between 0 and 2")
        if passthrough and not dub_device:
            raise UserError("--passthrough plays the original under the dub: it needs --dub-device")
        if duration is not None and duration <= 0:
            raise UserError("--duration must be positive")
        devices = list_devices()
        self.source = resolve(source_id, output=False, devices=devices)
        self.sink = resolve(dub_device, output=True, devices=devices) if dub_device else None
        if self.sink is not None and self.source.id == f"{self.sink.id}.monitor":
            raise UserError(f"capturing '{self.source.id}' while playing the dub on '{self.sink.id}' would feed "
                            "the dub back into the recognizer; play it on another sink")
        self.label = f"live:{self.source.id}"
        self.passthrough, self.duck, self.volume, self.dub = passthrough, duck, volume, dub
        self.accel, self.duration, self.rate, self.jitter_ms = _front_end(accel), duration, rate, jitter_ms
        self.device_events: list[DeviceEvent] = []
        self.capture: LiveCapture | None = None
        self.player: DubPlayer | None = None
        self._session = None

    def attach(self, session) -> None:
        self._session = session
        self.capture = LiveCapture(self.source, session, rate=self.rate, accel=self.accel, on_event=self._device)
        if self.sink is not None and self.dub:
            session.tracker.dub_from_playback = True
            self.player = DubPlayer(self.sink, rate=self.rate, jitter_ms=self.jitter_ms,
                                    passthrough=self.capture.ring if self.passthrough else None,
                                    passthrough_rate=self.rate if self.passthrough else None,
                                    duck_gain=self.duck, accel=self.accel, publish=session.bus.publish,
                                    to_pipe_clock=lambda t: _to_session_clock(session, t),
                                    on_event=self._device, volume=self.volume)
            session.bus.subscribe(self.player)

    def _device(self, kind: str, message: str) -> None:
        ev = DeviceEvent(kind, message, self._session.clock.now())
        self.device_events.append(ev)
        log.warning(message) if kind != "device_restored" else log.info(message)
        self._session.bus.publish(ev)

    def start(self) -> None:
        if self.player is not None:
            self.player.start()
        try:
            self.capture.start()
        except Exception:
            if self.player is not None:
                self.player.stop()
            raise

    def run(self, session, stop: threading.Event) -> bool:
        """Until ``stop``, Ctrl-C, ``duration`` or a pipeline failure; a live session is never
        'cut short': it ends when the user says so."""
        end = None if self.duration is None else time.monotonic() + self.duration
        try:
            while not stop.wait(0.1):
                if end is not None and time.monotonic() >= end:
                    break
                if session.failed():
                    break
        except KeyboardInterrupt:
            pass
        return False

    def stop(self) -> None:
        self.capture.stop()

    def drain(self) -> None:
        if self.player is not None:
            self.player.drain(min(DRAIN_TIMEOUT_S, self.player.pending_s() + 2.0))
            self.player.stop()

    def audio_s(self, session) -> float:
        return session.ring.written / SR

    def metrics(self) -> dict:
        c = self.capture.stats
        out = {"capture": {"device": self.source.id, "rate": self.capture.rate, "overflows": c.overflows,
                           "callbacks": c.callbacks, "lost": c.lost, "restored": c.restored,
                           "gap_s": round(c.gap_s, 2), "delay_ms": c.delay_ms()}}
        if self.player is not None:
            p = self.player.stats
            out["playback"] = {"device": self.sink.id, "rate": self.player.rate, "underflows": p.underflows,
                               "chunks": p.chunks, "played_s": round(p.played_s, 2), "lost": p.lost,
                               "restored": p.restored,
                               "jitter_ms": round(self.player.jitter * 1000 / self.player.rate)}
        return out

    def summary(self, session) -> dict:
        return {
            # the session clock's zero on CLOCK_MONOTONIC, so other processes can line events up
            "clock_zero_monotonic": round(time.monotonic() - session.clock.now(), 4),
            "first_audio_at": round(session.first_audio_at or 0.0, 4),
            "devices": self.metrics(),
            "device_events": [{"kind": e.kind, "message": e.message, "at": round(e.at, 3)}
                              for e in self.device_events],
        }
