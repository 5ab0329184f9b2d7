"""Screenshots of a real session: the window and the presenter overlay, mid-session on the
Chinese demo clip with the real models. Run under a display (scripts/screenshots.sh starts Xvfb):

    python -m app.ui.screenshots OUT_DIR [--after SECONDS]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from PySide6.QtCore import QEventLoop, QTimer

from app.core.audio import SR
from app.session.options import DEMO_CLIP
from app.ui.main import make_app
from app.ui.window import MainWindow


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m app.ui.screenshots")
    ap.add_argument("out", help="folder for main.png and overlay.png")
    ap.add_argument("--after", type=float, default=38.0, help="seconds of audio before the shots")
    ap.add_argument("--file", default=None, help="audio file (default: the Chinese demo clip)")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    os.environ.setdefault("RELAY_SETTINGS_DIR", tempfile.mkdtemp(prefix="relay-shots-"))

    app = make_app([])
    win = MainWindow()
    win.resize(1280, 800)
    win.show()
    win.overlay.resize(1100, 120)
    screen = app.primaryScreen().availableGeometry()
    win.move(screen.left(), screen.top())
    if not win.set_file(str(args.file or DEMO_CLIP)):
        print(win.message_box.text() if win.message_box else "cannot use the file", file=sys.stderr)
        return 2

    def spin(seconds: float, until=lambda: False) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not until():
            loop = QEventLoop()
            QTimer.singleShot(50, loop.quit)
            loop.exec()

    win.start_session()
    spin(240, lambda: win.controller.state == "running" or not win.controller.busy)
    if win.controller.state != "running":
        print(f"session did not start: {win.status_label.text()}", file=sys.stderr)
        return 1
    spin(args.after, lambda: win.controller.pipe.ring.written / SR >= args.after)
    win.act_overlay_src.setChecked(True)  # the two-line bar: source above the translation
    win.act_overlay.setChecked(True)
    spin(1.5)
    lines = [ln for ln in win.model.data_.lines if ln.target]
    win.grab().save(os.path.join(args.out, "main.png"))
    win.overlay.grab().save(os.path.join(args.out, "overlay.png"))
    print(f"{len(lines)} translated lines at {win.controller.pipe.ring.written / SR:.0f} s; "
          f"saved {args.out}/main.png and overlay.png")
    win.controller.stop()
    spin(120, lambda: not win.controller.busy)
    if win.summary_dialog is not None:
        win.summary_dialog.close()
    win.act_overlay.setChecked(False)
    win.close()
    return 0 if lines else 1


if __name__ == "__main__":
    sys.exit(main())
