"""Settings that persist between runs (QSettings, INI format) and the cloud access token, which
lives in the OS keyring and never in the settings file.

``RELAY_SETTINGS_DIR`` puts the settings file in that folder (tests use a temporary one);
otherwise Qt's per-user location applies (``$XDG_CONFIG_HOME/Relay/Relay.ini`` on Linux)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from PySide6.QtCore import QByteArray, QSettings

ORG = "Relay"
APP = "Relay"
KEYRING_SERVICE = "relay-cloud"

DEFAULTS: dict[str, object] = {
    "source": "file",
    "file_path": "",
    "pair": "zh-en",
    "dub_enabled": True,
    "dub_device": "",
    "volume": 80,
    "passthrough": False,
    "duck": 25,
    "layout": "side",  # side | stacked
    "theme": "dark",  # dark | light | contrast
    "font_size": 15,
    "overlay_source": False,
    "overlay_font_size": 26,
    "cloud_url": "",
    "cloud_ca": "",  # a server certificate to trust (self-signed servers); a path, not a secret
    "use_cloud": False,
    "preload_models": True,  # load the pair's models in the background at launch, so Start is quick
    "metrics_enabled": False,  # Prometheus exporter (loopback only), as `relay run --metrics-port`
    "metrics_port": 9464,
    "profanity": "masked",  # masked | removed | raw, as `relay run --profanity` (app/core/profanity.py)
    "final_mt": "auto",  # auto | opus | qwen-1.5b | qwen-0.5b, as `relay run --final-mt`
}


def make_qsettings() -> QSettings:
    folder = os.environ.get("RELAY_SETTINGS_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        return QSettings(str(Path(folder) / "relay.ini"), QSettings.IniFormat)
    return QSettings(QSettings.IniFormat, QSettings.UserScope, ORG, APP)


class Settings:
    """Typed access to the persisted values; unknown or corrupt values fall back to defaults."""

    def __init__(self, qs: QSettings | None = None):
        self.qs = qs or make_qsettings()

    @property
    def path(self) -> str:
        return self.qs.fileName()

    def get(self, key: str):
        default = DEFAULTS[key]
        value = self.qs.value(key, default)
        if isinstance(default, bool):
            return value in (True, "true", "1", 1) if not isinstance(value, bool) else value
        if isinstance(default, int):
            try:
                return int(value)
            except (TypeError, ValueError):
                return default
        return str(value) if value is not None else default

    def set(self, key: str, value) -> None:
        if key not in DEFAULTS:
            raise KeyError(key)
        self.qs.setValue(key, value)

    def get_bytes(self, key: str) -> QByteArray | None:
        v = self.qs.value(key)
        return v if isinstance(v, QByteArray) and not v.isEmpty() else None

    def set_bytes(self, key: str, value: QByteArray) -> None:
        self.qs.setValue(key, value)

    def reset(self) -> None:
        self.qs.clear()
        self.qs.sync()

    def sync(self) -> None:
        self.qs.sync()


# -- the cloud access token -------------------------------------------------------------------

def _keyring():
    """The keyring module when a real backend is available, else None."""
    try:
        import keyring  # deferred: ~80 ms and backend discovery, needed only once a cloud server is set
        from keyring.backends import fail  # deferred with keyring (the line above)
    except ImportError:
        return None
    try:
        kr = keyring.get_keyring()
    except Exception:  # a misconfigured backend must not break the window
        return None
    if isinstance(kr, fail.Keyring):
        return None
    return keyring


def keyring_available() -> bool:
    return _keyring() is not None


def save_token(url: str, token: str) -> str | None:
    """Store the token for this server; returns a message when it could not be stored."""
    kr = _keyring()
    if kr is None:
        return "no OS keyring available: the token is kept for this run only"
    try:
        if token:
            kr.set_password(KEYRING_SERVICE, url, token)
        else:
            try:
                kr.delete_password(KEYRING_SERVICE, url)
            except Exception:
                pass
    except Exception as e:
        return f"the OS keyring refused the token ({type(e).__name__}): kept for this run only"
    return None


def load_token(url: str) -> str:
    kr = _keyring()
    if kr is None or not url:
        return ""
    try:
        return kr.get_password(KEYRING_SERVICE, url) or ""
    except Exception:
        return ""


def validate_server_url(text: str) -> str | None:
    """None when ``text`` is a usable server address, else what is wrong (one line)."""
    text = text.strip()
    if not text:
        return "enter the server address, e.g. wss://relay.example.org:8765"
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return "the port must be a number between 1 and 65535"
    if parts.scheme not in ("wss", "ws"):
        return "the address must start with wss:// (or ws:// for a server on this computer)"
    if not parts.hostname:
        return "the address has no host name"
    if parts.scheme == "ws" and parts.hostname not in ("localhost", "127.0.0.1", "::1"):
        return "unencrypted ws:// is only allowed for this computer; use wss://"
    if port is not None and not 0 < port < 65536:
        return "the port must be a number between 1 and 65535"
    if any(c.isspace() for c in text):
        return "the address must not contain spaces"
    return None
