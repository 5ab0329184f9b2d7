"""Latency gauges: per-stage and end-to-end percentiles, a scrolling chart of the last minutes,
queue depths, real-time factor, CPU/memory and the degradation level.

The panel never listens to the pipeline: the Latency dock's display timer hands it a
``GaugeSnapshot`` (``latency_dock.DISPLAY_HZ`` times a second), so its cost does not depend on how
fast audio or events arrive."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QGridLayout, QLabel, QProgressBar, QVBoxLayout, QWidget

CHART_SECONDS = 180.0

ROWS = (  # tracker key, label, what it measures
    ("asr_first_token", "ASR first token", "a word is heard → it first appears in a hypothesis"),
    ("mt_queue_wait", "MT queue wait", "a segment is committed → translation starts"),
    ("tts_first_audio", "TTS first audio", "a translation exists → its first dub audio is ready"),
    ("e2e_first_display", "First display (end to end)",
     "a word is heard → its first translation is shown (a first-pass draft, or the final if it came first)"),
    ("e2e_final", "Final text (end to end)", "a word is heard → its sentence's final translation is shown"),
    ("e2e_dub", "Dub (end to end)", "a segment's last word is heard → its dub starts playing"),
)


@dataclass
class GaugeSnapshot:
    now: float = 0.0  # pipeline clock, seconds since the session started
    latency_ms: dict = field(default_factory=dict)  # tracker.summary()
    points: list[tuple[float, str, float]] = field(default_factory=list)  # new (t, series, seconds)
    queues: dict = field(default_factory=dict)  # name -> current depth
    rtf: float | None = None
    audio_s: float = 0.0
    cpu_pct: float | None = None
    rss_mb: float | None = None
    policy_level: object = None
    policy_reason: str = ""


def _fmt_ms(v) -> str:
    if v is None:
        return "–"
    return f"{v / 1000:.2f} s" if v >= 10000 else f"{v:.0f}"


class GaugesPanel(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setAccessibleName("Latency gauges")
        self.updates = 0
        self.cells: dict[str, list[QLabel]] = {}
        grid = QGridLayout()
        grid.setHorizontalSpacing(14)
        grid.setVerticalSpacing(4)
        for col, head in enumerate(("Latency (ms)", "p50", "p95", "p99", "n")):
            h = QLabel(head)
            h.setObjectName("sectionTitle")
            grid.addWidget(h, 0, col, Qt.AlignLeft if col == 0 else Qt.AlignRight)
        for row, (key, label, tip) in enumerate(ROWS, 1):
            name = QLabel(label)
            name.setToolTip(tip)
            grid.addWidget(name, row, 0)
            cells = []
            for col in range(1, 5):
                c = QLabel("–")
                c.setObjectName("gaugeValue")
                c.setAlignment(Qt.AlignRight | Qt.AlignVCenter)
                c.setMinimumWidth(52)
                grid.addWidget(c, row, col)
                cells.append(c)
            self.cells[key] = cells
        grid.setColumnStretch(0, 1)

        pg.setConfigOptions(antialias=True)
        self.plot = pg.PlotWidget()
        self.plot.setMinimumHeight(190)
        self.plot.setMenuEnabled(False)
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.hideButtons()
        self.plot.setLabel("left", "latency", units="s")
        self.plot.setLabel("bottom", "seconds ago")
        self.plot.setXRange(-CHART_SECONDS, 0, padding=0)
        self.plot.showGrid(x=True, y=True, alpha=0.15)
        self.legend = self.plot.addLegend(offset=(8, 4), labelTextSize="8pt")
        self.series: dict[str, deque] = {k: deque() for k in ("e2e_subtitle", "e2e_final", "e2e_dub",
                                                                    "asr_first_token")}
        self.curves: dict[str, pg.PlotDataItem] = {}

        stats = QGridLayout()
        stats.setHorizontalSpacing(14)
        self.stat: dict[str, QLabel] = {}
        for i, (key, label) in enumerate((("segments", "MT queue"), ("translations", "TTS queue"),
                                          ("rtf", "Real-time factor"), ("audio", "Audio processed"),
                                          ("cpu", "CPU"), ("mem", "Memory"))):
            lab = QLabel(label)
            val = QLabel("–")
            val.setObjectName("gaugeValue")
            val.setAlignment(Qt.AlignRight | Qt.AlignVCenter)
            stats.addWidget(lab, i // 2, (i % 2) * 2)
            stats.addWidget(val, i // 2, (i % 2) * 2 + 1)
            self.stat[key] = val
        stats.setColumnStretch(0, 1)
        stats.setColumnStretch(2, 1)
        self.stat["rtf"].setToolTip("processing time per second of audio (below 1: keeps up)")

        self.level = QProgressBar()
        self.level.setRange(0, 3)
        self.level.setValue(0)
        self.level.setFormat("normal")
        self.level.setTextVisible(True)
        self.level.setAccessibleName("Degradation level")
        self.level_note = QLabel("No degradation events yet")
        self.level_note.setObjectName("sectionTitle")
        self.level_note.setWordWrap(True)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 8)
        lay.addLayout(grid)
        lay.addSpacing(6)
        lay.addWidget(self.plot, 1)
        lay.addSpacing(6)
        lay.addLayout(stats)
        t = QLabel("Degradation level")
        t.setObjectName("sectionTitle")
        lay.addSpacing(4)
        lay.addWidget(t)
        lay.addWidget(self.level)
        lay.addWidget(self.level_note)

    def set_theme(self, theme) -> None:
        self.plot.setBackground(theme.base)
        for ax in ("left", "bottom"):
            a = self.plot.getAxis(ax)
            a.setPen(pg.mkPen(theme.border))
            a.setTextPen(pg.mkPen(theme.dim_text))
        colours = {"e2e_subtitle": theme.chart_sub, "e2e_final": theme.warn, "e2e_dub": theme.chart_dub,
                   "asr_first_token": theme.chart_asr}
        names = {"e2e_subtitle": "first-pass subtitle", "e2e_final": "final text", "e2e_dub": "dub",
                 "asr_first_token": "ASR first token"}
        self.legend.clear()
        for key, colour in colours.items():
            if key in self.curves:
                self.plot.removeItem(self.curves[key])
            width = 1 if key == "asr_first_token" else 2
            self.curves[key] = self.plot.plot(
                [], [], pen=pg.mkPen(QColor(colour), width=width), name=names[key],
                symbol="o", symbolSize=4, symbolBrush=QColor(colour), symbolPen=None)
        self.legend.setLabelTextColor(theme.dim_text)
        self._redraw(0.0)

    def reset(self) -> None:
        for d in self.series.values():
            d.clear()
        for cells in self.cells.values():
            for c in cells:
                c.setText("–")
        for v in self.stat.values():
            v.setText("–")
        self.level.setValue(0)
        self.level.setFormat("normal")
        self.level_note.setText("No degradation events yet")
        self._redraw(0.0)

    def update_snapshot(self, s: GaugeSnapshot) -> None:
        self.updates += 1
        for key, cells in self.cells.items():
            d = s.latency_ms.get(key) or {}
            for c, k in zip(cells, ("p50", "p95", "p99", "n")):
                v = d.get(k)
                c.setText(str(v) if k == "n" and v is not None else _fmt_ms(v) if k != "n" else "–")
        for t, name, value in s.points:
            if name in self.series:
                self.series[name].append((t, value))
        self._redraw(s.now)
        q = s.queues
        self.stat["segments"].setText(str(q.get("segments", "–")))
        self.stat["translations"].setText(str(q.get("translations", "–")))
        self.stat["rtf"].setText(f"{s.rtf:.2f}" if s.rtf is not None else "–")
        self.stat["audio"].setText(f"{s.audio_s:.0f} s")
        self.stat["cpu"].setText(f"{s.cpu_pct:.0f} %" if s.cpu_pct is not None else "–")
        self.stat["mem"].setText(f"{s.rss_mb:.0f} MB" if s.rss_mb is not None else "–")
        if s.policy_level is not None:
            self.set_level(s.policy_level, s.policy_reason)

    def set_level(self, level, reason: str) -> None:
        try:
            n = int(getattr(level, "value", level))
        except (TypeError, ValueError):
            n = 0
        if n > self.level.maximum():
            self.level.setMaximum(n)
        self.level.setValue(max(0, n))
        name = getattr(level, "name", None)
        self.level.setFormat(f"level {n}" + (f" · {str(name).lower()}" if name else "") if n else "normal")
        self.level_note.setText(reason or ("full quality" if not n else ""))

    def _redraw(self, now: float) -> None:
        for name, d in self.series.items():
            while d and d[0][0] < now - CHART_SECONDS:
                d.popleft()
            if name in self.curves:
                self.curves[name].setData([t - now for t, _ in d], [v for _, v in d])
