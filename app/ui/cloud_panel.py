"""The window's local/cloud switch, its light and Session → Cloud server….

A mixin of ``MainWindow``: it uses the window's ``settings``, ``cloud`` (a ``CloudLink``),
``cloud_switch``, ``cloud_light``, ``cloud_label`` and ``set_status``. A token the OS keyring
could not take is kept in ``_session_token`` for this run only."""

from __future__ import annotations

from app.ui.dialogs import CloudDialog
from app.ui.settings import load_token, save_token

LIGHT_LABELS = {"local": "Local", "connecting": "Connecting…", "cloud": "Cloud connected",
                "lost": "Cloud lost → local"}

# the running session's link (the cloud client's status) → the light's state and the message
SESSION_LINK = {"cloud": ("cloud", "cloud connected: {url}"),
                "cloud-lost": ("lost", "cloud lost → local fallback: the local models carry on"),
                "local": ("lost", "cloud unreachable → running on the local models"),
                "cloud-available": ("lost", "cloud is back: switching at the next segment boundary")}


class CloudPanelMixin:
    _session_token = ""

    def cloud_url(self) -> str:
        return self.settings.get("cloud_url")

    def _cloud_token(self, url: str) -> str:
        return load_token(url) or self._session_token

    def cloud_settings(self) -> CloudDialog:
        url = self.cloud_url()
        dlg = CloudDialog(url, self._cloud_token(url), self, ca=self.settings.get("cloud_ca"))
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
            self.cloud.go_cloud(url, self._cloud_token(url), self.settings.get("cloud_ca") or None)
        else:
            self.cloud.go_local()

    def _update_cloud_light(self, state: str, message: str) -> None:
        self.cloud_light.set_state(state)
        self.cloud_label.setText(LIGHT_LABELS[state])
        self.cloud_label.setToolTip(message)
        self.cloud_light.setToolTip(message)
        if self.cloud_switch.isChecked() or state != "local":
            self.set_status(message)

    def _cloud_request(self) -> tuple | None:
        """(url, token, ca) when the switch is on and a server is configured; else local."""
        url = self.cloud_url()
        if not (self.cloud_switch.isChecked() and url):
            return None
        return url, self._cloud_token(url), self.settings.get("cloud_ca") or None

    def _on_session_cloud(self, status: str) -> None:
        """The running session's link, as the cloud client reports it."""
        if status in SESSION_LINK:
            state, msg = SESSION_LINK[status]
            self.cloud._set(state, msg.format(url=self.cloud_url()))
