"""The one loop every session runs: source → running session → sinks → summary.

``relay run --input``, ``relay run --source``, ``relay run --cloud``, the window and
``relay --self-test`` all go through ``run_session``. What differs is handed in:

- the *running session* (``app.pipeline.protocols.RunningSession``): the local engine built by
  ``app.session.build.build_pipeline`` or the cloud client (``app.cloud.client.CloudClient``);
- the *source*: ``FileSource`` (below) or ``app.audio.live.LiveSource`` (a capture device, and
  the dub played on a sink);
- the *sinks*: bus subscribers (the CLI's printer, the window's bridge, a dub player);
- the *outputs* the user asked for (``app.session.outputs.Outputs``) and the observability
  (``app.obs.run.RunObservability``: log, metrics exporter, report).
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Iterable, Protocol

import numpy as np

from app.core.audio import BLOCK_S, SR
from app.pipeline.engine import PipelineError
from app.pipeline.protocols import RunningSession
from app.session.models import LoadedModels
from app.session.options import SessionOptions
from app.session.outputs import Outputs
from app.session.summary import make_summary, session_mode


class Source(Protocol):
    """Where a session's audio comes from."""

    label: str  # the summary's "input"
    live: bool
    capture: object  # the live capture (for the metrics exporter), or None

    def attach(self, session: RunningSession) -> None:
        """Before the session starts: subscribe what plays or watches it."""

    def start(self) -> None:
        """After the session started: open the devices."""

    def run(self, session: RunningSession, stop: threading.Event) -> bool:
        """Feed the session until the audio ends or ``stop`` is set; True when cut short."""

    def stop(self) -> None:
        """No more input (the capture closes)."""

    def drain(self) -> None:
        """After the session finished: let the dub play out, close the output devices."""

    def audio_s(self, session: RunningSession) -> float:
        """Seconds of audio the session received."""

    def summary(self, session: RunningSession) -> dict:
        """Fields this source adds to the summary."""


def feed_array(session: RunningSession, audio, realtime: bool,
               stop: threading.Event | None = None) -> bool:
    """Feed 16 kHz mono audio in capture-sized blocks; True when stopped before the end.
    ``audio``: an array, or anything whose ``blocks(size)`` yields them (a streamed file)."""
    block = int(BLOCK_S * SR)
    blocks = (audio.blocks(block) if hasattr(audio, "blocks")
              else (audio[off: off + block] for off in range(0, len(audio), block)))
    t0 = session.clock.now()
    off = 0
    for chunk in blocks:
        if stop is not None and stop.is_set():
            return True
        off += len(chunk)
        if realtime:
            session.clock.sleep_until(t0 + off / SR)
        session.push_audio(chunk, wait_if_full=not realtime)
        if session.failed():
            break
    return False


class FileSource:
    """A decoded file fed at real-time pace (as live audio arrives) or as fast as accepted; its
    dub may play on a device (``dub``: an ``app.audio.live.DeviceDub``)."""

    live = False
    capture = None

    def __init__(self, audio, label: str, realtime: bool = True, dub=None):
        """``audio``: a 16 kHz array or an ``app.audio.files.FileStream`` (read as it is fed)."""
        self.audio, self.label, self.realtime, self.dub = audio, label, realtime, dub

    def attach(self, session: RunningSession) -> None:
        if self.dub is not None:
            self.dub.attach(session)

    def start(self) -> None:
        if self.dub is not None:
            self.dub.start()

    def run(self, session: RunningSession, stop: threading.Event) -> bool:
        return feed_array(session, self.audio, self.realtime, stop)

    def stop(self) -> None:
        pass

    def drain(self) -> None:
        if self.dub is not None:
            self.dub.drain()

    def audio_s(self, session: RunningSession) -> float:
        return min(len(self.audio), session.ring.written) / SR

    def summary(self, session: RunningSession) -> dict:
        return {}


def run_session(session: RunningSession, models: LoadedModels, opts: SessionOptions, source: Source, *,
                sinks: Iterable[Callable] = (), outputs: Outputs | None = None, obs=None,
                stop: threading.Event | None = None,
                on_started: Callable[[RunningSession], None] | None = None,
                status: Callable[[str], None] = lambda msg: None) -> dict:
    """Run ``session`` on ``source`` to its end and return the summary. A pipeline failure is
    reported in the summary's ``error`` (what was already processed is kept and written); the
    session's threads and connections are released on every path."""
    outputs = outputs or Outputs()
    stop = stop or threading.Event()
    try:
        for sink in sinks:
            session.bus.subscribe(sink)
        if obs is not None:
            obs.attach(session, source.capture)
        session.record.keep_dub_audio = outputs.wants_dub_audio  # else the dub piles up in memory
        source.attach(session)
        cpu0 = time.process_time()
        session.start()
        t0 = session.clock.now()
        source.start()
        if on_started is not None:
            on_started(session)
        try:
            interrupted = source.run(session, stop)
        except KeyboardInterrupt:
            interrupted = True
        if interrupted or source.live:
            status("relay: stopping: finishing the last segment")
        source.stop()
        error = None
        try:
            session.finish()
        except PipelineError as e:
            error = str(e)
        source.drain()
        wall_s = (session.finished_at or session.clock.now()) - t0
        summary = make_summary(models, session, source.audio_s(session), wall_s, time.process_time() - cpu0,
                               opts, source.label, interrupted, mode=session_mode(session.kind, opts, source.live))
        summary.update(source.summary(session))
        if error:
            summary["error"] = error
        outputs.write(session, opts.realtime)
        if obs is not None and not error:
            obs.write_report(summary, session)
        return summary
    except BaseException:
        outputs_kept(session, outputs, opts)
        raise
    finally:
        session.abort()
        if obs is not None:
            obs.close()


def outputs_kept(session: RunningSession, outputs: Outputs, opts: SessionOptions) -> None:
    """On a second Ctrl-C or an unexpected error: write what was already processed."""
    session.abort()
    if not session.ring.written:
        return  # nothing was processed
    try:
        outputs.write(session, opts.realtime)
    except Exception:  # the original error is the one to report
        pass
