"""The main window: session controls, live subtitles, latency gauges, presenter overlay."""

from __future__ import annotations

import os
import threading

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QAction, QActionGroup, QColor, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QComboBox,
    QDockWidget,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from app import session
from app.core.errors import UserError
from app.ui import theme as themes
from app.ui.bridge import EventBridge
from app.ui.choices import DeviceChoices, available_pairs, language_name, list_audio_devices
from app.ui.cloud import CloudLink
from app.ui.controller import FILE_SOURCE, SessionController, StartRequest
from app.ui.about import AboutDialog
from app.ui.dialogs import CloudDialog, SummaryDialog
from app.ui.gauges import GaugesPanel
from app.ui.overlay import SubtitleOverlay
from app.ui.settings import Settings, load_token, save_token
from app.ui.subtitles_view import SubtitlesView
from app.ui.transcript import TranscriptModel
from app.ui.widgets import StatusLight, ToggleSwitch

DISPLAY_HZ = 10  # gauges and chart; well under the 30 Hz ceiling
AUDIO_FILTER = "Audio files (*.wav *.flac *.mp3 *.ogg *.opus *.m4a *.aac *.webm *.mp4);;All files (*)"


class MainWindow(QMainWindow):
    devices_ready = Signal(object)

    def __init__(self, settings: Settings | None = None, list_devices=list_audio_devices,
                 preload: bool | None = None):
        super().__init__()
        self.settings = settings or Settings()
        self.setWindowTitle("Relay — live interpretation")
        self.setObjectName("relayMain")
        self.message_box: QMessageBox | None = None  # the last non-blocking dialog (tests read it)
        self.summary_dialog: SummaryDialog | None = None
        self.last_summary: dict | None = None
        self._close_when_idle = False
        self._session_token = ""  # a token that could not go to the keyring lives here, for this run
        self.theme = themes.get(self.settings.get("theme"))

        self.bridge = EventBridge(self)
        self.controller = SessionController(self.bridge, self)
        self.model = TranscriptModel(self)
        self.cloud = CloudLink(self)
        self.overlay = SubtitleOverlay(self.settings)
        self.overlay.hidden_by_user.connect(lambda: self.act_overlay.setChecked(False))

        self.display_timer = QTimer(self)
        self.display_timer.setInterval(1000 // DISPLAY_HZ)
        self.display_timer.timeout.connect(self._tick)
        self._ticks = 0
        self._last_latency: dict = {}
        self._build_controls()
        self.subtitles = SubtitlesView(self.model)
        self.gauges = GaugesPanel()
        self.setCentralWidget(self._central())
        dock = QDockWidget("Latency", self)
        dock.setObjectName("latencyDock")
        dock.setFeatures(QDockWidget.DockWidgetMovable | QDockWidget.DockWidgetFloatable
                         | QDockWidget.DockWidgetClosable)
        dock.setWidget(self.gauges)
        dock.setMinimumWidth(380)
        self.addDockWidget(Qt.RightDockWidgetArea, dock)
        self.gauges_dock = dock
        self._build_status_bar()
        self._build_menus()
        self._connect()

        self._populate_pairs()
        self._restore()
        self.apply_theme(self.settings.get("theme"))
        self._on_state("idle")
        self.cloud_switch.setChecked(False)
        self._update_cloud_light(self.cloud.state, self.cloud.message)

        # the pair's models load in the background while the window is up ("Load models at
        # launch"), and again after the pair changes: Start then begins at once
        self._preload_on = self.settings.get("preload_models") if preload is None else preload
        self._preload_timer = QTimer(self)
        self._preload_timer.setSingleShot(True)
        self._preload_timer.setInterval(400)
        self._preload_timer.timeout.connect(self.preload_models)
        self.pair.currentIndexChanged.connect(lambda *_: self._preload_on and self._preload_timer.start())
        self.controller.preloaded.connect(self._on_preloaded)
        if self._preload_on:
            QTimer.singleShot(0, self.preload_models)
        self.exporter = None  # Prometheus metrics (Session ▸ Metrics export…)
        self.metrics_label = QLabel("")
        self.metrics_label.setObjectName("metricsLabel")
        self.statusBar().addPermanentWidget(self.metrics_label)
        self.metrics_label.hide()
        if self.settings.get("metrics_enabled"):
            self.set_metrics(True, self.settings.get("metrics_port"), quiet=True)

        self.devices_ready.connect(self._on_devices)
        threading.Thread(target=lambda: self.devices_ready.emit(list_devices()), name="relay-devices",
                         daemon=True).start()

    # -- construction -------------------------------------------------------------------------
    def _build_controls(self) -> None:
        self.source = QComboBox()
        self.source.setAccessibleName("Audio source")
        self.source.addItem("Audio file", FILE_SOURCE)
        self.file_edit = QLineEdit()
        self.file_edit.setPlaceholderText("Choose an audio file…")
        self.file_edit.setAccessibleName("Audio file path")
        self.browse = QPushButton("&Browse…")
        self.pair = QComboBox()
        self.pair.setAccessibleName("Language pair")
        self.dub = QCheckBox("&Dub")
        self.dub.setToolTip("Speak the translation")
        self.output = QComboBox()
        self.output.setAccessibleName("Dub output device")
        self.output.addItem("Keep in memory (export WAV)", "")
        self.volume = QSlider(Qt.Horizontal)
        self.volume.setRange(0, 100)
        self.volume.setFixedWidth(90)
        self.volume.setAccessibleName("Dub volume")
        self.passthrough = QCheckBox("&Original")
        self.passthrough.setToolTip("Play the original under the dub, ducked while the dub speaks "
                                    "(live sources with an output device)")
        self.duck = QSlider(Qt.Horizontal)
        self.duck.setRange(0, 100)
        self.duck.setFixedWidth(80)
        self.duck.setAccessibleName("Level of the original while the dub speaks")
        self.duck_value = QLabel()
        self.duck_value.setMinimumWidth(36)
        for combo, n in ((self.source, 16), (self.pair, 14), (self.output, 14)):
            combo.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(n)
        self.start_button = QPushButton("Start")
        self.start_button.setObjectName("startButton")
        self.start_button.setToolTip("Start or stop the session (F5)")
        self.cloud_switch = ToggleSwitch()
        self.cloud_switch.setAccessibleName("Run in the cloud")
        self.cloud_switch.setToolTip("Local / cloud")
        self.cloud_light = StatusLight()
        self.cloud_label = QLabel("Local")

    def _central(self) -> QWidget:
        def labelled(text: str, w: QWidget) -> QLabel:
            lab = QLabel(text)
            lab.setBuddy(w)
            lab.setObjectName("sectionTitle")
            return lab

        row1 = QHBoxLayout()
        row1.addWidget(labelled("&Source", self.source))
        row1.addWidget(self.source, 2)
        row1.addWidget(self.file_edit, 3)
        row1.addWidget(self.browse)
        row1.addSpacing(12)
        row1.addWidget(labelled("&Languages", self.pair))
        row1.addWidget(self.pair, 1)
        row1.addSpacing(12)
        row1.addWidget(self.start_button)

        row2 = QHBoxLayout()
        row2.addWidget(self.dub)
        row2.addWidget(labelled("O&utput", self.output))
        row2.addWidget(self.output, 2)
        row2.addWidget(labelled("&Volume", self.volume))
        row2.addWidget(self.volume)
        row2.addSpacing(12)
        row2.addWidget(self.passthrough)
        row2.addWidget(labelled("Duc&k", self.duck))
        row2.addWidget(self.duck)
        row2.addWidget(self.duck_value)
        row2.addStretch(1)
        row2.addWidget(labelled("&Cloud", self.cloud_switch))
        row2.addWidget(self.cloud_switch)
        row2.addSpacing(4)
        row2.addWidget(self.cloud_light)
        row2.addWidget(self.cloud_label)

        w = QWidget()
        lay = QVBoxLayout(w)
        lay.setContentsMargins(10, 8, 6, 6)
        lay.setSpacing(8)
        lay.addLayout(row1)
        lay.addLayout(row2)
        lay.addWidget(self.subtitles, 1)
        return w

    def _build_status_bar(self) -> None:
        self.status_label = QLabel("Ready")
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)  # busy indicator while models load and warm up
        self.progress.setFixedWidth(160)
        self.progress.setTextVisible(False)
        self.progress.hide()
        self.live_badge = QLabel("LIVE")
        self.live_badge.setObjectName("liveBadge")
        self.live_badge.hide()
        sb = self.statusBar()
        sb.addWidget(self.status_label, 1)
        sb.addPermanentWidget(self.live_badge)
        sb.addPermanentWidget(self.progress)

    def _action(self, menu, text: str, slot, shortcut=None, checkable=False) -> QAction:
        a = QAction(text, self)
        if shortcut:
            a.setShortcut(QKeySequence(shortcut))
        a.setCheckable(checkable)
        (a.toggled if checkable else a.triggered).connect(slot)
        menu.addAction(a)
        return a

    def _build_menus(self) -> None:
        mb = self.menuBar()
        f = mb.addMenu("&File")
        self._action(f, "&Open audio file…", self.choose_file, QKeySequence.Open)
        f.addSeparator()
        self.act_srt = self._action(f, "Export subtitles as &SRT…", lambda: self.export_dialog("srt"), "Ctrl+E")
        self._action(f, "Export subtitles as &VTT…", lambda: self.export_dialog("vtt"), "Ctrl+Shift+E")
        self._action(f, "Export transcript as &text…", lambda: self.export_dialog("txt"), "Ctrl+Shift+T")
        self.act_dub = self._action(f, "Export &dub as WAV…", self.export_dub_dialog, "Ctrl+Shift+D")
        f.addSeparator()
        self._action(f, "&Quit", self.close, QKeySequence.Quit)

        e = mb.addMenu("&Edit")
        self._action(e, "&Copy transcript", self.copy_transcript, "Ctrl+Shift+C")
        self._action(e, "C&lear transcript", self.clear_transcript, "Ctrl+K")
        self._action(e, "Co&rrect selected line", self._edit_current, "F2")
        e.addSeparator()
        self._action(e, "&Reset settings…", self.reset_settings)

        s = mb.addMenu("&Session")
        self.act_start = self._action(s, "&Start", self.toggle_session, "F5")
        self._action(s, "&Cloud server…", self.cloud_settings, "Ctrl+,")
        self._action(s, "&Metrics export…", self.metrics_settings)
        self.act_preload = self._action(s, "&Load models at launch", self.set_preload, checkable=True)
        self.act_preload.setChecked(self.settings.get("preload_models"))
        self.act_summary = self._action(s, "Last session s&ummary", self.show_summary)

        v = mb.addMenu("&View")
        self.act_overlay = self._action(v, "Presenter &overlay", self.set_overlay, "F8", checkable=True)
        self.act_overlay_src = self._action(v, "Overlay shows &source line", self._overlay_source, checkable=True)
        self.act_gauges = self.gauges_dock.toggleViewAction()
        self.act_gauges.setShortcut(QKeySequence("F9"))
        v.addAction(self.act_gauges)
        v.addSeparator()
        layout_group = QActionGroup(self)
        self.act_side = self._action(v, "Side &by side", lambda on: on and self.set_layout("side"), "Ctrl+1", True)
        self.act_stacked = self._action(v, "S&tacked", lambda on: on and self.set_layout("stacked"), "Ctrl+2", True)
        layout_group.addAction(self.act_side)
        layout_group.addAction(self.act_stacked)
        v.addSeparator()
        self._action(v, "&Larger text", lambda: self.set_font_size(self.settings.get("font_size") + 1),
                     QKeySequence.ZoomIn)
        self._action(v, "S&maller text", lambda: self.set_font_size(self.settings.get("font_size") - 1),
                     QKeySequence.ZoomOut)
        th = v.addMenu("T&heme")
        theme_group = QActionGroup(self)
        self.theme_actions = {}
        for name, t in themes.THEMES.items():
            a = self._action(th, t.title, lambda on, n=name: on and self.apply_theme(n), checkable=True)
            theme_group.addAction(a)
            self.theme_actions[name] = a

        h = mb.addMenu("&Help")
        self._action(h, "&Model packs…", self.model_packs)
        self._action(h, "&About Relay", self.about)

    def _connect(self) -> None:
        b = self.bridge
        b.segment.connect(lambda ev: self.model.add_segment(ev.seq, ev.text, ev.src_start, ev.src_end,
                                                            ev.emitted_at))
        b.translation.connect(self._on_translation)
        b.tentative.connect(self._on_tentative)
        b.preview.connect(self._on_preview)
        b.policy.connect(lambda ev: self.gauges.set_level(ev.level, str(getattr(ev, "reason", "") or "")))
        c = self.controller
        c.status.connect(self.set_status)
        c.state_changed.connect(self._on_state)
        c.stopped.connect(self._on_stopped)
        c.started.connect(self._attach_metrics)
        c.failed.connect(lambda msg: self.show_message("Cannot start", msg, QMessageBox.Warning))
        c.models_missing.connect(self._on_models_missing)
        self.cloud.changed.connect(self._update_cloud_light)
        self.controller.cloud_status.connect(self._on_session_cloud)
        self.start_button.clicked.connect(self.toggle_session)
        self.browse.clicked.connect(self.choose_file)
        self.source.currentIndexChanged.connect(self._on_source)
        self.dub.toggled.connect(self._sync_dub_controls)
        self.passthrough.toggled.connect(self._sync_dub_controls)
        self.duck.valueChanged.connect(lambda v: self.duck_value.setText(f"{v} %"))
        self.cloud_switch.toggled.connect(self._on_cloud_switch)
        self.pair.currentIndexChanged.connect(self._configure_view)

    # -- settings ------------------------------------------------------------------------------
    def _restore(self) -> None:
        st = self.settings
        geo = st.get_bytes("geometry")
        if geo is None or not self.restoreGeometry(geo):
            self.resize(1280, 800)
        state = st.get_bytes("window_state")
        if state is not None:
            self.restoreState(state)
        self.file_edit.setText(st.get("file_path"))
        i = self.pair.findData(st.get("pair"))
        if i >= 0:
            self.pair.setCurrentIndex(i)
        self.dub.setChecked(st.get("dub_enabled"))
        self.volume.setValue(st.get("volume"))
        self.passthrough.setChecked(st.get("passthrough"))
        self.duck.setValue(st.get("duck"))
        self.duck_value.setText(f"{self.duck.value()} %")
        (self.act_stacked if st.get("layout") == "stacked" else self.act_side).setChecked(True)
        self.act_overlay_src.setChecked(st.get("overlay_source"))
        self._on_source()
        self._sync_dub_controls()

    def save_settings(self) -> None:
        st = self.settings
        st.set_bytes("geometry", self.saveGeometry())
        st.set_bytes("window_state", self.saveState())
        st.set("source", self.source.currentData() or FILE_SOURCE)
        st.set("file_path", self.file_edit.text().strip())
        if self.pair.currentData():
            st.set("pair", self.pair.currentData())
        st.set("dub_enabled", self.dub.isChecked())
        st.set("dub_device", self.output.currentData() or "")
        st.set("volume", self.volume.value())
        st.set("passthrough", self.passthrough.isChecked())
        st.set("duck", self.duck.value())
        st.sync()

    def reset_settings(self) -> None:
        self.settings.reset()
        self.resize(1280, 800)
        self._restore()
        self.apply_theme("dark")
        self.overlay.apply_settings()
        self.overlay.resize(1000, 130)
        self.set_status(f"Settings reset to defaults ({self.settings.path})")

    # -- choices -------------------------------------------------------------------------------
    def _populate_pairs(self) -> None:
        self.pair.clear()
        try:
            pairs = available_pairs()
        except Exception as e:  # an unreadable model folder must not stop the window opening
            pairs = []
            self.set_status(f"cannot read the installed models: {e}")
        for pair, label, note in pairs:
            self.pair.addItem(label, pair)
            if note:
                self.pair.setItemData(self.pair.count() - 1, note, Qt.ToolTipRole)
        if not pairs:
            self.pair.addItem("No models installed", "zh-en")
            self.pair.setToolTip("Install the model packs with: relay models install")

    def _on_devices(self, dc: DeviceChoices) -> None:
        want_src, want_sink = self.settings.get("source"), self.settings.get("dub_device")
        for dev_id, label in dc.sources:
            self.source.addItem(label, dev_id)
        for dev_id, label in dc.sinks:
            self.output.addItem(label, dev_id)
        i = self.source.findData(want_src)
        if i >= 0:
            self.source.setCurrentIndex(i)
        i = self.output.findData(want_sink)
        if i >= 0:
            self.output.setCurrentIndex(i)
        if dc.notes and not self.controller.busy:
            self.set_status(dc.notes[0])
        self._sync_dub_controls()

    def choose_file(self) -> None:
        start = os.path.dirname(self.file_edit.text()) or str(session.DEMO_CLIP.parent)
        path, _ = QFileDialog.getOpenFileName(self, "Choose an audio file", start, AUDIO_FILTER)
        if path:
            self.set_file(path)

    def set_file(self, path: str) -> bool:
        """Use this file as the source; a file that is not audio is refused with a message."""
        problem = probe_audio(path)
        if problem:
            self.show_message("Not an audio file", f"Relay cannot use this file:\n{problem}", QMessageBox.Warning)
            return False
        self.file_edit.setText(path)
        self.source.setCurrentIndex(self.source.findData(FILE_SOURCE))
        self.set_status(f"Source: {os.path.basename(path)}")
        return True

    def _on_source(self, *_a) -> None:
        is_file = self.source.currentData() == FILE_SOURCE
        self.file_edit.setVisible(is_file)
        self.browse.setVisible(is_file)
        self._sync_dub_controls()

    def _sync_dub_controls(self, *_a) -> None:
        on = self.dub.isChecked() and not self.controller.busy
        for w in (self.output, self.volume):
            w.setEnabled(on)
        live_out = on and bool(self.output.currentData()) and self.source.currentData() != FILE_SOURCE
        self.passthrough.setEnabled(live_out)
        self.duck.setEnabled(live_out and self.passthrough.isChecked())

    def _configure_view(self, *_a) -> None:
        pair = self.pair.currentData() or "zh-en"
        src, _, tgt = pair.partition("-")
        self.subtitles.configure(self.settings.get("layout"), self.settings.get("font_size"), self.theme,
                                 language_name(src), language_name(tgt))

    # -- session -------------------------------------------------------------------------------
    def request(self) -> StartRequest:
        opts = session.SessionOptions(pair=self.pair.currentData() or "zh-en", no_tts=not self.dub.isChecked())
        return StartRequest(source=self.source.currentData() or FILE_SOURCE, opts=opts,
                            file_path=self.file_edit.text().strip(), dub=self.dub.isChecked(),
                            dub_device=self.output.currentData() or None,
                            passthrough=self.passthrough.isChecked() and self.passthrough.isEnabled(),
                            duck=self.duck.value() / 100, volume=self.volume.value() / 100,
                            cloud=self._cloud_request())

    def _cloud_request(self) -> tuple | None:
        """(url, token, ca) when the switch is on and a server is configured; else local."""
        url = self.cloud_url()
        if not (self.cloud_switch.isChecked() and url):
            return None
        return url, load_token(url) or self._session_token, self.settings.get("cloud_ca") or None

    def _on_session_cloud(self, status: str) -> None:
        """The running session's link, as the cloud client reports it."""
        url = self.cloud_url()
        state, msg = {"cloud": ("cloud", f"cloud connected: {url}"),
                      "cloud-lost": ("lost", "cloud lost → local fallback: the local models carry on"),
                      "local": ("lost", "cloud unreachable → running on the local models"),
                      "cloud-available": ("lost", "cloud is back: switching at the next segment boundary")}.get(
            status, (None, None))
        if state is not None:
            self.cloud._set(state, msg)

    def toggle_session(self) -> None:
        if self.controller.busy:
            self.controller.stop()
        else:
            self.start_session()

    def start_session(self, req: StartRequest | None = None) -> None:
        if self.controller.busy:
            return
        req = req or self.request()
        if req.source == FILE_SOURCE and not req.file_path:
            self.show_message("Choose an audio file", "Choose the audio file to interpret (File → Open audio "
                              "file…), or pick a live source.", QMessageBox.Information)
            return
        if self.cloud_switch.isChecked() and not self.cloud.in_cloud:
            self.set_status(self.cloud.message)
        self.save_settings()
        self.model.clear()
        self.gauges.reset()
        self.overlay.set_text("", "")
        self.model.set_live_active(True)
        self.subtitles.scroll_to_live()
        self.controller.start(req)

    def _on_state(self, state: str) -> None:
        busy = state != "idle"
        self.start_button.setText({"idle": "Start", "loading": "Cancel", "running": "Stop",
                                   "stopping": "Stopping…"}[state])
        self.start_button.setMinimumWidth(96)
        self.start_button.setProperty("running", state in ("running", "loading"))
        self.start_button.style().unpolish(self.start_button)
        self.start_button.style().polish(self.start_button)
        self.start_button.setEnabled(state != "stopping")
        self.act_start.setText("&Stop" if busy else "&Start")
        self.progress.setVisible(state in ("loading", "stopping"))
        self.live_badge.setVisible(state == "running")
        for w in (self.source, self.file_edit, self.browse, self.pair, self.dub, self.cloud_switch):
            w.setEnabled(not busy)
        self._sync_dub_controls()
        if state == "loading":
            self.set_status("Loading models…")
        if state == "running":
            self.display_timer.start()
        elif state == "idle":
            self.display_timer.stop()

    def _on_stopped(self, summary) -> None:
        if summary is not None:
            self.model.reconcile(summary.get("segments") or [])
        self.model.set_live_active(False)
        self._tick(final=True)
        self.display_timer.stop()
        if summary is not None:
            self.last_summary = summary
            n = len(summary.get("segments") or [])
            self.set_status(f"Session ended: {n} segments, {summary.get('audio_s', 0):.0f} s of audio"
                            + (f" — {summary['error']}" if summary.get("error") else ""))
            if not self._close_when_idle:
                self.show_summary()
        if self._close_when_idle:
            self.close()

    def _on_models_missing(self, msg: str) -> None:
        self.show_message("Model pack missing", msg[:1].upper() + msg[1:] + ".\n\nRun the command in a terminal, "
                          "then start again.", QMessageBox.Warning)

    def _on_translation(self, ev) -> None:
        self.model.set_translation(ev.seq, ev.target, ev.emitted_at)
        if ev.target.strip() and self.overlay.isVisible():
            self.overlay.set_text(ev.target.strip(), ev.source)

    def _on_tentative(self, ev) -> None:
        self.model.set_tentative(ev.committed_tail, ev.text)

    def _on_preview(self, ev) -> None:
        self.model.set_preview(ev.target)
        if ev.target.strip() and self.overlay.isVisible():
            self.overlay.set_text(ev.target.strip(), ev.source, tentative=True)

    def _tick(self, final: bool = False) -> None:
        self._ticks += 1
        snap = self.controller.snapshot(with_percentiles=final or self._ticks % 4 == 0)
        if snap is not None:
            if not snap.latency_ms:
                snap.latency_ms = self._last_latency
            self._last_latency = snap.latency_ms
            self.gauges.update_snapshot(snap)

    # -- export --------------------------------------------------------------------------------
    def export_text(self, fmt: str) -> str:
        from app.session.subtitles import to_srt, to_vtt

        segs = self.model.segments()
        return {"srt": to_srt, "vtt": to_vtt}[fmt](segs) if fmt in ("srt", "vtt") else self.model.plain_text()

    def export_to(self, path: str, fmt: str) -> bool:
        from app.core.errors import UserError
        from app.session.subtitles import write_text

        if not self.model.segments():
            self.show_message("Nothing to export", "The transcript is empty.", QMessageBox.Information)
            return False
        try:
            write_text(path, self.export_text(fmt))
        except UserError as e:
            self.show_message("Export failed", str(e), QMessageBox.Warning)
            return False
        self.set_status(f"Exported {os.path.basename(path)}")
        return True

    def export_dialog(self, fmt: str) -> None:
        names = {"srt": "SubRip subtitles (*.srt)", "vtt": "WebVTT subtitles (*.vtt)", "txt": "Plain text (*.txt)"}
        path, _ = QFileDialog.getSaveFileName(self, "Export", f"relay-session.{fmt}", names[fmt])
        if path:
            self.export_to(path, fmt)

    def export_dub_to(self, path: str) -> bool:
        from app.audio.files import write_wav
        from app.core.errors import UserError

        pipe = self.controller.pipe
        res = session.dub_timeline(pipe, realtime=True) if pipe is not None else None
        if res is None:
            self.show_message("No dub", "This session produced no dubbed speech.", QMessageBox.Information)
            return False
        audio, sr = res
        try:
            write_wav(path, audio * (self.volume.value() / 100), sr)
        except UserError as e:
            self.show_message("Export failed", str(e), QMessageBox.Warning)
            return False
        self.set_status(f"Exported {os.path.basename(path)}")
        return True

    def export_dub_dialog(self) -> None:
        if self.controller.busy:
            self.set_status("Stop the session first: the dub is complete when it ends")
            return
        path, _ = QFileDialog.getSaveFileName(self, "Export dub", "relay-dub.wav", "WAV audio (*.wav)")
        if path:
            self.export_dub_to(path)

    def copy_transcript(self) -> None:
        lines = self.subtitles.selected_lines()
        if lines:
            text = "\n".join(f"{ln.source}\n{ln.target or ''}\n" for ln in lines)
        else:
            text = self.model.plain_text()
        QApplication.clipboard().setText(text)
        self.set_status("Copied the selected lines" if lines else "Copied the whole transcript")

    def clear_transcript(self) -> None:
        live = self.model.live_active
        self.model.clear()
        if live:
            self.model.live_active = False
            self.model.set_live_active(True)
        self.set_status("Transcript cleared")

    def _edit_current(self) -> None:
        idx = self.subtitles.list.currentIndex()
        if idx.isValid():
            self.subtitles.list.edit(idx)

    # -- view ----------------------------------------------------------------------------------
    def apply_theme(self, name: str) -> None:
        self.theme = themes.apply(QApplication.instance(), name)
        self.settings.set("theme", self.theme.name)
        self.theme_actions[self.theme.name].setChecked(True)
        self.cloud_switch.on_colour = QColor(self.theme.accent)
        self.gauges.set_theme(self.theme)
        self._configure_view()

    def set_layout(self, layout: str) -> None:
        self.settings.set("layout", layout)
        self._configure_view()

    def set_font_size(self, size: int) -> None:
        size = max(9, min(40, size))
        self.settings.set("font_size", size)
        self._configure_view()
        self.set_status(f"Subtitle text {size} pt")

    def set_overlay(self, on: bool) -> None:
        if on:
            last = next((ln for ln in reversed(self.model.data_.lines) if ln.target), None)
            if last is not None:
                self.overlay.set_text(last.target, last.source)
            self.overlay.show()
            self.overlay.raise_()
        else:
            self.overlay.hide()

    def _overlay_source(self, on: bool) -> None:
        self.settings.set("overlay_source", on)
        self.overlay.apply_settings()

    # -- cloud ---------------------------------------------------------------------------------
    def cloud_url(self) -> str:
        return self.settings.get("cloud_url")

    def cloud_settings(self) -> CloudDialog:
        url = self.cloud_url()
        dlg = CloudDialog(url, load_token(url) or self._session_token, self, ca=self.settings.get("cloud_ca"))
        dlg.accepted.connect(lambda: self._save_cloud(dlg.url.text().strip(), dlg.token.text(),
                                                      dlg.ca.text().strip()))
        dlg.open()
        self.cloud_dialog = dlg
        return dlg

    def _save_cloud(self, url: str, token: str, ca: str = "") -> None:
        self.settings.set("cloud_url", url)
        self.settings.set("cloud_ca", ca)
        problem = save_token(url, token) if url else None
        self._session_token = token if problem else ""
        self.set_status(problem or ("Cloud server saved" if url else "Cloud server removed"))
        if self.cloud_switch.isChecked():
            self._on_cloud_switch(True)

    def _on_cloud_switch(self, on: bool) -> None:
        if on:
            url = self.cloud_url()
            self.cloud.go_cloud(url, load_token(url) or self._session_token, self.settings.get("cloud_ca") or None)
        else:
            self.cloud.go_local()

    def _update_cloud_light(self, state: str, message: str) -> None:
        self.cloud_light.set_state(state)
        self.cloud_label.setText({"local": "Local", "connecting": "Connecting…", "cloud": "Cloud connected",
                                  "lost": "Cloud lost → local"}[state])
        self.cloud_label.setToolTip(message)
        self.cloud_light.setToolTip(message)
        if self.cloud_switch.isChecked() or state != "local":
            self.set_status(message)

    # -- messages and closing ------------------------------------------------------------------
    # -- background model loading ---------------------------------------------------------------
    def preload_models(self) -> None:
        if self.controller.busy or not self.pair.currentData():
            return
        if self.controller.preload(self.request().opts):
            self.set_status("Preparing the models…")

    def _on_preloaded(self, pair: str) -> None:
        if not self.controller.busy:
            self.set_status(f"Models ready ({pair}): press Start")

    def set_preload(self, on: bool) -> None:
        self._preload_on = bool(on)
        self.settings.set("preload_models", bool(on))
        if on:
            self.preload_models()

    # -- metrics export ------------------------------------------------------------------------
    def set_metrics(self, on: bool, port: int, quiet: bool = False) -> bool:
        """Serve (or stop serving) Prometheus metrics on 127.0.0.1:port; the running session, and
        every later one, is attached. False (with a message) when the port cannot be used."""
        from app.obs.metrics import MetricsExporter

        if self.exporter is not None:
            self.exporter.close()
            self.exporter = None
        if on:
            try:
                self.exporter = MetricsExporter("127.0.0.1", int(port))
            except UserError as e:
                self.metrics_label.hide()
                self.settings.set("metrics_enabled", False)
                msg = str(e).replace("--metrics-port: ", "")
                if quiet:
                    self.set_status(f"Metrics export is off: {msg}")
                else:
                    self.show_message("Metrics export", f"Cannot serve metrics: {msg}", QMessageBox.Warning)
                return False
            if self.controller.busy:
                self._attach_metrics()
            self.metrics_label.setText(f"metrics :{self.exporter.port}")
            self.metrics_label.setToolTip(f"Prometheus metrics on http://127.0.0.1:{self.exporter.port}/metrics")
            self.metrics_label.show()
        else:
            self.metrics_label.hide()
        self.settings.set("metrics_enabled", bool(on))
        self.settings.set("metrics_port", int(port))
        return True

    def _attach_metrics(self) -> None:
        if self.exporter is not None and self.controller.pipe is not None:
            self.exporter.attach(self.controller.pipe, getattr(self.controller.live, "capture", None))

    def metrics_settings(self) -> None:
        from app.ui.dialogs import MetricsDialog

        dlg = MetricsDialog(self.settings.get("metrics_enabled"), self.settings.get("metrics_port"), self)
        dlg.accepted.connect(lambda: self.set_metrics(dlg.enabled(), dlg.port()))
        dlg.open()
        self.metrics_dialog = dlg

    def set_status(self, text: str) -> None:
        self.status_label.setText(text)

    def show_message(self, title: str, text: str, icon=QMessageBox.Information) -> QMessageBox:
        box = QMessageBox(icon, title, text, QMessageBox.Ok, self)
        box.setTextInteractionFlags(Qt.TextSelectableByMouse)
        box.open()  # non-blocking: the event loop (and the pipeline's events) keep flowing
        self.message_box = box
        self.set_status(text.splitlines()[0])
        return box

    def show_summary(self) -> None:
        if self.last_summary is None:
            self.set_status("No session has ended yet")
            return
        corrected = sum(1 for s in self.model.segments() if s.get("corrected"))
        self.summary_dialog = SummaryDialog(self.last_summary, corrected, self)
        self.summary_dialog.open()

    def about(self) -> None:
        self.about_dialog = AboutDialog(self)  # version, models and libraries with their licences
        self.about_dialog.open()

    def model_packs(self) -> None:
        from app.ui.models_dialog import ModelsDialog  # installs missing packs with a progress bar

        self.models_dialog = ModelsDialog(self)
        self.models_dialog.installed_changed.connect(self._populate_pairs)
        self.models_dialog.open()

    def closeEvent(self, ev) -> None:
        if self.controller.busy:  # finish the session first: no lost segment, no dangling thread
            self._close_when_idle = True
            self.controller.stop()
            self.set_status("Finishing the session before closing…")
            ev.ignore()
            return
        self.save_settings()
        self.overlay.close()
        if self.exporter is not None:
            self.exporter.close()
            self.exporter = None
        ev.accept()


def probe_audio(path: str) -> str | None:
    """A quick look (no decoding) at whether ``path`` is a readable audio file; None when it is."""
    from pathlib import Path

    p = Path(path)
    name = os.fsdecode(p)
    if not p.is_file():
        return f"{name}: no such file" if not p.exists() else f"{name}: is a folder, not an audio file"
    if p.stat().st_size == 0:
        return f"{name}: the file is empty"
    try:
        import soundfile as sf

        sf.info(str(p))
        return None
    except Exception:
        pass
    try:
        import av

        with av.open(str(p), metadata_errors="ignore") as c:
            if not c.streams.audio:
                return f"{name}: has no audio stream (is it an audio file?)"
    except Exception as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        return f"{name}: not a readable audio file ({msg})"
    return None
