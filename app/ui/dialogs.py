"""Cloud settings, metrics export and session summary dialogs (About: app/ui/about.py)."""

from __future__ import annotations

import os

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGridLayout,
    QLabel,
    QLineEdit,
    QSpinBox,
    QVBoxLayout,
)

from app.ui.settings import keyring_available, validate_server_url


def _save_cancel_layout(dialog: QDialog, form: QFormLayout, note: QLabel) -> None:
    """The settings dialogs' shape: the form, an explanatory note, then Save / Cancel."""
    buttons = QDialogButtonBox(QDialogButtonBox.Save | QDialogButtonBox.Cancel)
    buttons.accepted.connect(dialog.accept)
    buttons.rejected.connect(dialog.reject)
    lay = QVBoxLayout(dialog)
    lay.addLayout(form)
    lay.addWidget(note)
    lay.addWidget(buttons)


class CloudDialog(QDialog):
    """Server address and access token; an invalid address is an inline error, not a popup."""

    def __init__(self, url: str, token: str, parent=None, ca: str = ""):
        super().__init__(parent)
        self.setWindowTitle("Cloud server")
        self.setMinimumWidth(480)
        self.url = QLineEdit(url)
        self.url.setPlaceholderText("wss://relay.example.org:8765")
        self.url.setAccessibleName("Server address")
        self.token = QLineEdit(token)
        self.token.setEchoMode(QLineEdit.Password)
        self.token.setAccessibleName("Access token")
        self.ca = QLineEdit(ca)
        self.ca.setPlaceholderText("optional: the server's certificate (PEM), for a self-signed server")
        self.ca.setAccessibleName("Server certificate")
        self.error = QLabel("")
        self.error.setObjectName("inlineError")
        self.error.setWordWrap(True)
        self.error.hide()
        where = ("stored in the OS keyring" if keyring_available()
                 else "no OS keyring found: kept for this run only, never written to the settings file")
        note = QLabel(f"The token is {where}.")
        note.setObjectName("sectionTitle")
        note.setWordWrap(True)
        form = QFormLayout()
        url_label = QLabel("Server &address")
        url_label.setBuddy(self.url)
        tok_label = QLabel("Access &token")
        tok_label.setBuddy(self.token)
        form.addRow(url_label, self.url)
        form.addRow("", self.error)
        form.addRow(tok_label, self.token)
        ca_label = QLabel("&Certificate")
        ca_label.setBuddy(self.ca)
        form.addRow(ca_label, self.ca)
        _save_cancel_layout(self, form, note)
        self.url.textEdited.connect(lambda _t: self.error.hide())

    def accept(self) -> None:
        text = self.url.text().strip()
        problem = validate_server_url(text) if text else None  # empty: cloud off, allowed
        ca = self.ca.text().strip()
        if not problem and ca and not os.path.isfile(ca):
            problem = f"{ca}: no such certificate file"
        if problem:
            self.error.setText(problem)
            self.error.show()
            self.url.setFocus()
            self.url.selectAll()
            return
        super().accept()


class MetricsDialog(QDialog):
    """Prometheus metrics export: on/off and the port; always on loopback (127.0.0.1)."""

    def __init__(self, enabled: bool, port: int, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Metrics export")
        self.setMinimumWidth(420)
        self.enable = QCheckBox("&Serve Prometheus metrics while Relay runs")
        self.enable.setChecked(bool(enabled))
        self.port_box = QSpinBox()
        self.port_box.setRange(1024, 65535)
        self.port_box.setValue(int(port) if 1024 <= int(port) <= 65535 else 9464)
        self.port_box.setAccessibleName("Metrics port")
        self.url = QLabel()
        self.url.setTextInteractionFlags(Qt.TextSelectableByMouse)
        note = QLabel("Latency histograms (first token, MT queue wait, first audio, end to end), queue depths, "
                      "dropped audio, degradation level and cloud link state; names in docs/OBSERVABILITY.md. "
                      "Only this computer can read them (loopback). No speech or text is ever exported.")
        note.setObjectName("sectionTitle")
        note.setWordWrap(True)
        form = QFormLayout()
        port_label = QLabel("&Port")
        port_label.setBuddy(self.port_box)
        form.addRow(self.enable)
        form.addRow(port_label, self.port_box)
        form.addRow("Address", self.url)
        _save_cancel_layout(self, form, note)
        self.enable.toggled.connect(self._sync)
        self.port_box.valueChanged.connect(self._sync)
        self._sync()

    def _sync(self, *_a) -> None:
        self.port_box.setEnabled(self.enable.isChecked())
        self.url.setText(f"http://127.0.0.1:{self.port_box.value()}/metrics" if self.enable.isChecked() else "off")

    def enabled(self) -> bool:
        return self.enable.isChecked()

    def port(self) -> int:
        return self.port_box.value()


class SummaryDialog(QDialog):
    ROWS = (("asr_first_token", "ASR first token"), ("mt_queue_wait", "MT queue wait"),
            ("tts_first_audio", "TTS first audio"), ("e2e_first_display", "First display, end to end"),
            ("e2e_final", "Final text, end to end"),
            ("e2e_dub", "Dub, end to end"))

    def __init__(self, summary: dict, corrected: int, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Session summary")
        self.summary = summary
        segs = summary.get("segments") or []
        head = QLabel(
            f"<b>{summary.get('pair', '')}</b> · {summary.get('audio_s', 0):.1f} s of audio in "
            f"{summary.get('wall_s', 0):.1f} s · {len(segs)} segments"
            + (f" ({corrected} corrected)" if corrected else "")
            + (f" · real-time factor {summary['rtf']:.2f}" if summary.get("rtf") is not None else ""))
        head.setWordWrap(True)
        grid = QGridLayout()
        for c, h in enumerate(("", "p50", "p95", "p99", "n")):
            lab = QLabel(f"<b>{h}</b>")
            grid.addWidget(lab, 0, c, Qt.AlignRight if c else Qt.AlignLeft)
        lat = summary.get("latency_ms") or {}
        for r, (key, name) in enumerate(self.ROWS, 1):
            d = lat.get(key) or {}
            grid.addWidget(QLabel(name), r, 0)
            for c, k in enumerate(("p50", "p95", "p99"), 1):
                v = d.get(k)
                grid.addWidget(QLabel("–" if v is None else f"{v:.0f} ms"), r, c, Qt.AlignRight)
            grid.addWidget(QLabel(str(d.get("n", 0))), r, 4, Qt.AlignRight)
        lay = QVBoxLayout(self)
        lay.addWidget(head)
        if summary.get("error"):
            err = QLabel(f"The pipeline stopped with an error: {summary['error']}. What was processed is kept.")
            err.setObjectName("inlineError")
            err.setWordWrap(True)
            lay.addWidget(err)
        lay.addLayout(grid)
        if summary.get("coverage") is not None:
            cov = QLabel(f"Coverage: {summary['coverage']:.0%} of {summary.get('voiced_s', 0):.0f} s of speech "
                         f"produced text ({summary.get('lost_speech_s', 0):.1f} s gave none)")
            cov.setObjectName("coverage")
            lay.addWidget(cov)
        for w in summary.get("warnings") or ():
            warn = QLabel(f"⚠ {w[0].upper() + w[1:]}.")
            warn.setObjectName("inlineError")
            warn.setWordWrap(True)
            lay.addWidget(warn)
        buttons = QDialogButtonBox(QDialogButtonBox.Close)
        buttons.rejected.connect(self.reject)
        buttons.accepted.connect(self.accept)
        lay.addWidget(buttons)
