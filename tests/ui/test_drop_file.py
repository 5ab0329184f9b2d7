"""A file dropped on the window (from a file manager) becomes the source, checked as a chosen one
is; other drops are refused."""

from pathlib import Path

from PySide6.QtCore import QMimeData, QPoint, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication

from app.ui.controller import FILE_SOURCE

DATA = Path(__file__).resolve().parents[1] / "data"


def _mime(*paths) -> QMimeData:
    m = QMimeData()
    m.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    return m


def _drop(w, mime) -> tuple[bool, bool]:
    """(whether the drag was accepted on entering, whether the drop was)"""
    pos = QPoint(w.width() // 2, w.height() // 2)
    enter = QDragEnterEvent(pos, Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    QApplication.sendEvent(w, enter)
    drop = QDropEvent(pos.toPointF(), Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    QApplication.sendEvent(w, drop)
    return enter.isAccepted(), drop.isAccepted()


def test_a_dropped_audio_file_becomes_the_source(window):
    w = window
    w.source.setCurrentIndex(0)
    assert w.acceptDrops()
    entered, dropped = _drop(w, _mime(DATA / "zh_03.wav", DATA / "jfk.wav"))
    assert entered and dropped
    assert w.file_edit.text() == str(DATA / "zh_03.wav")  # the first of several
    assert w.source.currentData() == FILE_SOURCE


def test_a_dropped_file_that_is_not_audio_is_refused_with_a_message(window, tmp_path):
    w = window
    w.set_file(str(DATA / "jfk.wav"))
    notes = tmp_path / "notes.txt"
    notes.write_text("minutes of the meeting\n" * 50)
    _drop(w, _mime(notes))
    assert w.file_edit.text() == str(DATA / "jfk.wav")  # unchanged
    assert w.message_box is not None and "notes.txt" in w.message_box.text()
    w.message_box.close()


def test_a_drag_without_a_local_file_is_not_taken(window):
    w = window
    text = QMimeData()
    text.setText("hello")
    web = QMimeData()
    web.setUrls([QUrl("https://example.org/talk.mp3")])
    for m in (text, web):
        entered, dropped = _drop(w, m)
        assert not entered and not dropped
    assert w.file_edit.text() == ""
