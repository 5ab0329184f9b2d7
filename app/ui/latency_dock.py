"""The Latency dock: the gauges panel and the display timer that refreshes it.

The timer pulls a ``GaugeSnapshot`` from the session controller at ``DISPLAY_HZ``; nothing here
listens to the pipeline, so the GUI's cost does not grow with the event rate. 10 Hz, not 30: a
refresh (update and full repaint of the panel and its chart, offscreen) takes about 7 ms of the
GUI thread, so 30 Hz would spend a fifth of it on the gauges; on a 2-core machine
bench/gui_stall.py measured p99 timer lateness 37.6 ms at 10 Hz against a 50 ms target
(docs/BENCHMARKS.md); and latencies change once per segment, so a faster refresh shows nothing new."""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QDockWidget

from app.ui.gauges import GaugeSnapshot, GaugesPanel

DISPLAY_HZ = 10  # gauges and chart refresh rate (README states it)
PERCENTILES_EVERY = 4  # ticks between percentile summaries (each sorts every sample): 2.5 Hz


class LatencyDock(QDockWidget):
    def __init__(self, snapshot: Callable[..., GaugeSnapshot | None], parent=None):
        super().__init__("Latency", parent)
        self.setObjectName("latencyDock")  # saveState/restoreState find the dock by this name
        self.setFeatures(QDockWidget.DockWidgetMovable | QDockWidget.DockWidgetFloatable
                         | QDockWidget.DockWidgetClosable)
        self.gauges = GaugesPanel()
        self.setWidget(self.gauges)
        self.setMinimumWidth(380)
        self._snapshot = snapshot
        self._ticks = 0
        self._last_latency: dict = {}
        self.timer = QTimer(self)
        self.timer.setInterval(1000 // DISPLAY_HZ)
        self.timer.timeout.connect(self.tick)

    def tick(self, final: bool = False) -> None:
        """Hand the gauges the session's newest snapshot; percentiles only every few ticks (and
        at the end), the last ones staying on screen in between."""
        self._ticks += 1
        snap = self._snapshot(with_percentiles=final or self._ticks % PERCENTILES_EVERY == 0)
        if snap is not None:
            if not snap.latency_ms:
                snap.latency_ms = self._last_latency
            self._last_latency = snap.latency_ms
            self.gauges.update_snapshot(snap)
