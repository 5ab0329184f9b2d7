"""The local/cloud switch's logic: which mode is in effect and why, in plain words.

Without a configured server, or with an invalid address, the window says so and stays local; a
server that cannot be reached is "cloud lost → local fallback". The connection check runs on a
worker thread."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal

from app.cloud.link import check_server
from app.ui.settings import validate_server_url

NO_SERVER = "no cloud server configured: running locally (set one in Session → Cloud server…)"


class CloudLink(QObject):
    changed = Signal(str, str)  # state (local | connecting | cloud | lost), message
    _result = Signal(str, str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.state = "local"
        self.message = "local: everything runs on this computer"
        self._result.connect(self._set)

    def _set(self, state: str, message: str) -> None:
        self.state, self.message = state, message
        self.changed.emit(state, message)

    @property
    def in_cloud(self) -> bool:
        return self.state == "cloud"

    def go_local(self) -> None:
        self._set("local", "local: everything runs on this computer")

    def go_cloud(self, url: str, token: str, ca: str | None = None) -> None:
        if not url:
            self._set("local", NO_SERVER)
            return
        problem = validate_server_url(url)
        if problem:
            self._set("local", f"cloud server address is invalid ({problem}): running locally")
            return
        self._set("connecting", f"connecting to {url}…")

        def run():
            try:
                check_server(url, token, ca)
            except Exception as e:
                msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                self._result.emit("lost", f"cloud lost ({msg}): local fallback")
            else:
                self._result.emit("cloud", f"cloud connected: {url}")

        threading.Thread(target=run, name="relay-cloud-check", daemon=True).start()
