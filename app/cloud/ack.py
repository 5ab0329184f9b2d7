"""The acknowledged point of a running pipeline: every sample before it has been answered --
its speech committed, cut into segments and translated -- so a stand-in fed from there loses no
speech and repeats no committed segment. Used by the server (sent in heartbeats) and by the
client's local pipeline (where it may hand back to the cloud)."""

from __future__ import annotations

from app.core.audio import SR
from app.pipeline.messages import CommittedWords, Segment, TentativeText, Translation


class AnswerTracker:
    """Bus observer. ``base`` is the absolute sample index of the pipeline's sample 0;
    ``window_start`` reads the recogniser's window start (samples, pipeline-relative)."""

    def __init__(self, base: int, window_start):
        self.base = base
        self._window_start = window_start
        self._pending: set[int] = set()
        self._answered = base
        self._clean = True
        self._clean_at = base
        self.acked = base

    @property
    def clean(self) -> bool:
        """Nothing in flight: no tentative or uncut committed words, no untranslated segment."""
        return self._clean and not self._pending

    def __call__(self, ev) -> None:
        if isinstance(ev, CommittedWords):
            self._clean = False
        elif isinstance(ev, Segment):
            self._pending.add(ev.seq)
            self._clean = False
        elif isinstance(ev, Translation) and not ev.preview:
            self._pending.discard(ev.seq)
            self._answered = max(self._answered, self.base + int(round(ev.src_end * SR)))
        elif isinstance(ev, TentativeText):
            self._clean = not ev.words and not ev.committed_tail
            if self._clean:  # read on the recogniser's thread, right after its step
                self._clean_at = self.base + self._window_start()
        self.acked = max(self.acked, self._answered, self._clean_at if self.clean else self.base)

    def poll(self) -> int:
        """The acknowledged point now. In silence the recogniser slides its window without
        publishing anything; when nothing is in flight the window start is answered too."""
        if self.clean:
            self.acked = max(self.acked, self.base + self._window_start())
        return self.acked
