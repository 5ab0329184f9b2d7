"""Session → Metrics export…: Prometheus metrics on loopback, for the window.

A mixin of ``MainWindow``: it uses the window's ``settings``, ``controller``, ``set_status`` and
``show_message``, and adds ``exporter`` and the status bar's ``metrics_label``."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QMessageBox

from app.core.errors import UserError
from app.obs.metrics import MetricsExporter
from app.ui.dialogs import MetricsDialog


class MetricsExportMixin:
    def _init_metrics_export(self) -> None:
        self.exporter: MetricsExporter | None = None
        self.metrics_label = QLabel("")
        self.metrics_label.setObjectName("metricsLabel")
        self.statusBar().addPermanentWidget(self.metrics_label)
        self.metrics_label.hide()
        if self.settings.get("metrics_enabled"):
            self.set_metrics(True, self.settings.get("metrics_port"), quiet=True)

    def set_metrics(self, on: bool, port: int, quiet: bool = False) -> bool:
        """Serve (or stop serving) Prometheus metrics on 127.0.0.1:port; the running session, and
        every later one, is attached. False (with a message) when the port cannot be used."""
        self._close_exporter()
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

    def _close_exporter(self) -> None:
        if self.exporter is not None:
            self.exporter.close()
            self.exporter = None

    def metrics_settings(self) -> None:
        dlg = MetricsDialog(self.settings.get("metrics_enabled"), self.settings.get("metrics_port"), self)
        dlg.accepted.connect(lambda: self.set_metrics(dlg.enabled(), dlg.port()))
        dlg.open()
        self.metrics_dialog = dlg
