"""Dub playback on a real output device, optionally over the original (``--passthrough``) with
ducking.

A mixer thread keeps a small jitter buffer (``jitter_ms``) of finished output ahead of the
device: the dub (resampled to the device rate) mixed over the passthrough audio, whose gain is
ramped down while the dub speaks and back up between (``app.accel.mix.mix_duck``: linear ramps,
no clicks). The PortAudio callback only copies from that buffer and stamps each block with the
stream time at which its first sample reaches the DAC. From those stamps the mixer learns when
each dub chunk's first sample really left the device and reports it (``DubPlayed``), so dub
latency is measured to the speaker, not to the queue.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass

import numpy as np

from app.accel.mix import mix_duck
from app.accel.resample import StreamingResampler
from app.audio.capture import STARTUP_GRACE_S, SampleRing, close_stream
from app.audio.devices import AudioDevice, env_set, open_env, pulse_route
from app.core.errors import UserError
from app.pipeline.messages import DubChunk, DubPlayed

log = logging.getLogger("relay.audio")
# a little more than PortAudio's "low": on a loaded machine a 20 ms device buffer underruns,
# and a PulseAudio null sink then takes about two seconds to resume. 40 ms puts a dub chunk's
# first sample at the DAC ~90 ms after its scheduled start (60 ms: ~110 ms), with no more
# underflows on 2 loaded cores (bench/live_audio.py, docs/BENCHMARKS.md)
OUTPUT_LATENCY_S = 0.04
REWIND_MARGIN_BLOCKS = 1.5  # a new dub chunk starts this far past the callback's read position


@dataclass
class PlaybackStats:
    underflows: int = 0  # device asked for audio the jitter buffer did not have
    chunks: int = 0
    played_s: float = 0.0
    lost: int = 0
    restored: int = 0
    rewinds: int = 0  # dub starts that skipped queued silence


class DubPlayer:
    def __init__(self, device: AudioDevice, rate: int = 48000, block_ms: float = 10.0, jitter_ms: float = 40.0,
                 passthrough: SampleRing | None = None, passthrough_rate: int | None = None,
                 duck_gain: float = 0.25, ramp_ms: float = 30.0, accel: str = "auto",
                 publish=None, to_pipe_clock=lambda t: t, on_event=None, lost_after_s: float = 4.0,
                 volume: float = 1.0):
        self.device, self.rate = device, rate
        self.block = int(rate * block_ms / 1000)
        self.jitter = int(rate * jitter_ms / 1000)
        self.out = SampleRing(rate * 4, stamps=8192)
        self.read_pos = 0
        if passthrough is not None and passthrough_rate not in (None, rate):
            raise ValueError("passthrough audio must be at the output rate")
        self.passthrough = passthrough
        self.duck_gain, self.ramp_ms, self.accel = duck_gain, ramp_ms, accel
        self.volume = volume  # the dub's gain; may be changed while playing
        self.publish = publish or (lambda ev: None)
        self.to_pipe_clock = to_pipe_clock
        self.on_event = on_event or (lambda kind, msg: None)
        self.lost_after_s = lost_after_s
        self.stats = PlaybackStats()
        self._incoming: collections.deque[DubChunk] = collections.deque()
        self._dub: collections.deque[list] = collections.deque()  # [chunk, resampled audio, offset]
        self._starts: collections.deque[tuple[int, DubChunk]] = collections.deque()
        self._resamplers: dict[int, object] = {}
        self._duck = None
        self._pt_pos: int | None = None
        self._silent_from: int | None = 0  # from here on the queued output is silence
        self._stream = None
        self._pa_offset = 0.0
        self._last_cb = 0.0
        self._stop = threading.Event()
        self._wake = threading.Event()  # a dub chunk arrived: mix it now, not at the next tick
        self._lost = False
        self._thread = threading.Thread(target=self._run, name="playback", daemon=True)

    # -- observer side (TTS thread) -----------------------------------------------------------
    def __call__(self, ev) -> None:
        if isinstance(ev, DubChunk) and not ev.skipped and len(ev.audio):
            self._incoming.append(ev)
            self._wake.set()

    # -- the callback: copy and stamp ---------------------------------------------------------
    def _callback(self, outdata, frames, t, status) -> None:
        if status.output_underflow:
            self.stats.underflows += 1
        r = self.read_pos
        n = min(frames, self.out.written - r)
        if n > 0:
            a = r % self.out.capacity
            k = min(n, self.out.capacity - a)
            outdata[:k, 0] = self.out.buf[a:a + k]
            if k < n:
                outdata[k:n, 0] = self.out.buf[:n - k]
        else:
            n = 0
        if n < frames:
            outdata[n:, 0] = 0.0
            self.stats.underflows += 1
        s = self.out.stamps % len(self.out.stamp_idx)
        self.out.stamp_idx[s] = r
        self.out.stamp_t[s] = t.outputBufferDacTime or t.currentTime
        self.out.stamps += 1
        self.read_pos = r + n
        self._last_cb = t.currentTime

    # -- stream -------------------------------------------------------------------------------
    def _open(self) -> None:
        import sounddevice as sd  # PortAudio loads only when a device is used: files need none

        with env_set(open_env(self.device, output=True)):
            s = sd.OutputStream(device=self.device.portaudio_name, channels=1, samplerate=self.rate,
                                dtype="float32", blocksize=self.block, latency=OUTPUT_LATENCY_S,
                                callback=self._callback)
            self.read_pos = self.out.written  # nothing stale plays after a reopen
            s.start()
            wrong = pulse_route(self.device, output=True)  # never the dub into the meeting
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
            raise UserError(f"cannot open '{self.device.id}' for the dub: {str(e).splitlines()[0]}") from None
        self._thread.start()

    def pending_s(self) -> float:
        """Dub audio not yet played (queued, in the mixer, or in the jitter buffer)."""
        q = sum(len(c.audio) / c.sample_rate for c in list(self._incoming))
        m = sum((len(a) - off) / self.rate for _, a, off in list(self._dub))
        return q + m + max(0, self.out.written - self.read_pos) / self.rate

    def drain(self, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not self._incoming and not self._dub and not self._starts:
                return True
            time.sleep(0.02)
        return False

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(5.0)
        self._close()

    # -- mixer --------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                # the jitter buffer holds 40 ms: a 10 ms tick keeps it full; a new dub chunk wakes
                # the mixer at once (the tick alone delayed a chunk's start by 5 ms on average)
                self._wake.wait(0.01)
                self._wake.clear()
                self._take_incoming()
                self._watch()
                if self._stream is not None:
                    self._rewind_for_new_dub()
                    need = self.jitter - (self.out.written - self.read_pos)
                    if need >= self.block // 2:
                        self._produce(need)
                self._report_played()
        except BaseException as e:
            log.exception("playback mixer failed")
            self.on_event("error", f"dub playback failed: {e}")

    def _take_incoming(self) -> None:
        while self._incoming:
            c = self._incoming.popleft()
            if c.sample_rate == self.rate:
                audio = np.asarray(c.audio, np.float32)
            else:
                r = self._resamplers.get(c.sample_rate)
                if r is None:
                    r = self._resamplers[c.sample_rate] = StreamingResampler(c.sample_rate, self.rate, self.accel)
                audio = np.concatenate([r.process(c.audio), r.flush()])
            self._dub.append([c, audio, 0])

    def _rewind_for_new_dub(self) -> None:
        """A dub chunk that arrives while only silence is queued need not wait behind the jitter
        buffer: the silence not yet taken by the device is overwritten, from just past what the
        callback may be reading now (``REWIND_MARGIN_BLOCKS``). Never with passthrough (that
        queued audio is the original) and never over queued dub."""
        if (self.passthrough is not None or self._silent_from is None or not self._dub
                or self._dub[0][2] != 0):
            return
        at = max(self._silent_from, self.read_pos + int(REWIND_MARGIN_BLOCKS * self.block))
        if at < self.out.written:
            self.stats.rewinds += 1
            self._produce(max(self.jitter - (at - self.read_pos), self.block), at=at)

    def _produce(self, n: int, at: int | None = None) -> None:
        start = self.out.written if at is None else at
        dub = np.zeros(n, np.float32)
        filled = 0
        while filled < n and self._dub:
            item = self._dub[0]
            c, audio, off = item
            if off == 0:
                self._starts.append((start + filled, c))
                self.stats.chunks += 1
            k = min(n - filled, len(audio) - off)
            np.multiply(audio[off:off + k], self.volume, out=dub[filled:filled + k])
            filled += k
            item[2] = off + k
            if item[2] >= len(audio):
                self._dub.popleft()
        self.stats.played_s += filled / self.rate
        if self.passthrough is not None:
            orig = self._passthrough_block(n)
            out, self._duck = mix_duck(orig, dub, self._duck, self.duck_gain, self.ramp_ms, self.rate,
                                       backend=self.accel)
        else:
            out = dub
        self.out.write(out, None, at)  # stamps are the callback's alone
        if filled or self.passthrough is not None:
            self._silent_from = None
        elif self._silent_from is None:
            self._silent_from = start

    def _passthrough_block(self, n: int) -> np.ndarray:
        """The original, kept ``2 * jitter`` behind the capture so that capture bursts do not
        starve it; resynchronised when it drifts 200 ms further behind."""
        src = self.passthrough
        w = src.written
        lag = 2 * self.jitter
        if self._pt_pos is None or w - self._pt_pos > lag + n + self.rate // 5 or self._pt_pos > w:
            self._pt_pos = max(0, w - lag - n)
        k = min(n, w - self._pt_pos)
        out = np.zeros(n, np.float32)
        if k > 0:
            src.read(self._pt_pos, self._pt_pos + k, out)
            self._pt_pos += k
        return out

    def _report_played(self) -> None:
        while self._starts and self._starts[0][0] < self.read_pos:
            pos, c = self._starts.popleft()
            t = self.out.time_of(pos, self.rate)  # from the callback's DAC stamps
            played = self.to_pipe_clock(t + self._pa_offset if t is not None else time.monotonic())
            self.publish(DubPlayed(c.seq, c.first_of_segment, c.src_end, c.start_at, played))

    def _watch(self) -> None:
        now_stream = time.monotonic() - self._pa_offset
        if not self._lost and (self._stream is None or now_stream - self._last_cb > self.lost_after_s
                               or not self._stream.active):
            self._lost = True
            self.stats.lost += 1
            log.info("dub stream: active=%s, %.2f s since the last callback",
                     self._stream is not None and self._stream.active, now_stream - self._last_cb)
            self.on_event("device_lost", f"dub device '{self.device.id}' lost; retrying")
            self._close()
            self._retry_at = time.monotonic() + 1.0
        elif self._lost and time.monotonic() >= self._retry_at:
            self._retry_at = time.monotonic() + 1.0
            try:
                self._open()
            except Exception as e:
                log.info("dub device reopen failed: %s", e)
                return
            self._lost = False
            self.stats.restored += 1
            self.on_event("device_restored", f"dub device '{self.device.id}' is back")
