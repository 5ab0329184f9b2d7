"""Live capture into the pipeline.

The PortAudio callback only copies the block into a preallocated ring at the device rate and
stamps it (absolute sample index, stream time of its first sample): no allocation of buffers,
no logging, no locks. A pump thread takes what arrived, resamples it to 16 kHz (our streaming
polyphase kernel) and pushes it into the engine with the capture time of each block, so every
latency counts from when the sound reached the device. The pump also watches the callback: when
none has come for ``lost_after_s`` the device is reported lost, silence keeps the session's
timeline going (so the last words still commit), and the stream is reopened until it is back.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from app.accel.resample import StreamingResampler
from app.audio.devices import AudioDevice, env_set, open_env, pulse_route
from app.core.audio import SR
from app.core.errors import UserError
from app.pipeline.latency import percentiles

log = logging.getLogger("relay.audio")
STARTUP_GRACE_S = 2.0


class SampleRing:
    """Single-producer ring of float32 samples with a stamp per producer block. The producer
    (an audio callback) writes data first and publishes the new end index last, so a reader on
    another thread never sees a half-written block (CPython stores an int atomically)."""

    def __init__(self, capacity: int, stamps: int = 4096):
        self.capacity = capacity
        self.buf = np.zeros(capacity, np.float32)
        self.written = 0
        self.stamp_idx = np.zeros(stamps, np.int64)
        self.stamp_t = np.zeros(stamps, np.float64)
        self.stamps = 0

    def write(self, block: np.ndarray, t: float | None, at: int | None = None) -> None:
        """Producer only. ``t`` None: no stamp. ``at``: write from this index instead of the end
        (replacing what was queued after it; the end is published last)."""
        n = len(block)
        w = self.written if at is None else at
        a = w % self.capacity
        k = min(n, self.capacity - a)
        self.buf[a:a + k] = block[:k]
        if k < n:
            self.buf[:n - k] = block[k:]
        if t is not None:
            s = self.stamps % len(self.stamp_idx)
            self.stamp_idx[s] = w
            self.stamp_t[s] = t
            self.stamps += 1
        self.written = w + n

    def read(self, start: int, end: int, out: np.ndarray | None = None) -> np.ndarray:
        n = end - start
        out = np.empty(n, np.float32) if out is None else out[:n]
        a = start % self.capacity
        k = min(n, self.capacity - a)
        out[:k] = self.buf[a:a + k]
        if k < n:
            out[k:] = self.buf[:n - k]
        return out

    def time_of(self, index: int, rate: int) -> float | None:
        """Stream time of sample ``index``, from the newest stamp at or before it."""
        lo = max(0, self.stamps - len(self.stamp_idx))
        for s in range(self.stamps - 1, lo - 1, -1):
            j = s % len(self.stamp_idx)
            if self.stamp_idx[j] <= index:
                return float(self.stamp_t[j]) + (index - int(self.stamp_idx[j])) / rate
        return None


@dataclass
class CaptureStats:
    overflows: int = 0
    callbacks: int = 0
    lost: int = 0
    restored: int = 0
    gap_s: float = 0.0
    # capture path delay per pump pass: when the pipeline got a block - when its newest sample
    # was captured (ADC time); a fixed ring of the latest passes
    delays: np.ndarray = field(default_factory=lambda: np.zeros(4096))
    n_delays: int = 0

    def add_delay(self, seconds: float) -> None:
        self.delays[self.n_delays % len(self.delays)] = seconds
        self.n_delays += 1

    def delay_ms(self) -> dict:
        p = percentiles(self.delays[: min(self.n_delays, len(self.delays))])
        return {"p50": p["p50"], "p95": p["p95"], "n": int(self.n_delays)}


class LiveCapture:
    """Capture ``device`` at ``rate`` and feed ``pipe`` (anything with ``push_audio``)."""

    def __init__(self, device: AudioDevice, pipe, rate: int = 48000, block_ms: float = 10.0,
                 accel: str = "auto", on_event=None, lost_after_s: float = 4.0, retry_s: float = 1.0):
        self.device, self.pipe, self.rate = device, pipe, rate
        self.block = int(rate * block_ms / 1000)
        self.ring = SampleRing(rate * 30)  # also what --passthrough plays from
        self.stats = CaptureStats()
        self.resampler = StreamingResampler(rate, SR, accel) if rate != SR else None
        self.on_event = on_event or (lambda kind, msg: None)
        self.lost_after_s, self.retry_s = lost_after_s, retry_s
        self._stream = None
        self._pa_offset = 0.0  # monotonic - PortAudio stream time
        self._last_cb = 0.0
        self._stop = threading.Event()
        self._pump = threading.Thread(target=self._run, name="capture", daemon=True)
        self._lost = False
        self._scratch = np.zeros(rate, np.float32)
        self.error: BaseException | None = None

    # -- the callback: copy and stamp, nothing else -------------------------------------------
    def _callback(self, indata, frames, t, status) -> None:
        if status.input_overflow:
            self.stats.overflows += 1
        self.stats.callbacks += 1
        self.ring.write(indata[:, 0], t.inputBufferAdcTime or t.currentTime)
        self._last_cb = t.currentTime

    # -- stream management --------------------------------------------------------------------
    def _open(self) -> None:
        import sounddevice as sd  # PortAudio loads only when a device is used: files need none

        with env_set(open_env(self.device, output=False)):
            s = sd.InputStream(device=self.device.portaudio_name, channels=1, samplerate=self.rate,
                               dtype="float32", blocksize=self.block, latency="low", callback=self._callback)
            s.start()
            wrong = pulse_route(self.device, output=False)  # never the microphone by mistake
        if wrong is not None:
            close_stream(s)
            raise OSError(wrong)
        self._pa_offset = time.monotonic() - s.time
        # PulseAudio streams can take a second to start calling back: judge only after a grace
        self._last_cb = s.time + STARTUP_GRACE_S
        self._stream = s

    def _close(self) -> None:
        s, self._stream = self._stream, None
        close_stream(s)

    def start(self) -> None:
        try:
            self._open()
        except Exception as e:
            raise _device_error(self.device, e) from None
        self._pump.start()

    def stop(self) -> None:
        self._stop.set()
        if self._pump.is_alive():
            self._pump.join(5.0)
        self._close()

    def _to_pipe(self, monotonic_t: float) -> float:
        """A ``time.monotonic`` instant on the pipeline's clock."""
        return monotonic_t - (time.monotonic() - self.pipe.clock.now())

    def _stream_now(self) -> float:
        return time.monotonic() - self._pa_offset

    # -- pump ---------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as e:  # reported; the session itself keeps going
            self.error = e
            log.exception("capture pump failed")
            self.on_event("error", f"capture failed: {e}")

    def _loop(self) -> None:
        pos = 0
        next_retry = 0.0
        silence_at = None
        while not self._stop.wait(0.02):
            w = self.ring.written
            if w - pos > self.ring.capacity:  # fell behind by a whole ring: skip, count it
                self.stats.overflows += 1
                pos = w - self.ring.capacity // 2
            if w > pos:
                t_stream = self.ring.time_of(w, self.rate)  # when the newest sample was captured
                at = min(t_stream + self._pa_offset, time.monotonic()) if t_stream else time.monotonic()
                self._push(self.ring.read(pos, w, self._scratch if w - pos <= len(self._scratch) else None), at)
                self.stats.add_delay(time.monotonic() - at)
                pos = w
            quiet = self._stream_now() - self._last_cb
            if not self._lost and (self._stream is None or quiet > self.lost_after_s
                                   or not self._stream.active):
                self._lost = True
                self.stats.lost += 1
                self.on_event("device_lost", f"capture source '{self.device.id}' lost; keeping the "
                                             "transcript, retrying")
                self._close()
                silence_at = time.monotonic()
                next_retry = time.monotonic() + self.retry_s
            if self._lost:
                now = time.monotonic()
                gap = now - silence_at  # keep the timeline moving: the last words still commit
                n = int(gap * SR)
                if n:
                    self.pipe.push_audio(np.zeros(n, np.float32), at=self._to_pipe(now))
                    self.stats.gap_s += n / SR
                    silence_at += n / SR
                if now >= next_retry:
                    next_retry = now + self.retry_s
                    try:
                        self._open()
                    except Exception as e:
                        log.info("reopen failed: %s", e)
                        continue
                    pos = self.ring.written
                    if self.resampler is not None:
                        self.resampler.reset()
                    self._lost = False
                    self.stats.restored += 1
                    self.on_event("device_restored", f"capture source '{self.device.id}' is back")
        if self.resampler is not None and not self._lost:
            tail = self.resampler.flush()
            if len(tail):
                self.pipe.push_audio(tail, at=self._to_pipe(time.monotonic()))

    def _push(self, block: np.ndarray, at: float) -> None:
        out = self.resampler.process(block) if self.resampler is not None else block.copy()
        if len(out):
            self.pipe.push_audio(out, at=self._to_pipe(at))


def close_stream(s) -> None:
    """Abort and close a PortAudio stream without waiting more than 2 s: a dead sound server can
    make PortAudio hang, and that must never hang the session."""
    if s is None:
        return
    closer = threading.Thread(target=lambda: (s.abort(), s.close()), daemon=True)
    closer.start()
    closer.join(2.0)


def _device_error(dev: AudioDevice, e: Exception):
    return UserError(f"cannot open '{dev.id}': {str(e).splitlines()[0]}")
