"""Help → About: the app's version, and every model and library it ships with, with its licence.

The credits are plain data (``model_credits``, ``library_credits``) so a test can hold the dialog to
them; versions come from the installed distributions (the desktop bundle carries their metadata)."""

from __future__ import annotations

import html
import sys
from dataclasses import dataclass
from importlib import metadata

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QTextBrowser, QVBoxLayout

from app import __version__
from app.models import store
from app.models.catalog import PACKS

APP_LICENCE = "GPL-3.0-or-later"


@dataclass(frozen=True)
class Credit:
    name: str
    what: str
    licence: str
    version: str = ""
    note: str = ""


# (distribution, what it does in Relay, licence). Licences as published by each project; the
# wheels' metadata often leaves the field empty, so it is stated here.
LIBRARIES: tuple[tuple[str, str, str], ...] = (
    ("ctranslate2", "Whisper and OPUS-MT inference", "MIT"),
    ("faster-whisper", "Whisper tokenizer and audio helpers; ships the Silero VAD model", "MIT"),
    ("onnxruntime", "Piper voices and Silero VAD inference", "MIT"),
    ("piper-tts", "speech synthesis, with the espeak-ng phonemiser and its data", "GPL-3.0-or-later"),
    ("sentencepiece", "OPUS-MT tokenizer", "Apache-2.0"),
    ("tokenizers", "Whisper tokenizer", "Apache-2.0"),
    ("jieba", "Chinese word boundaries", "MIT"),
    ("zhconv", "Traditional/Simplified Chinese conversion", "GPL-2.0-or-later"),
    ("numba", "audio front-end kernels (CPU and CUDA)", "BSD-2-Clause"),
    ("llvmlite", "Numba's compiler, with LLVM inside", "BSD-2-Clause AND Apache-2.0 WITH LLVM-exception"),
    ("numpy", "arrays", "BSD-3-Clause"),
    ("soxr", "resampling (libsoxr inside)", "LGPL-2.1-or-later"),
    ("soundfile", "reading and writing audio files (libsndfile inside: LGPL-2.1-or-later)", "BSD-3-Clause"),
    ("av", "decoding compressed audio (FFmpeg libraries inside: GPL-2.0-or-later build)", "BSD-3-Clause"),
    ("sounddevice", "audio devices (PortAudio inside: MIT)", "MIT"),
    ("PySide6-Essentials", "the window (Qt 6 for Python)", "LGPL-3.0-only"),
    ("pyqtgraph", "latency charts", "MIT"),
    ("websockets", "cloud mode", "BSD-3-Clause"),
    ("keyring", "keeps the cloud token in the system keyring", "MIT"),
    ("psutil", "memory and CPU readings", "BSD-3-Clause"),
    ("prometheus-client", "server metrics", "Apache-2.0"),
    ("huggingface-hub", "used by faster-whisper (never downloads in Relay)", "Apache-2.0"),
)


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def library_credits() -> list[Credit]:
    out = [Credit("Python", "the interpreter", "PSF-2.0", ".".join(map(str, sys.version_info[:3])))]
    out += [Credit(dist, what, lic, _version(dist)) for dist, what, lic in LIBRARIES]
    return out


def model_credits() -> list[Credit]:
    """The catalogue's packs (installed or not), Silero VAD, and any model the user imported."""
    out = [Credit(p.title, p.id, p.licence, note=p.attribution) for p in PACKS.values()]
    out.append(Credit("Silero VAD v6", "voice activity detection (inside faster-whisper)", "MIT",
                      note="by the Silero team"))
    try:
        for pid, inst in store.installed().items():
            if pid not in PACKS:
                out.append(Credit(pid, f"imported {inst.role} model ({'-'.join(inst.languages)})", inst.licence))
    except Exception:  # an unreadable model folder must not stop the dialog opening
        pass
    return out


def about_html(models_folder: str = "") -> str:
    def table(rows: list[Credit], version_col: bool) -> str:
        head = "<tr><th align=left>Name</th><th align=left>Use</th>" + \
               ("<th align=left>Version</th>" if version_col else "") + "<th align=left>Licence</th></tr>"
        body = ""
        for c in rows:
            note = f"<br><small>{html.escape(c.note)}</small>" if c.note else ""
            body += (f"<tr><td>{html.escape(c.name)}</td><td>{html.escape(c.what)}{note}</td>"
                     + (f"<td>{html.escape(c.version)}</td>" if version_col else "")
                     + f"<td>{html.escape(c.licence)}</td></tr>")
        return f"<table cellspacing=0 cellpadding=3>{head}{body}</table>"

    frozen = " (desktop bundle)" if getattr(sys, "frozen", False) else ""
    where = f"<p>Model folder: {html.escape(models_folder)}</p>" if models_folder else ""
    return (
        f"<h2>Relay {html.escape(__version__)}{frozen}</h2>"
        "<p>Live interpretation: subtitles and a dubbed translation while the speaker talks. Everything "
        "runs on this computer unless cloud mode is on.</p>"
        f"<p>Relay is free software under the <b>{APP_LICENCE}</b>. It links Piper (GPL-3.0-or-later), "
        "so the app as a whole is distributed under the GPL; the source and the licence text come with it.</p>"
        "<p><b>Translation</b> (Chinese→English) uses OPUS-MT by Jörg Tiedemann and Santhosh Thottingal "
        "(\"OPUS-MT — Building open translation services for the World\", EAMT 2020), CC-BY 4.0, packaged "
        "by Argos Translate. <b>Recognition</b> uses OpenAI's Whisper (MIT) converted for CTranslate2. "
        "<b>Speech</b> uses Piper (GPL-3.0-or-later) with espeak-ng.</p>"
        f"{where}<h3>Models</h3>{table(model_credits(), False)}"
        f"<h3>Libraries</h3>{table(library_credits(), True)}"
    )


class AboutDialog(QDialog):
    def __init__(self, parent=None, models_folder: str | None = None):
        super().__init__(parent)
        self.setWindowTitle("About Relay")
        self.setObjectName("aboutDialog")
        if models_folder is None:
            models_folder = str(store.models_dir())
        title = QLabel(f"<b>Relay {__version__}</b> — {APP_LICENCE}")
        self.text = QTextBrowser()
        self.text.setOpenExternalLinks(True)
        self.text.setHtml(about_html(models_folder))
        buttons = QDialogButtonBox(QDialogButtonBox.Close)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(title)
        lay.addWidget(self.text)
        lay.addWidget(buttons)
        self.resize(720, 640)
