"""What the File and Edit menus do with the transcript: export it (SRT, WebVTT, text), export the
dub as WAV, copy, clear, correct a line.

A mixin of ``MainWindow``: it uses the window's ``model`` (``TranscriptModel``), ``subtitles``,
``controller``, ``volume``, ``set_status`` and ``show_message``."""

from __future__ import annotations

import os

from PySide6.QtWidgets import QApplication, QFileDialog, QMessageBox

from app.audio.files import write_wav
from app.core.errors import UserError
from app.session.outputs import dub_timeline
from app.session.subtitles import to_srt, to_vtt, write_text

EXPORT_FILTERS = {"srt": "SubRip subtitles (*.srt)", "vtt": "WebVTT subtitles (*.vtt)", "txt": "Plain text (*.txt)"}


class TranscriptActionsMixin:
    # -- export --------------------------------------------------------------------------------
    def export_text(self, fmt: str) -> str:
        segs = self.model.segments()
        return {"srt": to_srt, "vtt": to_vtt}[fmt](segs) if fmt in ("srt", "vtt") else self.model.plain_text()

    def export_to(self, path: str, fmt: str) -> bool:
        if not self.model.segments():
            text = ("No sentence has its final text yet: exports hold final sentences only."
                    if self.model.data_.lines else "The transcript is empty.")
            self.show_message("Nothing to export", text, QMessageBox.Information)
            return False
        try:
            write_text(path, self.export_text(fmt))
        except UserError as e:
            self.show_message("Export failed", str(e), QMessageBox.Warning)
            return False
        self.set_status(f"Exported {os.path.basename(path)}")
        return True

    def export_dialog(self, fmt: str) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export", f"relay-session.{fmt}", EXPORT_FILTERS[fmt])
        if path:
            self.export_to(path, fmt)

    def export_dub_to(self, path: str) -> bool:
        pipe = self.controller.pipe
        res = dub_timeline(pipe, realtime=True) if pipe is not None else None
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

    # -- edit ----------------------------------------------------------------------------------
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
