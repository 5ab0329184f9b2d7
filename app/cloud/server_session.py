"""One client's session on the server: its pipeline, the audio it accepted (with each frame's
logical stamp), and its outbox of numbered events.

Threads: ``_on_event`` runs on the pipeline's threads and encodes each event there; everything
else runs on the event loop, where events are numbered in order. A number is given only to an
event already encoded, so the client's event numbers never skip (a skipped number would stall
its reorder buffer forever).
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import logging
from collections.abc import Callable

import numpy as np

from app.cloud import protocol as P
from app.cloud.ack import AnswerTracker
from app.cloud.limits import ServerLimits
from app.core.audio import BLOCK_S, SR
from app.pipeline.messages import DubChunk

log = logging.getLogger("relay.cloud.server")
PUSH_SAMPLES = int(BLOCK_S * SR)  # audio reaches the pipeline in blocks of at least this (one capture block)
DROPPABLE = ("partial", "preview", "metric")  # event kinds the outbox may drop when the client reads slowly
STAMPS = 4096  # frame stamps kept (one per pushed block at most): old audio is answered


class Outbox:
    """Server → client messages of one session, bounded in items and bytes. Events are numbered
    when they enter; past the soft bound partials, previews and metrics are dropped, past the
    hard bounds the client is too slow and ``on_overflow`` is called (the session then closes:
    committed text is never dropped silently)."""

    def __init__(self, limits: ServerLimits, on_overflow: Callable[[], None]):
        self.soft, self.items, self.max_bytes = limits.outbox_soft, limits.outbox_items, limits.outbox_bytes
        self.on_overflow = on_overflow
        self._q: collections.deque = collections.deque()
        self._ready = asyncio.Event()
        self.bytes = 0
        self.n = 0  # the last event number given
        self.dropped = 0
        self.closed = False

    def __len__(self) -> int:
        return len(self._q)

    def put_event(self, must: bool, number: Callable[[int], str | bytes]) -> None:
        if self.closed:
            return
        if len(self._q) >= self.items or self.bytes >= self.max_bytes:
            self.close()
            self.on_overflow()
            return
        if not must and len(self._q) >= self.soft:
            self.dropped += 1
            return
        self.n += 1
        self._append(number(self.n))

    def put_last(self, data: str | bytes) -> None:
        """A message after every event queued so far (``done``)."""
        if not self.closed:
            self._append(data)

    def _append(self, data) -> None:
        self._q.append(data)
        self.bytes += len(data)
        self._ready.set()

    async def get(self) -> str | bytes:
        while not self._q:
            self._ready.clear()
            await self._ready.wait()
        data = self._q.popleft()
        self.bytes -= len(data)
        return data

    def close(self) -> None:
        """Drop what is queued (dub audio included) and take nothing more."""
        self.closed = True
        self._q.clear()
        self.bytes = 0


class Session:
    """One client's pipeline (``pipe``: a built, not yet started RunningSession) and bookkeeping.
    ``on_fatal(code, message)`` is called on the loop when the session must close (overflow)."""

    def __init__(self, sid: str, hello: P.Hello, pipe, realtime: bool, token: int, limits: ServerLimits,
                 loop: asyncio.AbstractEventLoop, on_fatal: Callable[[str, str], None]):
        self.sid, self.hello, self.pipe, self.loop, self.token = sid, hello, pipe, loop, token
        self.base = hello.start_sample
        self.realtime = realtime
        self.off = self.base / SR
        self.next_sample = self.base  # received (pushed or pending)
        self.last_seq = -1
        self.frame_starts: list[int] = []
        self.frame_seqs: list[int] = []
        self._pending: list = []  # accepted samples not yet pushed (under one block)
        self._pending_n = 0
        self.closed = False
        self.t0 = 0.0
        self.outbox = Outbox(limits, lambda: on_fatal("slow_client", "the client does not read fast enough"))
        # a server session never exports its dub: keeping its audio would grow ~0.3 GB an hour
        pipe.record.keep_dub_audio = False
        self.answers = AnswerTracker(self.base, lambda: self.pipe.asr_stage.window_start)
        pipe.bus.subscribe(self.answers)
        pipe.bus.subscribe(self._on_event)

    @property
    def acked(self) -> int:
        return min(self.answers.poll(), self.next_sample - self._pending_n)

    def _stamp(self, sample: int) -> tuple[int, int]:
        i = bisect.bisect_right(self.frame_starts, sample) - 1
        return (self.frame_seqs[i] if i >= 0 else 0, int(sample))

    # -- pipeline threads ----------------------------------------------------------------------
    def _on_event(self, ev) -> None:
        """Encode the event on the pipeline's thread; the loop only numbers it."""
        if self.closed:
            return
        if isinstance(ev, DubChunk):
            stamp = self._stamp(self.base + int(round(ev.src_end * SR)))
            header = {"k": "dub", "seq": ev.seq, "sample_rate": ev.sample_rate, "text": ev.text,
                      "first": ev.first_of_segment, "src_end": round(ev.src_end + self.off, 3),
                      "speed": ev.speed, "skipped": ev.skipped}
            body = P.dub_body(header, ev.audio)
            item = (True, lambda n: P.number_dub(n, stamp, body))
        else:
            d = P.event_to_wire(ev, self.off)
            if d is None or (d["k"] == "final" and "final" not in self.hello.features):
                return  # a feature's events go only to a client granted it
            if d["k"] in ("committed", "segment") and d["words"]:
                sample = int(round(d["words"][-1][2] * SR))
            elif d["k"] in ("translation", "final"):
                sample = int(round(d["src_end"] * SR))
            else:
                sample = self.next_sample
            ts = self._stamp(sample)
            text = P.encode_json(d)  # ValueError for a non-finite number: the event is not sent
            # past the outbox's soft bound only these may go; committed text, segments and
            # finals are never dropped (past the hard bound the session closes instead)
            item = (d["k"] not in DROPPABLE, lambda n: P.number_event(n, ts, text))
        try:
            self.loop.call_soon_threadsafe(self._enqueue, item)
        except RuntimeError:  # the loop is closed: the server is shutting down
            pass

    def _enqueue(self, item) -> None:
        if not self.closed:
            self.outbox.put_event(*item)

    # -- event loop ----------------------------------------------------------------------------
    def accept_audio(self, fr: P.AudioFrame, now_s: float) -> int:
        """Check a frame against the session's timeline and push what is new; the count of new
        samples. Frames in order, no gap; a partly resent frame is trimmed, a wholly resent one
        is refused (``overlap``)."""
        if fr.seq <= self.last_seq:
            raise P.ProtocolError("sequence", f"frame seq {fr.seq} after {self.last_seq}")
        if fr.first_sample > self.next_sample:
            raise P.ProtocolError("gap", f"audio from sample {fr.first_sample}, expected {self.next_sample}")
        if fr.end_sample <= self.next_sample:
            raise P.ProtocolError("overlap", f"audio {fr.first_sample}-{fr.end_sample} was received already")
        samples = fr.samples[self.next_sample - fr.first_sample:]  # a resent overlap: keep what is new
        end = self.next_sample + len(samples)
        if self.realtime and (end - self.base) / SR > now_s + P.AUDIO_BURST_S:
            raise P.ProtocolError("rate", "audio arrives faster than real time")
        if not self.realtime and (end - self.acked) / SR > P.FAST_AHEAD_S:
            raise P.ProtocolError("rate", f"more than {P.FAST_AHEAD_S:.0f} s of audio ahead of the answers")
        self.last_seq = fr.seq
        if not self.frame_starts or self.next_sample - self.frame_starts[-1] >= PUSH_SAMPLES:
            self.frame_starts.append(self.next_sample)
            self.frame_seqs.append(fr.seq)
            if len(self.frame_starts) > STAMPS:
                del self.frame_starts[:STAMPS // 2], self.frame_seqs[:STAMPS // 2]
        self.next_sample = end
        # blocks of at least one capture block: the pipeline keeps an arrival stamp per block,
        # so a client sending tiny frames must not make it keep one per frame
        self._pending.append(samples)
        self._pending_n += len(samples)
        if self._pending_n >= PUSH_SAMPLES:
            self.flush()
        return len(samples)

    def flush(self) -> None:
        if not self._pending:
            return
        block = self._pending[0] if len(self._pending) == 1 else np.concatenate(self._pending)
        self._pending, self._pending_n = [], 0
        self.pipe.push_audio(block)

    def close(self) -> None:
        """Stop sending: drop the outbox (dub audio included) and any event still on its way."""
        self.closed = True
        self.outbox.close()
        self._pending, self._pending_n = [], 0
