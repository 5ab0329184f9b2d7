"""`relay` with no arguments: the desktop window."""

from __future__ import annotations

import logging
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

APP_NAME = "Relay"
GIL_SWITCH_S = 0.002


def make_app(argv: list[str]):
    from PySide6.QtWidgets import QApplication

    from app.ui.settings import APP, ORG

    # the GUI thread competes for the GIL with the pipeline's Python code: a shorter switch
    # interval (default 5 ms) bounds how long a repaint or input event waits for it
    sys.setswitchinterval(GIL_SWITCH_S)
    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else "relay", *argv])
    app.setOrganizationName(ORG)
    app.setApplicationName(APP)
    app.setApplicationDisplayName(APP_NAME)
    return app


def run_gui(argv: list[str]) -> int:
    """Open the main window and run the event loop until it closes; returns the exit code."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    try:
        app = make_app(argv)
    except Exception as e:  # no display, missing Qt platform plugin
        print(f"relay: cannot open the window ({e}); for files without a screen use: relay run --input FILE",
              file=sys.stderr)
        return 2
    from app.ui.window import MainWindow

    win = MainWindow()
    win.show()
    return app.exec()


if __name__ == "__main__":  # python -m app.ui.main
    sys.exit(run_gui(sys.argv[1:]))
