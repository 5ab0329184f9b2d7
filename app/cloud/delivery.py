"""The cloud's events onto the client's bus: in the server's event order, never twice, renumbered
onto the session's timeline; a gap that does not close ends the cloud session.

``CloudDelivery`` is a part of ``app.cloud.client.CloudClient`` (it shares the client's state and
lock); it is kept apart so each file reads in one sitting."""

from __future__ import annotations

import dataclasses

from app.cloud import protocol as P
from app.core.audio import SR
from app.pipeline.messages import CommittedWords, DubChunk, FinalSentence, Segment, Translation

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
                shown = self._client_shown
                if shown is not None and shown.target_text(d["text"]) != d["text"]:
                    audio = audio * 0.0  # a server that predates the profanity setting said it: silence
                start_at = max(now, self._dub_end)
                self._dub_end = start_at + len(audio) / d["sample_rate"]
                # the dub speaks finals (its seq: the final's id), else the pieces
                seq = (self._cloud_final_ids.get(d["seq"], self._max_final) if self._cloud_finals
                       else self._seq_base + d["seq"])
                self.bus.publish(DubChunk(seq, audio, d["sample_rate"], d["text"], now, start_at,
                                          d["first"], d["src_end"], d.get("speed", 1.0), d.get("skipped", False)))
                return
            if d.get("k") not in P.EVENT_KINDS:
                return  # a kind of a later version (servers send those only to clients that ask)
            ev = P.wire_to_event(d, now, self._held)
            if isinstance(ev, FinalSentence):
                if not self._cloud_finals:
                    return
                own = [self._open_pieces[self._seq_base + c]["shown_at"] for c in ev.covers
                       if self._seq_base + c in self._open_pieces]
                shown = min(own) if own else ev.first_shown_at  # shown on this client's clock
                self._publish_final(dataclasses.replace(ev, first_shown_at=shown,
                                                        covers=tuple(self._seq_base + c for c in ev.covers)),
                                    self._cloud_final_ids)
                return
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
                if self._cloud_finals:
                    self._piece_shown(ev)
            self.bus.publish(ev)

    # -- finals (shared by the cloud and the local pipeline; the caller holds the lock) ----------
    def _piece_shown(self, tr: Translation) -> None:
        """A first-pass piece (segment + committed translation, client seqs) that a final will replace."""
        self._open_pieces[tr.seq] = {"source": tr.segment.text if tr.segment is not None else tr.source,
                                     "target": tr.target, "src_start": tr.src_start, "src_end": tr.src_end,
                                     "shown_at": tr.emitted_at}

    def _publish_final(self, fin: FinalSentence, ids: dict[int, int] | None = None) -> None:
        """A final with client seqs in ``covers``; it gets the next client id (``ids`` maps its
        producer's id to it, for the dub), and the pieces it covers are answered."""
        self._max_final += 1
        if ids is not None:
            ids[fin.id] = self._max_final
        fin = dataclasses.replace(fin, id=self._max_final)
        self._final_end = max(self._final_end, fin.src_end)
        for c in fin.covers:
            self._open_pieces.pop(c, None)
        self.bus.publish(fin)

    def _close_open_pieces(self, now: float, reason: str) -> None:
        """Pieces shown whose final will never come (the producer that would have made it is
        gone): one final keeping their first-pass text, marked ``failed``, as the second pass
        does when it cannot run, so the summary and exports still hold them."""
        if not self._open_pieces:
            return
        pieces = [self._open_pieces[s] for s in sorted(self._open_pieces)]
        sep = "" if self.opts.pair.split("-")[0] in ("zh", "ja") else " "
        source = sep.join(p["source"].strip() for p in pieces if p["source"].strip())
        target = " ".join(p["target"].strip() for p in pieces if p["target"].strip())
        shown = [p["shown_at"] for p in pieces if p["shown_at"] is not None]
        fin = FinalSentence(self._max_final + 1, (), source, target, pieces[0]["src_start"], pieces[-1]["src_end"],
                            now, min(shown) if shown else None, tuple(sorted(self._open_pieces)), source, target,
                            reason, True, now)
        self._publish_final(fin)
