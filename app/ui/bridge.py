"""The one object between the Qt-free pipeline and the window.

It subscribes to a pipeline's event bus (callbacks arrive on the pipeline's worker threads), keeps
the events in arrival order and hands them to the GUI thread in batches: the worker only appends
to a list and, when the list was empty, posts one wake-up. On the GUI thread the batch is
re-emitted as typed signals. Tentative text and translation previews are coalesced: within a
batch only the newest one is emitted, since each replaces the previous in place.
"""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Qt, Signal, Slot

from app.pipeline.messages import (CommittedWords, DubChunk, FinalSentence, Metric, Segment, TentativeText,
                                   Translation)
from app.pipeline.policy import PolicyTransition

# What the gauges' degradation level shows: the policy's level changes. Other policy and
# speculation traffic on the bus (PolicySignal, SpeculationEvent) carries no level.
POLICY_EVENTS = (PolicyTransition,)


def is_policy_event(ev) -> bool:
    """An adaptive-degradation level change (``level``, ``reason``), known by its type."""
    return isinstance(ev, POLICY_EVENTS)


class EventBridge(QObject):
    tentative = Signal(object)  # TentativeText
    committed = Signal(object)  # CommittedWords
    segment = Signal(object)  # Segment
    translation = Signal(object)  # Translation (committed)
    preview = Signal(object)  # Translation with preview=True
    final = Signal(object)  # FinalSentence: the second pass's sentence, replacing first-pass pieces
    dub = Signal(object)  # DubChunk
    metric = Signal(object)  # Metric
    policy = Signal(object)  # PolicyTransition: the degradation level changed
    _wake = Signal()

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._lock = threading.Lock()
        self._pending: list = []
        self._posted = False
        self.delivered = 0
        self._wake.connect(self.flush, Qt.QueuedConnection)

    def __call__(self, ev) -> None:
        """Called on pipeline threads: append and, at most once per batch, post a wake-up."""
        with self._lock:
            self._pending.append(ev)
            if self._posted:
                return
            self._posted = True
        self._wake.emit()

    @Slot()
    def flush(self) -> None:
        """Deliver everything received so far (GUI thread)."""
        with self._lock:
            batch, self._pending = self._pending, []
            self._posted = False
        if not batch:
            return
        last_tentative = max((i for i, e in enumerate(batch) if isinstance(e, TentativeText)), default=-1)
        last_preview = max((i for i, e in enumerate(batch) if isinstance(e, Translation) and e.preview),
                           default=-1)
        for i, ev in enumerate(batch):
            self.delivered += 1
            if isinstance(ev, TentativeText):
                if i == last_tentative:
                    self.tentative.emit(ev)
            elif isinstance(ev, Translation):
                if not ev.preview:
                    self.translation.emit(ev)
                elif i == last_preview:
                    self.preview.emit(ev)
            elif isinstance(ev, FinalSentence):
                self.final.emit(ev)
            elif isinstance(ev, Segment):
                self.segment.emit(ev)
            elif isinstance(ev, CommittedWords):
                self.committed.emit(ev)
            elif isinstance(ev, DubChunk):
                self.dub.emit(ev)
            elif isinstance(ev, Metric):
                self.metric.emit(ev)
            elif is_policy_event(ev):
                self.policy.emit(ev)
