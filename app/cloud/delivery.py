"""The cloud's events onto the client's bus: in the server's event order, never twice, renumbered
onto the session's timeline; a gap that does not close ends the cloud session.

``CloudDelivery`` is a part of ``app.cloud.client.CloudClient`` (it shares the client's state and
lock); it is kept apart so each file reads in one sitting."""

from __future__ import annotations

import dataclasses

from app.cloud import protocol as P
from app.core.audio import SR
from app.pipeline.messages import CommittedWords, DubChunk, Segment, Translation

REORDER_MAX = 1024  # events held back for a missing event number; past it the link counts as lost
GAP_TIMEOUT_S = 2.0  # a missing event number this long while later ones arrive: the server lost it


class CloudDelivery:
    def _insert(self, n: int, item: tuple) -> None:
        """Reorder by the server's event number; release in order, never twice."""
        if n < self._next_n:
            return
        self._reorder[n] = item
        while self._next_n in self._reorder:
            it = self._reorder.pop(self._next_n)
            self._next_n += 1
            self._deliver_cloud(*it)
        if not self._reorder:
            self._gap_since = None
        elif self._gap_since is None:
            self._gap_since = self.clock.now()
        self._gap_lost()

    def _gap_lost(self) -> bool:
        """A missing event number that does not come (the reorder buffer overflows, or the gap
        outlasts GAP_TIMEOUT_S) ends the cloud session like a dead link: the local pipeline
        takes over from the audio the server had answered."""
        since = self._gap_since
        if since is None or (len(self._reorder) <= REORDER_MAX and self.clock.now() - since <= GAP_TIMEOUT_S):
            return False
        self._lost(f"event {self._next_n} never came from the server", self._ws)
        return True

    def _deliver_cloud(self, kind: str, d: dict, audio) -> None:
        with self._lock:
            if self._mode != "cloud":
                return
            now = self.clock.now()
            if kind == "dub":
                start_at = max(now, self._dub_end)
                self._dub_end = start_at + len(audio) / d["sample_rate"]
                self.bus.publish(DubChunk(self._seq_base + d["seq"], audio, d["sample_rate"], d["text"], now, start_at,
                                          d["first"], d["src_end"], d.get("speed", 1.0), d.get("skipped", False)))
                return
            ev = P.wire_to_event(d, now, self._held)
            if isinstance(ev, Segment):
                self._held[ev.seq] = ev  # shown with its translation: acknowledged together
                return
            if isinstance(ev, CommittedWords) and ev.words:
                self._words_end = max(self._words_end, ev.words[-1].end)
            if isinstance(ev, Translation) and not ev.preview:
                seg = self._held.pop(ev.seq, None)
                seq = self._seq_base + ev.seq
                self._max_seq = max(self._max_seq, seq)
                if seg is not None:
                    seg = dataclasses.replace(seg, seq=seq)
                    self.bus.publish(seg)
                ev = dataclasses.replace(ev, seq=seq, segment=seg)
                self._answered = max(self._answered, int(round(ev.src_end * SR)))
            self.bus.publish(ev)
