"""The cloud client's local fallback: the warm local pipeline takes over from the audio the
server had not answered, and the session hands back to the server at a segment boundary.

``Failover`` is a part of ``app.cloud.client.CloudClient`` (it shares the client's state and
lock); it is kept apart so each file reads in one sitting."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading

from app.cloud.ack import AnswerTracker
from app.cloud.link import open_ws, reason
from app.cloud.views import fresh_models
from app.core.audio import SR
from app.pipeline.messages import CommittedWords, DubChunk, FinalSentence, Metric, Segment, TentativeText, Translation
from app.pipeline.protocols import Word
from app.session.build import build_pipeline

log = logging.getLogger("relay.cloud.client")
RETURN_NEAR_S = 2.0  # return to the cloud only when the local pipeline is this close to live


class Failover:
    def _go_local(self, reason: str, silent_since: float, detected: float) -> None:
        """Caller holds the lock. Feed the warm local pipeline from the acknowledged point."""
        written = self.ring.written
        # the pieces the cloud showed and had not finalised keep their first-pass text (one
        # failed final, before any local one); audio a delivered final answered is not redone
        self._close_open_pieces(detected, "lost")
        base = max(self._refeed_point(), int(round(self._final_end * SR)))
        base = min(max(base, written - self.ring.capacity), written)
        pipe = build_pipeline(fresh_models(self.models), self.opts, clock=self.clock)
        pipe.record.keep_dub_audio = False  # the client's own record keeps what the user asked for
        self._local_base, self._local_seq_base = base, self._max_seq + 1
        self._local_final_ids = {}
        if self._max_final < 0 and not self.record.pieces:  # the session's first producer decides
            self.record.final_mode = _makes_finals(pipe)
        self._local_answers = AnswerTracker(0, lambda p=pipe: p.asr_stage.window_start)
        pipe.bus.subscribe(self._local_answers)
        pipe.bus.subscribe(lambda ev, p=pipe: self._deliver_local(p, ev))
        pipe.start()
        backlog = self.ring.read(base, written)
        block = int(0.1 * SR)
        for off in range(0, len(backlog), block):
            pipe.push_audio(backlog[off:off + block].copy())
        self._local = pipe
        self._mode = "local"
        on_local = self.clock.now()
        sw = {"reason": reason, "at_s": round(on_local, 3), "silent_ms": round((detected - silent_since) * 1000, 1),
              "switch_ms": round((on_local - detected) * 1000, 1),
              "fallback_ms": round((on_local - silent_since) * 1000, 1),
              "refeed_from_s": round(base / SR, 3), "refed_s": round((written - base) / SR, 3)}
        self.switches.append(sw)
        self.bus.publish(Metric("fallback_ms", sw["fallback_ms"], on_local, (("reason", reason[:60]),)))
        self._set_status("local")

    def _deliver_local(self, pipe, ev) -> None:
        with self._lock:
            if pipe is not self._local or self._mode != "local":
                return
            off = self._local_base / SR

            def words(ws):
                return tuple(Word(w.text, w.start + off, w.end + off, w.probability) for w in ws)

            def seg_of(s):
                return dataclasses.replace(s, seq=s.seq + self._local_seq_base, words=words(s.words))

            if isinstance(ev, TentativeText):
                ev = dataclasses.replace(ev, words=words(ev.words))
            elif isinstance(ev, CommittedWords):
                keep = [i for i, w in enumerate(ev.words) if w.end + off > self._words_end + 0.05]
                if not keep:
                    return  # already shown by the cloud before it went away
                ev = CommittedWords(words([ev.words[i] for i in keep]), tuple(ev.first_seen_at[i] for i in keep),
                                    ev.emitted_at, ev.pause_after)
            elif isinstance(ev, Segment):
                ev = seg_of(ev)
                self._max_seq = max(self._max_seq, ev.seq)
            elif isinstance(ev, Translation):
                ev = dataclasses.replace(ev, seq=ev.seq + self._local_seq_base if ev.seq >= 0 else ev.seq,
                                         src_start=ev.src_start + off, src_end=ev.src_end + off,
                                         segment=seg_of(ev.segment) if ev.segment is not None else None)
                if not ev.preview and _makes_finals(pipe):
                    self._piece_shown(ev)
            elif isinstance(ev, FinalSentence):
                if ev.src_end + off <= self._final_end + 0.05 and not ev.covers:
                    return  # audio the cloud had finalised already (not re-fed: a safeguard)
                self._publish_final(dataclasses.replace(
                    ev, words=words(ev.words), src_start=ev.src_start + off, src_end=ev.src_end + off,
                    covers=tuple(c + self._local_seq_base for c in ev.covers)), self._local_final_ids)
                return
            elif isinstance(ev, DubChunk):
                start_at = max(ev.start_at, self._dub_end)
                self._dub_end = start_at + len(ev.audio) / ev.sample_rate
                # a two-pass pipeline speaks its finals (seq: a final's id), else its pieces
                seq = (self._local_final_ids.get(ev.seq, self._max_final) if _makes_finals(pipe)
                       else ev.seq + self._local_seq_base)
                ev = dataclasses.replace(ev, seq=seq, src_end=ev.src_end + off, start_at=start_at)
            self.bus.publish(ev)

    # -- reconnect and return ----------------------------------------------------------------------
    def _start_reconnect(self) -> None:
        self._loop.call_soon_threadsafe(lambda: self._tasks.append(self._loop.create_task(self._reconnect())))

    async def _reconnect(self) -> None:
        delay = 0.25
        while self._mode in ("local",) and not self._finishing:
            await asyncio.sleep(delay)
            try:
                ws = await open_ws(self.url, self.token, self.ctx, 2.0)
            except Exception:
                delay = min(2.0, delay * 2)
                continue
            if self._mode != "local" or self._finishing:  # back on the cloud, or ending, meanwhile
                await ws.close()
                return
            self._probe, delay = ws, 0.25
            self.cloud_available = True
            self._set_status("cloud-available")
            self._link(True)
            if self.auto_return:
                await self._try_return()
            while self._probe is ws and ws.state.name == "OPEN":
                await asyncio.sleep(0.1)
            self.cloud_available = False

    async def _try_return(self) -> None:
        """Hand back to the cloud at a boundary: nothing in flight locally and close to live.
        While the new session opens, audio only goes into the ring; it is sent from the
        hand-over point once the server welcomes the session."""
        for _ in range(600):
            ws = self._probe
            if ws is None or self._mode != "local" or self._finishing:
                return
            with self._lock:
                ans = self._local_answers
                point = self._local_base + (ans.poll() if ans else 0)
                # and every piece it showed finalised: its second pass ends with it
                ready = (ans is not None and ans.clean and not self._open_pieces
                         and self.ring.written - point <= RETURN_NEAR_S * SR)
                if ready:
                    old, detected, held_from = self._local, self.clock.now(), self.ring.written
                    self._probe, self._local, self._mode = None, None, "returning"
            if not ready:
                await asyncio.sleep(0.05)
                continue
            try:
                await self._open_session(point, ws, 5.0)
            except Exception as e:
                log.info("return to the cloud failed: %s", reason(e))
                with self._lock:  # the local pipeline carries on, with what arrived meanwhile
                    old.push_audio(self.ring.read(held_from, self.ring.written).copy())
                    self._local, self._mode = old, "local"
                # the reconnect loop that called this goes on trying (back in "local"); a second
                # loop beside it would later mark a session back on the cloud "cloud-available"
                return
            self.cloud_available = False
            self.returns.append({"at_s": round(detected, 3), "from_s": round(point / SR, 3),
                                 "switch_ms": round((self.clock.now() - detected) * 1000, 1)})
            threading.Thread(target=old.abort, name="relay-cloud-stop-local", daemon=True).start()
            return


def _makes_finals(pipe) -> bool:
    """The local pipeline runs a second pass (its record keeps finals): its dub speaks finals."""
    return bool(getattr(getattr(pipe, "record", None), "final_mode", False))
