"""The window's control rows (source, file, language pair, dub, original, cloud switch, Start)
and status bar, what they offer, and how they enable one another.

A mixin of ``MainWindow``: it uses the window's ``settings``, ``controller``, ``set_status`` and
``show_message``, and adds the widgets the rest of the window reads (``source``, ``pair``, ``dub``…)."""

from __future__ import annotations

import os
from pathlib import Path

import soundfile as sf
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from app.session.options import DEMO_CLIP
from app.ui.choices import DeviceChoices, available_pairs
from app.ui.controller import FILE_SOURCE
from app.ui.widgets import StatusLight, ToggleSwitch

AUDIO_FILTER = ("Audio files (*.wav *.flac *.mp3 *.ogg *.opus *.m4a *.aac *.webm *.mp4 *.mka *.mkv *.mov);;"
                "All files (*)")


class ControlsMixin:
    # -- construction -------------------------------------------------------------------------
    def _build_controls(self) -> None:
        self.source = QComboBox()
        self.source.setAccessibleName("Audio source")
        self.source.addItem("Audio file", FILE_SOURCE)
        self.file_edit = QLineEdit()
        self.file_edit.setPlaceholderText("Choose or drop an audio file…")
        self.setAcceptDrops(True)  # a file dropped anywhere on the window becomes the source
        self.file_edit.setAcceptDrops(False)  # (the line edit would take it as text)
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

    def _central(self, subtitles: QWidget) -> QWidget:
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
        lay.addWidget(subtitles, 1)
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
        start = os.path.dirname(self.file_edit.text()) or str(DEMO_CLIP.parent)
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

    # -- a file dropped on the window (from a file manager, a mail, a chat) -------------------------
    def _dropped_file(self, mime) -> str | None:
        """The local file a drag carries (the first, when several), or None."""
        if not mime.hasUrls():
            return None
        for url in mime.urls():
            if url.isLocalFile() and url.toLocalFile():
                return url.toLocalFile()
        return None

    def dragEnterEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        if self._dropped_file(event.mimeData()) and not self.controller.busy:
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event) -> None:  # noqa: N802
        self.dragEnterEvent(event)

    def dropEvent(self, event) -> None:  # noqa: N802
        """The dropped file becomes the source, checked as a chosen one is; during a session it
        is refused (the session's source cannot change under it)."""
        path = self._dropped_file(event.mimeData())
        if not path:
            event.ignore()
            return
        if self.controller.busy:
            self.set_status("Stop the session to interpret another file")
            event.ignore()
            return
        event.acceptProposedAction()
        self.set_file(path)

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


def probe_audio(path: str) -> str | None:
    """A quick look (no decoding) at whether ``path`` is a readable audio file; None when it is."""
    p = Path(path)
    name = os.fsdecode(p)
    if not p.is_file():
        return f"{name}: no such file" if not p.exists() else f"{name}: is a folder, not an audio file"
    if p.stat().st_size == 0:
        return f"{name}: the file is empty"
    try:
        sf.info(str(p))
        return None
    except Exception:
        pass
    try:
        import av  # deferred: PyAV loads FFmpeg's libraries (~60 ms), needed only for what soundfile cannot read

        with av.open(str(p), metadata_errors="ignore") as c:
            if not c.streams.audio:
                return f"{name}: has no audio stream (is it an audio file?)"
    except Exception as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        return f"{name}: not a readable audio file ({msg})"
    return None
