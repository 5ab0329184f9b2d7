"""`relay` with no arguments: the desktop window."""

from __future__ import annotations

import logging
import os
import sys

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from app.session.options import DEMO_CLIP
from app.ui.qtdeps import check_qt_runtime
from app.ui.settings import APP, ORG
from app.ui.window import MainWindow

os.environ.setdefault("HF_HUB_OFFLINE", "1")

APP_NAME = "Relay"
GIL_SWITCH_S = 0.002


def make_app(argv: list[str]):
    # the GUI thread competes for the GIL with the pipeline's Python code: a shorter switch
    # interval (default 5 ms) bounds how long a repaint or input event waits for it
    sys.setswitchinterval(GIL_SWITCH_S)
    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else "relay", *argv])
    app.setOrganizationName(ORG)
    app.setApplicationName(APP)
    app.setApplicationDisplayName(APP_NAME)
    return app


def has_screen() -> bool:
    """Qt aborts the process (no exception) when it cannot reach a display: check first."""
    if os.environ.get("QT_QPA_PLATFORM") or not sys.platform.startswith("linux"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def run_gui(argv: list[str], demo: bool = False) -> int:
    """Open the main window and run the event loop until it closes; returns the exit code.
    ``demo``: the bundled Chinese clip is chosen and interpreted at once."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    if not has_screen():
        print("relay: no screen to open the window on (DISPLAY is not set); without one use: "
              "relay run --input FILE (or --demo)", file=sys.stderr)
        return 2
    check_qt_runtime()  # a one-line error (exit 2) before Qt's xcb plugin can abort the process
    try:
        app = make_app(argv)
    except Exception as e:  # no display, missing Qt platform plugin
        print(f"relay: cannot open the window ({e}); for files without a screen use: relay run --input FILE",
              file=sys.stderr)
        return 2
    win = MainWindow()
    win.show()
    if demo:
        win.set_file(str(DEMO_CLIP))
        QTimer.singleShot(0, win.start_session)
    return app.exec()


if __name__ == "__main__":  # python -m app.ui.main
    sys.exit(run_gui(sys.argv[1:]))
