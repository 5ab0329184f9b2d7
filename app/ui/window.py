"""The main window: session controls, live subtitles, latency gauges, presenter overlay.

``MainWindow`` assembles the parts and runs the session's life cycle; the control rows
(``controls``), the menus (``menus``), the transcript's export and edit actions
(``transcript_actions``), the cloud switch (``cloud_panel``), the Prometheus export
(``metrics_export``) and the Latency dock (``latency_dock``) live in their own modules."""

from __future__ import annotations

import threading

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication, QMainWindow, QMessageBox

from app.session.options import SessionOptions
from app.ui import theme as themes
from app.ui.about import AboutDialog
from app.ui.bridge import EventBridge
from app.ui.choices import language_name, list_audio_devices
from app.ui.cloud import CloudLink
from app.ui.cloud_panel import CloudPanelMixin
from app.ui.controller import FILE_SOURCE, SessionController, StartRequest
from app.ui.controls import ControlsMixin
from app.ui.dialogs import SummaryDialog
from app.ui.latency_dock import LatencyDock
from app.ui.menus import build_menus
from app.ui.metrics_export import MetricsExportMixin
from app.ui.models_dialog import ModelsDialog
from app.ui.overlay import SubtitleOverlay
from app.ui.session_choices import SessionChoicesMixin
from app.ui.settings import Settings
from app.ui.subtitles_view import SubtitlesView
from app.ui.transcript import TranscriptModel
from app.ui.transcript_actions import TranscriptActionsMixin


class MainWindow(ControlsMixin, TranscriptActionsMixin, CloudPanelMixin, MetricsExportMixin, SessionChoicesMixin,
                 QMainWindow):
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
        self.theme = themes.get(self.settings.get("theme"))

        self.bridge = EventBridge(self)
        self.controller = SessionController(self.bridge, self)
        self.model = TranscriptModel(self)
        self.cloud = CloudLink(self)
        self.overlay = SubtitleOverlay(self.settings)
        self.overlay.hidden_by_user.connect(lambda: self.act_overlay.setChecked(False))

        self._build_controls()
        self.subtitles = SubtitlesView(self.model)
        self.setCentralWidget(self._central(self.subtitles))
        self.gauges_dock = LatencyDock(self.controller.snapshot, self)
        self.gauges = self.gauges_dock.gauges
        self.display_timer = self.gauges_dock.timer
        self.addDockWidget(Qt.RightDockWidgetArea, self.gauges_dock)
        self._build_status_bar()
        build_menus(self)
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
        self._init_metrics_export()

        self.devices_ready.connect(self._on_devices)
        threading.Thread(target=lambda: self.devices_ready.emit(list_devices()), name="relay-devices",
                         daemon=True).start()

    def _connect(self) -> None:
        b = self.bridge
        b.segment.connect(self._on_segment)
        b.translation.connect(self._on_translation)
        b.final.connect(self._on_final)
        b.tentative.connect(self._on_tentative)
        b.preview.connect(self._on_preview)
        b.policy.connect(lambda ev: self.gauges.set_level(ev.level, ev.reason))
        c = self.controller
        c.status.connect(self.set_status)
        c.state_changed.connect(self._on_state)
        c.stopped.connect(self._on_stopped)
        c.started.connect(self._attach_metrics)
        c.started.connect(self._on_started)
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
        self.profanity_actions[self.profanity()].setChecked(True)
        self.refresh_final_mt()
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

    # -- view ----------------------------------------------------------------------------------
    def _configure_view(self, *_a) -> None:
        pair = self.pair.currentData() or "zh-en"
        src, _, tgt = pair.partition("-")
        self.subtitles.configure(self.settings.get("layout"), self.settings.get("font_size"), self.theme,
                                 language_name(src), language_name(tgt))

    # -- session -------------------------------------------------------------------------------
    def request(self) -> StartRequest:
        opts = SessionOptions(pair=self.pair.currentData() or "zh-en", no_tts=not self.dub.isChecked(),
                              profanity=self.profanity(), final_mt=self.final_mt())
        return StartRequest(source=self.source.currentData() or FILE_SOURCE, opts=opts,
                            file_path=self.file_edit.text().strip(), dub=self.dub.isChecked(),
                            dub_device=self.output.currentData() or None,
                            passthrough=self.passthrough.isChecked() and self.passthrough.isEnabled(),
                            duck=self.duck.value() / 100, volume=self.volume.value() / 100,
                            cloud=self._cloud_request())

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
        self.model.final_mode = False  # until the session shows it makes finals
        self.controller.start(req)

    def _on_started(self) -> None:
        record = getattr(self.controller.pipe, "record", None)
        if getattr(record, "final_mode", False):
            self.model.final_mode = True  # only finals are kept: pieces show as first pass

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
            self.gauges_dock.timer.start()
        elif state == "idle":
            self.gauges_dock.timer.stop()

    def _on_stopped(self, summary) -> None:
        if summary is not None:
            self.model.reconcile(summary.get("segments") or [])
        self.model.set_live_active(False)
        self.gauges_dock.tick(final=True)
        self.gauges_dock.timer.stop()
        if summary is not None:
            self.last_summary = summary
            n = len(summary.get("segments") or [])
            warns = summary.get("warnings") or []
            self.set_status(f"Session ended: {n} segments, {summary.get('audio_s', 0):.0f} s of audio"
                            + (f" — {summary['error']}" if summary.get("error") else "")
                            + (f" — ⚠ {warns[0]}" if warns else ""))
            if not self._close_when_idle:
                self.show_summary()
        if self._close_when_idle:
            self.close()

    def _on_models_missing(self, msg: str) -> None:
        self.show_message("Model pack missing", msg[:1].upper() + msg[1:] + ".\n\nRun the command in a terminal, "
                          "then start again.", QMessageBox.Warning)

    def _on_segment(self, ev) -> None:
        self.model.add_segment(ev.seq, ev.text, ev.src_start, ev.src_end, ev.emitted_at, ev.sentence_end, ev.lang)

    def _on_translation(self, ev) -> None:
        self.model.set_translation(ev.seq, ev.target, ev.emitted_at)
        self._refresh_overlay()

    def _on_final(self, ev) -> None:
        self.model.add_final(ev.id, ev.source, ev.target, ev.src_start, ev.src_end, ev.covers,
                             [(w.text, w.start, w.end) for w in ev.words], ev.failed, ev.first_target or None,
                             ev.final_at)
        self._refresh_overlay()

    def _on_tentative(self, ev) -> None:
        self.model.set_tentative(ev.committed_tail, ev.text)

    def _on_preview(self, ev) -> None:
        self.model.set_preview(ev.target)
        self._refresh_overlay()

    def _refresh_overlay(self) -> None:
        """The overlay shows the last two lines of the running target text, as live captions do."""
        if self.overlay.isVisible():
            self.overlay.set_running(*self.model.running_target(), source=self.model.current_source())

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
            self.overlay.show()
            self.overlay.raise_()
            self._refresh_overlay()
        else:
            self.overlay.hide()

    def _overlay_source(self, on: bool) -> None:
        self.settings.set("overlay_source", on)
        self.overlay.apply_settings()

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

    # -- messages and closing ------------------------------------------------------------------
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
        self.models_dialog = ModelsDialog(self)  # installs missing packs with a progress bar
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
        self._close_exporter()
        ev.accept()

